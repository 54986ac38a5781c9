// The core CUDA layer: what a pooled stream or event costs against creating
// and destroying one (the anchor, in the same run), and the vector-add
// kernel's bandwidth against a device-to-device copy of the same bytes.
//
// Counters: loom_ns / anchor_ns per operation and their ratio (< 1: loom faster);
// for kernels, GB/s and the fraction of the copy's bandwidth.
#include "cuda/check.hpp"
#include "cuda/event_pool.hpp"
#include "cuda/stream.hpp"
#include "cuda/stream_pool.hpp"
#include "elementwise/vector_add.hpp"

#include <loom/device.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <chrono>
#include <vector>

namespace {

using loom::bench::Clock;
using loom::bench::median;
using loom::bench::ns_per_call;
using loom::bench::skip_without_gpu;

void report_ratio(benchmark::State& state, double loom_ns, double anchor_ns) {
  state.counters["loom_ns"] = loom_ns;
  state.counters["anchor_ns"] = anchor_ns;
  state.counters["ratio"] = loom_ns / anchor_ns;
}

constexpr int kCalls = 2000;

void BM_StreamPoolAcquireRelease(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  loom::detail::StreamPool pool(0);
  pool.reserve(loom::Priority::normal, 1);
  double loom_ns = 0;
  for (auto _ : state) {
    loom_ns = ns_per_call([&] { benchmark::DoNotOptimize(pool.acquire()); }, kCalls);
  }
  const double anchor_ns = ns_per_call(
      [] {
        cudaStream_t s = nullptr;
        LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        LOOM_CUDA_CHECK(cudaStreamDestroy(s));
      },
      kCalls);
  report_ratio(state, loom_ns, anchor_ns);
}
BENCHMARK(BM_StreamPoolAcquireRelease)->Iterations(3);

void BM_EventPoolAcquireRelease(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  loom::detail::EventPool pool(0);
  pool.reserve(1);
  double loom_ns = 0;
  for (auto _ : state) {
    loom_ns = ns_per_call([&] { benchmark::DoNotOptimize(pool.acquire()); }, kCalls);
  }
  const double anchor_ns = ns_per_call(
      [] {
        cudaEvent_t e = nullptr;
        LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        LOOM_CUDA_CHECK(cudaEventDestroy(e));
      },
      kCalls);
  report_ratio(state, loom_ns, anchor_ns);
}
BENCHMARK(BM_EventPoolAcquireRelease)->Iterations(3);

// Median-free but honest: many back-to-back launches between two events,
// after a warm-up, on buffers (3 x 1 GiB) far larger than the L2.
void BM_VectorAdd(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto variant = static_cast<loom::kernels::MapVariant>(state.range(0));
  const std::size_t n = std::size_t{1} << 28;
  const std::size_t bytes = n * sizeof(float);
  float* a = nullptr;
  float* b = nullptr;
  float* c = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&a), bytes));
  LOOM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&b), bytes));
  LOOM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&c), bytes));
  LOOM_CUDA_CHECK(cudaMemset(a, 0x3F, bytes));
  LOOM_CUDA_CHECK(cudaMemset(b, 0x3E, bytes));
  loom::detail::Stream stream(0, 0);
  loom::detail::Event start(0, loom::detail::EventTiming::enabled);
  loom::detail::Event stop(0, loom::detail::EventTiming::enabled);
  constexpr int kReps = 20;
  const auto time_ms = [&](auto&& launch) {
    launch();
    start.record(stream.view());
    for (int i = 0; i < kReps; ++i) launch();
    stop.record(stream.view());
    stop.synchronize();
    return stop.elapsed_ms_since(start) / kReps;
  };
  double loom_ms = 0;
  for (auto _ : state) {
    loom_ms = time_ms([&] { loom::kernels::vector_add(a, b, c, n, stream.view(), variant); });
    state.SetIterationTime(loom_ms * 1e-3);
  }
  // Anchor: a device-to-device copy reads and writes 2 x bytes; vector add moves 3 x bytes.
  const double copy_ms = time_ms([&] {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, stream.view()));
  });
  const double loom_gbs = 3.0 * static_cast<double>(bytes) / (loom_ms * 1e-3) / 1e9;
  const double copy_gbs = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;
  state.counters["loom_GBps"] = loom_gbs;
  state.counters["copy_GBps"] = copy_gbs;
  state.counters["ratio"] = loom_gbs / copy_gbs;
  state.SetLabel(std::string(to_string(variant)));
  LOOM_CUDA_CHECK(cudaFree(a));
  LOOM_CUDA_CHECK(cudaFree(b));
  LOOM_CUDA_CHECK(cudaFree(c));
}
BENCHMARK(BM_VectorAdd)
    ->Arg(static_cast<int>(loom::kernels::MapVariant::naive))
    ->Arg(static_cast<int>(loom::kernels::MapVariant::grid_stride))
    ->Arg(static_cast<int>(loom::kernels::MapVariant::vectorized))
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
