// main() for the MPI tests: MPI is initialized once around the whole suite
// (with threads: loom's collectives run on its host workers), and only rank
// 0 prints GoogleTest's report.
#include <loom/device.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  // The GPU variants (LOOM_DEVICE=cuda) skip where there is no GPU: ctest
  // reads exit code 77 as skipped.
  const char* device = std::getenv("LOOM_DEVICE");
  if (device != nullptr && std::string(device) == "cuda" && !loom::cuda_availability().available) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::printf("skipped: no GPU: %s\n", loom::cuda_availability().reason.c_str());
    MPI_Finalize();
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int local = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&local, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
