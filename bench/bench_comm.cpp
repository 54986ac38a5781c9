// Collectives of the local backend (comm.hpp): P ranks as threads of this
// process, each with a CPU Runtime, one collective a graph, submit + wait on
// every rank. Host memory; no GPU needed.
//
// BM_LocalAllReduce: an f32 sum over P ranks, in place. Reported as nccl-tests
//   does: algbw = bytes / time, busbw = algbw x 2(P-1)/P (the bytes a ring
//   moves through each rank). Anchor: std::memcpy of the same bytes on one
//   thread (the host's copy bandwidth, counted as read + write): ratio =
//   busbw / memcpy bandwidth.
// BM_LocalRingExchange: every rank sends `bytes` to rank + 1 and receives
//   from rank - 1. Anchor as above; ratio = (bytes / time) / memcpy.
// BM_LocalRingExchangeGpu / BM_LocalAllReduceGpu: the same with device
//   tensors, P ranks on one GPU, each with a CUDA Runtime. Anchor: one
//   cudaMemcpyAsync of all the bytes the ranks receive together (P x bytes),
//   device to device; ratio = (P x bytes / time) / that copy's bandwidth. For
//   the all-reduce, busbw against the same copy.
#include <loom/comm.hpp>
#include <loom/device.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include "bench_support.hpp"

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace {

using loom::bench::Clock;
using loom::bench::median;
using loom::bench::us_since;

// P rank threads, each with its own runtime and graph, stepped together:
// step() runs one submit + wait on every rank and returns rank 0's host
// microseconds from the common start.
class Ranks {
 public:
  using Build = std::function<loom::Graph(loom::Communicator&, loom::Runtime&)>;
  Ranks(int p, const Build& build, bool gpu = false) : start_(p + 1), done_(p + 1) {
    auto comms = loom::local_communicators(p);
    for (int r = 0; r < p; ++r) {
      threads_.emplace_back([this, r, comm = comms[static_cast<std::size_t>(r)], &build, gpu] {
        loom::RuntimeOptions o;
        o.backend = gpu ? loom::Backend::cuda : loom::Backend::cpu;
        o.workers = 1;
        loom::Runtime rt(o);
        const loom::Graph g = build(*comm, rt);
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          const auto t0 = Clock::now();
          rt.submit(g).wait();
          if (r == 0) last_us_ = us_since(t0);
          done_.arrive_and_wait();
        }
      });
    }
    // Each rank has built its graph before the first step.
    step();
  }
  ~Ranks() {
    stop_ = true;
    start_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  double step() {
    start_.arrive_and_wait();
    done_.arrive_and_wait();
    return last_us_;
  }

 private:
  std::barrier<> start_;
  std::barrier<> done_;
  std::vector<std::thread> threads_;
  bool stop_ = false;  // written before start_ releases the ranks
  double last_us_ = 0;
};

// Bytes a microsecond that one thread's memcpy moves (read + write counted once
// each, as a copy's bandwidth is quoted: bytes / time).
double memcpy_bytes_per_us(std::size_t bytes) {
  std::vector<unsigned char> a(bytes, 1);
  std::vector<unsigned char> b(bytes, 0);
  std::vector<double> us;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
    us.push_back(us_since(t0));
  }
  return static_cast<double>(bytes) / median(us);
}

// Rank 0's median microseconds a step, each step an iteration.
double time_steps(benchmark::State& state, Ranks& ranks) {
  std::vector<double> us;
  for (auto _ : state) {
    const double t = ranks.step();
    state.SetIterationTime(t * 1e-6);
    us.push_back(t);
  }
  return median(us);
}

// 2 and 4 ranks, 4 KiB to 64 MiB.
void ranks_and_sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"ranks", "bytes"})
      ->ArgsProduct({{2, 4}, {4 << 10, 256 << 10, 16 << 20, 64 << 20}})
      ->UseManualTime()
      ->Iterations(20)
      ->Unit(benchmark::kMicrosecond);
}

void BM_LocalAllReduce(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
  Ranks ranks(p, [n](loom::Communicator& comm, loom::Runtime& rt) {
    auto x = rt.tensor<float>({n});
    std::fill_n(x.data_as<float>(), n, static_cast<float>(comm.rank() + 1));
    loom::Graph g;
    g.collective(comm.all_reduce(x, x));
    return g;
  });
  const double us = time_steps(state, ranks);
  const double algbw = static_cast<double>(bytes) / us * 1e-3;  // GB/s
  const double busbw = algbw * 2.0 * (p - 1) / p;
  const double copy = memcpy_bytes_per_us(bytes) * 1e-3;
  state.counters["us"] = us;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = busbw;
  state.counters["memcpy_GBps"] = copy;
  state.counters["ratio"] = busbw / copy;
  state.SetLabel("local all_reduce f32 sum in place: busbw vs one thread's memcpy");
}
BENCHMARK(BM_LocalAllReduce)->Apply(ranks_and_sizes);

void BM_LocalRingExchange(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const auto n = static_cast<std::int64_t>(bytes);
  Ranks ranks(p, [n](loom::Communicator& comm, loom::Runtime& rt) {
    auto send = rt.tensor<std::uint8_t>({n});
    auto recv = rt.tensor<std::uint8_t>({n});
    std::memset(send.data(), comm.rank(), send.nbytes());
    loom::Graph g;
    g.collective(comm.ring_exchange(send, recv));
    return g;
  });
  const double us = time_steps(state, ranks);
  const double bw = static_cast<double>(bytes) / us * 1e-3;
  const double copy = memcpy_bytes_per_us(bytes) * 1e-3;
  state.counters["us"] = us;
  state.counters["GBps"] = bw;
  state.counters["memcpy_GBps"] = copy;
  state.counters["ratio"] = bw / copy;
  state.SetLabel("local ring_exchange: bytes a rank receives / time vs one thread's memcpy");
}
BENCHMARK(BM_LocalRingExchange)->Apply(ranks_and_sizes);

// Device-to-device bytes a microsecond of one cudaMemcpyAsync of `bytes`.
double device_copy_bytes_per_us(std::size_t bytes) {
  void* a = nullptr;
  void* b = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
      cudaStreamCreate(&stream) != cudaSuccess) {
    return 0;
  }
  std::vector<double> us;
  for (int i = 0; i < 12; ++i) {
    const auto t0 = Clock::now();
    (void)cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream);
    (void)cudaStreamSynchronize(stream);
    if (i >= 2) us.push_back(us_since(t0));
  }
  (void)cudaStreamDestroy(stream);
  (void)cudaFree(a);
  (void)cudaFree(b);
  return static_cast<double>(bytes) / median(us);
}

void gpu_ranks_and_sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"ranks", "bytes"})
      ->ArgsProduct({{2, 4, 8}, {1 << 20, 16 << 20, 64 << 20, 256 << 20}})
      ->UseManualTime()
      ->Iterations(20)
      ->Unit(benchmark::kMicrosecond);
}

void BM_LocalRingExchangeGpu(benchmark::State& state) {
  if (!loom::cuda_availability().available) {
    state.SkipWithError("no GPU");
    return;
  }
  const int p = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const auto n = static_cast<std::int64_t>(bytes);
  Ranks ranks(
      p,
      [n](loom::Communicator& comm, loom::Runtime& rt) {
        auto send = rt.tensor<std::uint8_t>({n});
        auto recv = rt.tensor<std::uint8_t>({n});
        loom::Graph g;
        g.collective(comm.ring_exchange(send, recv));
        return g;
      },
      true);
  const double us = time_steps(state, ranks);
  const double total = static_cast<double>(bytes) * p;
  const double bw = total / us * 1e-3;
  const double copy = device_copy_bytes_per_us(bytes * static_cast<std::size_t>(p)) * 1e-3;
  state.counters["us"] = us;
  state.counters["GBps"] = bw;
  state.counters["copy_GBps"] = copy;
  state.counters["ratio"] = bw / copy;
  state.SetLabel(
      "local ring_exchange on one GPU: P x bytes / time vs one device copy of P x bytes");
}
BENCHMARK(BM_LocalRingExchangeGpu)->Apply(gpu_ranks_and_sizes);

void BM_LocalAllReduceGpu(benchmark::State& state) {
  if (!loom::cuda_availability().available) {
    state.SkipWithError("no GPU");
    return;
  }
  const int p = static_cast<int>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const auto n = static_cast<std::int64_t>(bytes / sizeof(float));
  Ranks ranks(
      p,
      [n](loom::Communicator& comm, loom::Runtime& rt) {
        auto x = rt.tensor<float>({n});
        auto y = rt.tensor<float>({n});
        loom::Graph g;
        g.collective(comm.all_reduce(x, y));
        return g;
      },
      true);
  const double us = time_steps(state, ranks);
  const double algbw = static_cast<double>(bytes) / us * 1e-3;
  const double busbw = algbw * 2.0 * (p - 1) / p;
  const double copy = device_copy_bytes_per_us(bytes) * 1e-3;
  state.counters["us"] = us;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = busbw;
  state.counters["copy_GBps"] = copy;
  state.counters["ratio"] = busbw / copy;
  state.SetLabel("local all_reduce f32 sum on one GPU, out of place: busbw vs one device copy");
}
BENCHMARK(BM_LocalAllReduceGpu)->Apply(gpu_ranks_and_sizes);

}  // namespace

BENCHMARK_MAIN();
