// The scheduler's own cost while the device is busy: the CPU time loom's
// threads (scheduling thread, host workers) take while one long kernel runs,
// as a share of one core, against a raw cudaStreamSynchronize on the same
// kernel (the driver's default wait, which may spin).
#include "cuda/stream.hpp"
#include "testing/spin.hpp"
#include "testing/spin_op.hpp"

#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <ctime>

namespace {

using loom::bench::Clock;
using loom::bench::skip_without_gpu;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void BM_SchedulerCpuDuringLongKernel(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t kernel_us = state.range(0);
  loom::Runtime rt;
  auto t = rt.tensor<float>({4});
  loom::Graph warm;
  warm.add(loom::ops::fill(t, 0.0F));
  rt.submit(warm).wait();
  loom::Graph g;
  g.add(loom::testing::spin(t, kernel_us));
  g.host("after", [] {}, {t});
  double share = 0;
  for (auto _ : state) {
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    rt.submit(g).wait();  // this thread sleeps in wait(): the CPU time is loom's threads'
    const double wall = seconds_since(t0);
    share = (process_cpu_seconds() - cpu0) / wall;
    state.SetIterationTime(wall);
  }
  // Anchor: the same kernel waited for with a raw stream synchronize.
  loom::detail::Stream stream(0, 0);
  auto* p = t.data_as<float>();
  const double cpu0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  loom::kernels::spin(p, kernel_us, stream.view());
  stream.synchronize();
  const double raw_share = (process_cpu_seconds() - cpu0) / seconds_since(t0);
  state.counters["loom_cpu_share"] = share;
  state.counters["raw_sync_cpu_share"] = raw_share;
  state.SetLabel("share of one core while one kernel runs (target < 0.05)");
}
BENCHMARK(BM_SchedulerCpuDuringLongKernel)
    ->Arg(1000000)
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
