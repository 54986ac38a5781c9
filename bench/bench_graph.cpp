// Graphs: the per-task cost of an eager run of N tiny kernels (a chain, a
// fan-out, a random DAG) against raw launches in the same process (a
// cudaLaunchKernel loop on one stream; launches spread over 4 streams joined
// by events); the latency from device work to the host task it releases;
// and the cost of building and validating a graph, per task.
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "elementwise/map.hpp"
#include "sched/plan.hpp"

#include <loom/device.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <vector>

namespace {

using loom::bench::Clock;
using loom::bench::median;
using loom::bench::ns_per_call;
using loom::bench::skip_without_gpu;

constexpr std::int64_t kTiny = 256;  // floats a tiny kernel writes

enum class Shape { chain, fan_out, random_dag };

loom::Graph make_graph(Shape shape, int n, std::vector<loom::Tensor>& ts) {
  loom::Graph g;
  std::mt19937 rng(7);
  for (int i = 0; i < n; ++i) {
    switch (shape) {
      case Shape::chain: g.add(loom::ops::scale_copy(ts[0], ts[0], 1.0F)); break;
      case Shape::fan_out:
        g.add(loom::ops::fill(ts[static_cast<std::size_t>(i) % ts.size()], 1.0F));
        break;
      case Shape::random_dag: {
        const auto a = rng() % ts.size();
        const auto c = rng() % ts.size();
        g.add(loom::ops::scale_copy(ts[a], ts[c], 1.0F));
        break;
      }
    }
  }
  return g;
}

// Raw anchor: the same number of tiny kernels, on one stream or round-robin
// over 4 streams that join the first with events.
double raw_ns_per_kernel(int n, bool multi_stream, std::vector<loom::Tensor>& ts) {
  std::vector<std::unique_ptr<loom::detail::Stream>> streams;
  std::vector<std::unique_ptr<loom::detail::Event>> events;
  const int count = multi_stream ? 4 : 1;
  for (int i = 0; i < count; ++i) {
    streams.push_back(std::make_unique<loom::detail::Stream>(0, 0));
    events.push_back(std::make_unique<loom::detail::Event>(0));
  }
  std::vector<double> samples;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      const auto s = static_cast<std::size_t>(i % count);
      auto* p = ts[multi_stream ? static_cast<std::size_t>(i) % ts.size() : 0].data_as<float>();
      loom::kernels::fill(p, kTiny, 1.0F, streams[s]->view());
    }
    for (int s = 1; s < count; ++s) {
      events[static_cast<std::size_t>(s)]->record(streams[static_cast<std::size_t>(s)]->view());
      events[static_cast<std::size_t>(s)]->make_wait(streams[0]->view());
    }
    streams[0]->synchronize();
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n);
  }
  return median(samples);
}

// Raw anchor for a DAG: the graph launched by hand exactly as loom's plan
// says (same streams, same event waits, in plan order), without loom. The
// gap to it is loom's own scheduling cost; the gap between it and the
// one-stream loop is what the plan's concurrency costs in events.
double raw_same_plan_ns_per_kernel(const loom::Graph& g, std::vector<loom::Tensor>& ts) {
  const auto plan = loom::detail::make_plan(
      g, std::vector<loom::detail::Placement>(g.size(), loom::detail::Placement::device), 4);
  std::vector<std::unique_ptr<loom::detail::Stream>> streams;
  for (int s = 0; s < plan.stream_count; ++s) {
    streams.push_back(std::make_unique<loom::detail::Stream>(0, 0));
  }
  std::vector<std::unique_ptr<loom::detail::Event>> events;
  for (std::size_t t = 0; t < g.size(); ++t)
    events.push_back(std::make_unique<loom::detail::Event>(0));
  loom::detail::Event joined(0);
  auto* p = ts[0].data_as<float>();
  std::vector<double> samples;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = Clock::now();
    std::vector<bool> used(streams.size(), false);
    for (auto t : plan.order) {
      const auto& pt = plan.tasks[t];
      const auto sv = streams[static_cast<std::size_t>(pt.stream)]->view();
      used[static_cast<std::size_t>(pt.stream)] = true;
      for (auto w : pt.waits) events[w]->make_wait(sv);
      loom::kernels::scale_copy(p, p, kTiny, 1.0F, sv);
      if (pt.record_event) events[t]->record(sv);
    }
    for (std::size_t s = 1; s < streams.size(); ++s) {
      if (!used[s]) continue;
      joined.record(streams[s]->view());
      joined.make_wait(streams[0]->view());
    }
    streams[0]->synchronize();
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
                      static_cast<double>(g.size()));
  }
  return median(samples);
}

void BM_EagerGraph(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<Shape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 16; ++i) ts.push_back(rt.tensor<float>({kTiny}));
  const auto g = make_graph(shape, n, ts);
  rt.submit(g).wait();  // warm
  std::vector<double> samples;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    rt.submit(g).wait();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    samples.push_back(ns / n);
    state.SetIterationTime(ns * 1e-9);
  }
  const double loom_ns = median(samples);
  const double raw_ns = raw_ns_per_kernel(n, shape == Shape::fan_out, ts);
  state.counters["loom_ns_per_task"] = loom_ns;
  state.counters["raw_ns_per_kernel"] = raw_ns;
  state.counters["ratio"] = loom_ns / raw_ns;
  if (shape == Shape::random_dag) {
    const double same_plan_ns = raw_same_plan_ns_per_kernel(g, ts);
    state.counters["raw_same_plan_ns"] = same_plan_ns;
    state.counters["ratio_vs_same_plan"] = loom_ns / same_plan_ns;
  }
  state.SetLabel(shape == Shape::chain     ? "chain vs one-stream loop"
                 : shape == Shape::fan_out ? "fan-out vs 4 streams + events"
                                           : "random DAG vs one-stream loop");
}
BENCHMARK(BM_EagerGraph)
    ->ArgsProduct({{0, 1, 2}, {1000}})
    ->UseManualTime()
    ->Iterations(20)
    ->Unit(benchmark::kMillisecond);

// A tiny kernel, then a host task: how long after the kernel's completion
// (seen by a raw event synchronize in the anchor) the host task starts.
void BM_HostTaskRelease(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  loom::Runtime rt;
  auto t = rt.tensor<float>({kTiny});
  std::atomic<long long> started_ns{0};
  loom::Graph g;
  g.add(loom::ops::fill(t, 1.0F));
  g.host("release",
         [&] {
           started_ns =
               std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                   .count();
         },
         {t});
  rt.submit(g).wait();
  std::vector<double> loom_us;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    rt.submit(g).wait();
    const double us =
        (static_cast<double>(started_ns.load()) -
         static_cast<double>(
             std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count())) /
        1e3;
    loom_us.push_back(us);
    state.SetIterationTime(us * 1e-6);
  }
  loom::detail::Stream s(0, 0);
  loom::detail::Event e(0);
  std::vector<double> raw_us;
  for (int i = 0; i < 50; ++i) {
    const auto t0 = Clock::now();
    loom::kernels::fill(t.data_as<float>(), kTiny, 1.0F, s.view());
    e.record(s.view());
    e.synchronize();
    raw_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  state.counters["submit_to_host_task_us"] = median(loom_us);
  state.counters["raw_launch_to_sync_us"] = median(raw_us);
  state.counters["release_latency_us"] = median(loom_us) - median(raw_us);
}
BENCHMARK(BM_HostTaskRelease)->UseManualTime()->Iterations(200)->Unit(benchmark::kMicrosecond);

// Building and validating a graph (CPU only: no launches).
void BM_GraphBuildAndValidate(benchmark::State& state) {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  loom::Runtime rt(o);
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 64; ++i) ts.push_back(rt.tensor<float>({kTiny}));
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    auto g = make_graph(Shape::random_dag, n, ts);
    g.validate();
    benchmark::DoNotOptimize(g.edge_count());
  }
  state.counters["ns_per_task"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}
BENCHMARK(BM_GraphBuildAndValidate)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
