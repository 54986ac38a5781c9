// The job's communicator under mpirun against what a user would call
// instead, in the same run: loom's all_reduce (world_communicator's backend,
// on the runtime's default memory) against a bare MPI_Allreduce loop over
// host buffers (the mpi backend) or a bare ncclAllReduce loop over the same
// device buffers (nccl). On a GPU it also measures pinned host-to-device
// bandwidth, the yardstick of the mpi backend's staged all-reduce.
//
//   mpirun -np 2 bench_comm_mpi [--max 256M] [--iters 20]
//
// Columns: bytes, loom us and busbw (GB/s), anchor us and busbw, ratio =
// loom busbw / anchor busbw. busbw = bytes / time x 2(P-1)/P (1 with one
// rank, so that one rank still shows a figure). Times are the slowest rank's.
#include <loom/comm.hpp>
#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(x)                                              \
  do {                                                             \
    const cudaError_t e = (x);                                     \
    if (e != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                \
    }                                                              \
  } while (0)
#define CHECK_NCCL(x)                                              \
  do {                                                             \
    const ncclResult_t e = (x);                                    \
    if (e != ncclSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(e)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                \
    }                                                              \
  } while (0)
#define CHECK_MPI(x)                           \
  do {                                         \
    if ((x) != MPI_SUCCESS) {                  \
      std::fprintf(stderr, "%s failed\n", #x); \
      MPI_Abort(MPI_COMM_WORLD, 1);            \
    }                                          \
  } while (0)

using Clock = std::chrono::steady_clock;

// Seconds an iteration of `step`, the slowest rank's, after warm-up.
template <class Step>
double time_it(int iterations, Step step) {
  for (int i = 0; i < 3; ++i) step();
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  const auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i) step();
  double mine = std::chrono::duration<double>(Clock::now() - t0).count() / iterations;
  double slowest = 0;
  CHECK_MPI(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return slowest;
}

double pinned_upload_gbps(std::size_t bytes) {
  void* host = nullptr;
  void* dev = nullptr;
  CHECK_CUDA(cudaMallocHost(&host, bytes));
  CHECK_CUDA(cudaMalloc(&dev, bytes));
  std::vector<double> s;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = Clock::now();
    CHECK_CUDA(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  CHECK_CUDA(cudaFreeHost(host));
  CHECK_CUDA(cudaFree(dev));
  std::sort(s.begin(), s.end());
  return static_cast<double>(bytes) / s[s.size() / 2] / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::int64_t max_bytes = std::int64_t{256} << 20;
  int iterations = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--max") max_bytes = std::atoll(argv[i + 1]) << 20;  // MiB
    if (arg == "--iters") iterations = std::max(1, std::atoi(argv[i + 1]));
  }
  int rank = 0;
  int p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  {
    loom::Runtime rt;
    auto comm = loom::world_communicator(rt);
    const bool nccl = comm->backend() == "nccl";
    const bool on_gpu = rt.default_memory().is_device();
    ncclComm_t raw = nullptr;
    cudaStream_t stream = nullptr;
    if (nccl) {
      ncclUniqueId id{};
      if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
      CHECK_MPI(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
      CHECK_NCCL(ncclCommInitRank(&raw, p, id, rank));
      CHECK_CUDA(cudaStreamCreate(&stream));
    }
    const double bus = p > 1 ? 2.0 * (p - 1) / p : 1.0;
    if (rank == 0) {
      std::printf("# all_reduce f32 sum, out of place: loom (%s backend, %s) vs %s, %d rank(s)\n",
                  std::string(comm->backend()).c_str(), rt.default_memory().to_string().c_str(),
                  nccl ? "a bare ncclAllReduce loop" : "a bare MPI_Allreduce loop on host buffers",
                  p);
      std::printf("%12s %10s %10s %10s %10s %7s\n", "bytes", "loom_us", "loom_busbw", "anchor_us",
                  "anch_busbw", "ratio");
    }
    double last_algbw = 0;  // GB/s at the largest size
    for (std::int64_t bytes = 1 << 20; bytes <= max_bytes; bytes *= 4) {
      const std::int64_t n = bytes / 4;
      auto in = rt.tensor<float>({n});
      auto out = rt.tensor<float>({n});
      loom::Graph g;
      g.collective(comm->all_reduce(in, out));
      std::optional<loom::Executable> exe;
      if (nccl) exe = rt.compile(g);
      const double loom_s = time_it(iterations, [&] {
        if (exe) {
          exe->run().wait();
        } else {
          rt.submit(g).wait();
        }
      });
      double anchor_s = 0;
      if (nccl) {
        anchor_s = time_it(iterations, [&] {
          CHECK_NCCL(ncclAllReduce(in.data(), out.data(), static_cast<std::size_t>(n), ncclFloat32,
                                   ncclSum, raw, stream));
          CHECK_CUDA(cudaStreamSynchronize(stream));
        });
      } else {
        std::vector<float> a(static_cast<std::size_t>(n), 1.0F);
        std::vector<float> b(static_cast<std::size_t>(n));
        anchor_s = time_it(iterations, [&] {
          CHECK_MPI(MPI_Allreduce(a.data(), b.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD));
        });
      }
      last_algbw = static_cast<double>(bytes) / loom_s / 1e9;
      if (rank == 0) {
        const double loom_bus = static_cast<double>(bytes) / loom_s / 1e9 * bus;
        const double anchor_bus = static_cast<double>(bytes) / anchor_s / 1e9 * bus;
        std::printf("%12lld %10.1f %10.2f %10.1f %10.2f %7.3f\n", static_cast<long long>(bytes),
                    loom_s * 1e6, loom_bus, anchor_s * 1e6, anchor_bus, loom_bus / anchor_bus);
      }
    }
    if (on_gpu && !nccl && rank == 0) {
      const double pinned = pinned_upload_gbps(static_cast<std::size_t>(max_bytes));
      std::printf(
          "# pinned host-to-device: %.2f GB/s at %lld bytes (the mpi backend's yardstick: "
          "its algbw at that size / this)\n",
          pinned, static_cast<long long>(max_bytes));
      std::printf(
          "# mpi all_reduce algbw at %lld bytes: %.2f GB/s = %.3f x pinned (target >= 0.5)\n",
          static_cast<long long>(max_bytes), last_algbw, last_algbw / pinned);
    }
    if (raw != nullptr) CHECK_NCCL(ncclCommDestroy(raw));
    if (stream != nullptr) CHECK_CUDA(cudaStreamDestroy(stream));
  }
  MPI_Finalize();
  return 0;
}
