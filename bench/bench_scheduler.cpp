// BM_SchedulerCpuDuringLongKernel: the scheduler's own cost while the device
//   is busy: the CPU time loom's threads (scheduling thread, host workers)
//   take while one long kernel runs, as a share of one core, against a raw
//   cudaStreamSynchronize on the same kernel (the driver's default wait,
//   which may spin).
// BM_RunOverTensors: a run's host path on the CPU backend (any machine): one
//   empty host task that reads and writes N tensors (as a compiled segment
//   of N tasks does, each writing its own output and reading others'),
//   submit+wait, µs a run, against N = 1 (the ratio: what the tensors cost),
//   and where the time goes (path_*, bench_run_path.hpp). The tensors are
//   400 bytes in blocks of their own, so no two spans merge.
#include "cuda/stream.hpp"
#include "testing/spin.hpp"
#include "testing/spin_op.hpp"

#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_run_path.hpp"
#include "bench_support.hpp"

#include <cstddef>
#include <ctime>
#include <vector>

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

// One empty host task over n tensors, read and written, submitted and waited for.
double run_over_tensors_us(loom::Runtime& rt, const loom::Graph& g, int runs) {
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    rt.submit(g).wait();
    us.push_back(loom::bench::us_since(t0));
  }
  return loom::bench::median(us);
}

loom::Graph graph_over(const std::vector<loom::Tensor>& tensors) {
  loom::Graph g;
  g.host(
      "touch", [] {}, tensors, tensors);
  return g;
}

void BM_RunOverTensors(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  loom::Runtime rt(loom::RuntimeOptions{.backend = loom::Backend::cpu});
  std::vector<loom::Tensor> tensors;
  for (std::size_t i = 0; i < n; ++i) tensors.push_back(rt.tensor<float>({100}));
  const std::vector<loom::Tensor> one(tensors.begin(), tensors.begin() + 1);
  const loom::Graph g = graph_over(tensors);
  const loom::Graph g1 = graph_over(one);
  (void)run_over_tensors_us(rt, g, 20);  // warm: prepared, pools grown
  (void)run_over_tensors_us(rt, g1, 20);
  double us = 0;
  double us1 = 0;
  for (auto _ : state) {
    us = run_over_tensors_us(rt, g, 50);
    us1 = run_over_tensors_us(rt, g1, 50);
    state.SetIterationTime(us * 1e-6);
  }
  loom::bench::profile_run_path(state, 50, [&] { rt.submit(g).wait(); });
  state.counters["loom_us_per_run"] = us;
  state.counters["anchor_one_tensor_us"] = us1;
  state.counters["ratio"] = us / us1;
  state.counters["us_per_tensor"] = (us - us1) / static_cast<double>(n);
  state.SetLabel("CPU backend: one host task over N tensors, submit+wait, against one tensor");
}
BENCHMARK(BM_RunOverTensors)
    ->Arg(1000)
    ->Arg(10000)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
