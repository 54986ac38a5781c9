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
#include "testing/spin.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/graph.hpp>
#include <loom/kernel_task.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::bench::Clock;
using loom::bench::median;
using loom::bench::ns_per_call;
using loom::bench::skip_without_gpu;

constexpr std::int64_t kTiny = 256;  // floats a tiny kernel writes

enum class Shape { chain, fan_out, random_dag, kernel_task_chain };

loom::Graph make_graph(Shape shape, int n, std::vector<loom::Tensor>& ts) {
  loom::Graph g;
  std::mt19937 rng(7);
  for (int i = 0; i < n; ++i) {
    switch (shape) {
      case Shape::chain: g.add(loom::ops::scale_copy(ts[0], ts[0], 1.0F)); break;
      case Shape::kernel_task_chain: {
        // The chain's kernel as a user's kernel task: what the convenience costs.
        const auto t = ts[0];
        g.add(loom::kernel_task("scale", {t}, {t}, [t](loom::KernelContext& k) {
          loom::kernels::scale_copy(t.data_as<float>(), t.data_as<float>(), kTiny, 1.0F,
                                    loom::StreamView(loom::cuda_stream(k)));
        }));
        break;
      }
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

// Raw anchor of the same kernels: the graph's tasks launched by hand in
// submission order on one stream (no events, no loom), enqueue + synchronize,
// per kernel. With `enqueue_only`, the enqueue alone (the CPU side; the
// stream is held behind a spin kernel meanwhile).
double raw_same_kernels_once(const loom::Graph& g, loom::detail::Stream& stream,
                             bool enqueue_only) {
  if (enqueue_only) {
    loom::kernels::spin(g.tasks().back().writes.front().data_as<float>(), 20000, stream.view());
  }
  const auto t0 = Clock::now();
  for (const auto& task : g.tasks()) {
    const auto* src = task.reads.empty() ? nullptr : task.reads.front().data_as<float>();
    auto* dst = task.writes.front().data_as<float>();
    if (src == nullptr) {
      loom::kernels::fill(dst, kTiny, 1.0F, stream.view());
    } else {
      loom::kernels::scale_copy(src, dst, kTiny, 1.0F, stream.view());
    }
  }
  const auto t1 = Clock::now();
  stream.synchronize();
  const auto t2 = Clock::now();
  return std::chrono::duration<double, std::nano>((enqueue_only ? t1 : t2) - t0).count() /
         static_cast<double>(g.size());
}

void BM_EagerGraph(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<Shape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::RuntimeOptions options;
  options.streams_per_priority = static_cast<int>(state.range(2));
  loom::Runtime rt(options);
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 16; ++i) ts.push_back(rt.tensor<float>({kTiny}));
  const auto g = make_graph(shape, n, ts);
  // Warm both sides up (clocks, lazy module loading, pools) for ~100 ms,
  // then time loom and the raw anchor alternately, so that both see the
  // same machine; the ratio is the median of the per-iteration ratios.
  loom::detail::Stream raw_stream(0, 0);
  for (const auto until = Clock::now() + std::chrono::milliseconds(100); Clock::now() < until;) {
    rt.submit(g).wait();
    (void)raw_same_kernels_once(g, raw_stream, false);
  }
  std::vector<double> samples;
  std::vector<double> raw_samples;
  std::vector<double> ratios;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    rt.submit(g).wait();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    samples.push_back(ns / n);
    state.SetIterationTime(ns * 1e-9);
    raw_samples.push_back(raw_same_kernels_once(g, raw_stream, false));
    ratios.push_back(samples.back() / raw_samples.back());
  }
  const double loom_ns = median(samples);
  // The anchor the targets name: the same kernels in a raw loop on one stream.
  state.counters["loom_ns_per_task"] = loom_ns;
  state.counters["raw_one_stream_ns"] = median(raw_samples);
  state.counters["ratio"] = median(ratios);
  state.counters["raw_enqueue_ns"] = raw_same_kernels_once(g, raw_stream, true);
  state.counters["raw_fill_loop_ns"] = raw_ns_per_kernel(n, false, ts);
  if (shape == Shape::fan_out) {
    state.counters["raw_4_streams_ns"] = raw_ns_per_kernel(n, true, ts);
  }
  if (shape == Shape::random_dag) {
    const double same_plan_ns = raw_same_plan_ns_per_kernel(g, ts);
    state.counters["raw_same_plan_ns"] = same_plan_ns;
    state.counters["ratio_vs_same_plan"] = loom_ns / same_plan_ns;
  }
  const char* what = shape == Shape::chain               ? "chain"
                     : shape == Shape::fan_out           ? "fan-out"
                     : shape == Shape::kernel_task_chain ? "kernel-task chain"
                                                         : "random DAG";
  state.SetLabel(std::string(what) + ", " + std::to_string(options.streams_per_priority) +
                 " stream(s) a priority, vs the same kernels on one raw stream");
}
BENCHMARK(BM_EagerGraph)
    ->ArgsProduct({{0, 1, 2, 3}, {1000}, {4, 1}})
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

// Building only (no validation), per task, for two access patterns:
// 0: a chain over separate tensors (task i reads t[i], writes t[i+1]);
// 1: every task reads one shared tensor and writes its own.
// The ops are made in the loop, as a user building a graph would.
void BM_GraphBuild(benchmark::State& state) {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  loom::Runtime rt(o);
  const bool shared = state.range(0) == 1;
  const auto n = static_cast<std::size_t>(state.range(1));
  std::vector<loom::Tensor> ts;
  ts.reserve(n + 1);
  for (std::size_t i = 0; i <= n; ++i) ts.push_back(rt.tensor<float>({16}));
  double total_ns = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    loom::Graph g;
    for (std::size_t i = 0; i < n; ++i) {
      g.add(loom::ops::scale_copy(shared ? ts[n] : ts[i], ts[shared ? i : i + 1], 1.0F));
    }
    benchmark::DoNotOptimize(g.edge_count());
    total_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    state.PauseTiming();  // not the graph's destruction
    g = loom::Graph();
    state.ResumeTiming();
  }
  state.counters["ns_per_task"] =
      total_ns / (static_cast<double>(state.iterations()) * static_cast<double>(n));
  state.SetLabel(shared ? "readers of one tensor" : "chain, separate tensors");
}
BENCHMARK(BM_GraphBuild)->ArgsProduct({{0, 1}, {1000, 65536}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
