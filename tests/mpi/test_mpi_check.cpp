// MPI results go through loom's one checking path: a failing call becomes a
// loom::MpiError naming the call, file, line and task, instead of aborting.
#include "comm/mpi_check.hpp"
#include "core/task_context.hpp"

#include <loom/error.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

class MpiCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  void TearDown() override { MPI_Comm_free(&comm_); }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

TEST_F(MpiCheck, CollectivesSucceedThroughTheCheck) {
  const int mine = rank_ + 1;
  int total = 0;
  LOOM_MPI_CHECK(MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, comm_));
  EXPECT_EQ(total, size_ * (size_ + 1) / 2);
}

TEST_F(MpiCheck, AFailingCallThrowsMpiErrorNamingTheTask) {
  const loom::detail::TaskScope scope("exchange halo");
  int value = 0;
  try {
    // A rank that does not exist: MPI reports MPI_ERR_RANK, which we get back.
    LOOM_MPI_CHECK(MPI_Send(&value, 1, MPI_INT, size_ + 5, 0, comm_));
    FAIL() << "expected MpiError";
  } catch (const loom::MpiError& e) {
    EXPECT_NE(e.code(), MPI_SUCCESS);
    EXPECT_EQ(e.task(), "exchange halo");
    EXPECT_NE(e.call().find("MPI_Send"), std::string::npos);
    EXPECT_FALSE(e.message().empty());
  }
  // The communicator is still usable afterwards.
  EXPECT_NO_THROW(LOOM_MPI_CHECK(MPI_Barrier(comm_)));
}

}  // namespace
