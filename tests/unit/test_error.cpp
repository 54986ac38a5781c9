// The error hierarchy and the one checking path for CUDA, NCCL (and MPI, in
// tests/mpi). None of this needs a GPU: the checks are fed result codes.
#include "comm/nccl_check.hpp"
#include "core/task_context.hpp"
#include "cuda/check.hpp"

#include <loom/error.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using loom::detail::TaskScope;

TEST(Error, WhatCarriesCallTaskFileAndLine) {
  const loom::Error e("it broke", {"do_thing(1)", "src/x.cpp", 42, "blur"});
  EXPECT_STREQ(e.what(), "loom: task 'blur': do_thing(1) failed: it broke [src/x.cpp:42]");
  EXPECT_EQ(e.message(), "it broke");
  EXPECT_EQ(e.call(), "do_thing(1)");
  EXPECT_EQ(e.file(), "src/x.cpp");
  EXPECT_EQ(e.line(), 42);
  EXPECT_EQ(e.task(), "blur");
}

TEST(Error, WhatWithoutContextIsJustTheMessage) {
  const loom::InvalidArgument e("expected a 3-d tensor, got 2-d");
  EXPECT_STREQ(e.what(), "loom: expected a 3-d tensor, got 2-d");
  EXPECT_TRUE(e.task().empty());
}

TEST(Error, AttachTaskNamesATaskOnceAndKeepsAnExistingName) {
  loom::Error e("boom");
  e.attach_task("first");
  e.attach_task("second");
  EXPECT_EQ(e.task(), "first");
  EXPECT_STREQ(e.what(), "loom: task 'first': boom");
}

TEST(Error, EveryKindIsALoomErrorAndAStdException) {
  const auto is_loom_error = [](auto&& thrower) {
    try {
      thrower();
    } catch (const loom::Error&) {
      return true;
    } catch (...) {
      return false;
    }
    return false;
  };
  EXPECT_TRUE(is_loom_error([] { throw loom::CudaError(2, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::NcclError(3, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::MpiError(4, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::InvalidArgument("x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::OutOfMemory(8, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::Cancelled("x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::NoDevice(loom::NoDevice::Reason::no_driver, "x"); }));
  EXPECT_TRUE(is_loom_error([] { throw loom::InternalError("x"); }));
  static_assert(std::is_base_of_v<std::exception, loom::Error>);
}

TEST(CudaCheck, SuccessDoesNothing) { EXPECT_NO_THROW(LOOM_CUDA_CHECK(cudaSuccess)); }

TEST(CudaCheck, FailureNamesCallFileLineAndTask) {
  const TaskScope scope("rgb_to_gray");
  try {
    LOOM_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "expected a throw";
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorInvalidValue));
    EXPECT_EQ(e.call(), "cudaErrorInvalidValue");
    EXPECT_EQ(e.task(), "rgb_to_gray");
    EXPECT_NE(e.file().find("test_error.cpp"), std::string::npos);
    EXPECT_GT(e.line(), 0);
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidValue"), std::string::npos);
  }
}

TEST(CudaCheck, EvaluatesItsArgumentOnce) {
  int calls = 0;
  const auto call = [&calls] {
    ++calls;
    return cudaErrorInvalidValue;
  };
  EXPECT_THROW(LOOM_CUDA_CHECK(call()), loom::CudaError);
  EXPECT_EQ(calls, 1);
}

TEST(CudaCheck, OutOfMemoryAndMissingDevicesHaveTheirOwnTypes) {
  EXPECT_THROW(LOOM_CUDA_CHECK(cudaErrorMemoryAllocation), loom::OutOfMemory);
  try {
    LOOM_CUDA_CHECK(cudaErrorNoDevice);
    FAIL();
  } catch (const loom::NoDevice& e) {
    EXPECT_EQ(e.reason(), loom::NoDevice::Reason::no_device);
  }
  try {
    LOOM_CUDA_CHECK(cudaErrorInsufficientDriver);
    FAIL();
  } catch (const loom::NoDevice& e) {
    EXPECT_EQ(e.reason(), loom::NoDevice::Reason::driver_too_old);
  }
}

TEST(CudaCheck, AssertFormLogsAndNeverThrows) {
  bool ok = true;
  EXPECT_NO_THROW(ok = LOOM_CUDA_ASSERT(cudaErrorInvalidValue));
  EXPECT_FALSE(ok);
  EXPECT_TRUE(LOOM_CUDA_ASSERT(cudaSuccess));
}

TEST(TaskScope, NestsAndRestores) {
  EXPECT_TRUE(loom::detail::current_task().empty());
  {
    const TaskScope outer("outer");
    EXPECT_EQ(loom::detail::current_task(), "outer");
    {
      const TaskScope inner("inner");
      EXPECT_EQ(loom::detail::current_task(), "inner");
    }
    EXPECT_EQ(loom::detail::current_task(), "outer");
  }
  EXPECT_TRUE(loom::detail::current_task().empty());
}

TEST(NcclCheck, FailureBecomesNcclErrorWithTask) {
  const TaskScope scope("all_reduce grads");
  try {
    LOOM_NCCL_CHECK(ncclInvalidArgument);
    FAIL() << "expected a throw";
  } catch (const loom::NcclError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(ncclInvalidArgument));
    EXPECT_EQ(e.task(), "all_reduce grads");
    EXPECT_EQ(e.call(), "ncclInvalidArgument");
  }
  EXPECT_NO_THROW(LOOM_NCCL_CHECK(ncclSuccess));
}

}  // namespace
