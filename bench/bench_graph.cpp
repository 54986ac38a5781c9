// Graphs: the per-node cost of an eager run of a DAG of tiny kernels
// against what a user would write instead, in the same process on the same
// kernels; the latency from device work to the host task it releases; and
// the cost of building and validating a graph, per task.
//
// BM_EagerGraph: the DAGs of bench_dag.hpp (chain, 8 lanes, random with ~1.5
//   edges a node, fork-4/join diamonds; 100, 1000 and 10,000 nodes), each
//   node a user's loom::kernel_task launching dag_node<<<1, 32>>> with
//   loom::launch (loom's inferred edges checked equal to the DAG's).
//   loom: rt.submit(g).wait() with default RuntimeOptions, µs a node.
//   Anchor (ratio = loom / anchor): the same kernels launched raw
//   (cudaLaunchKernel, checked) in topological order on one stream, then one
//   cudaStreamSynchronize: what a user without a runtime writes, and for
//   kernels this small the fastest eager way (launch cost bounds it; more
//   streams add events and gain nothing).
// BM_DagGraphBuild (CPU only, runs without a GPU): building those DAGs as
//   loom graphs of kernel tasks, µs a node, with the edge check.
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "elementwise/map.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_dag.hpp"
#include "bench_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::bench::Clock;
using loom::bench::Dag;
using loom::bench::DagShape;
using loom::bench::median;
using loom::bench::skip_without_gpu;
using loom::bench::us_since;

constexpr std::int64_t kTiny = 256;  // floats a tiny kernel writes

// n scale_copy ops between random pairs of `ts` (graph building only).
loom::Graph random_op_graph(int n, const std::vector<loom::Tensor>& ts) {
  loom::Graph g;
  std::mt19937 rng(7);
  for (int i = 0; i < n; ++i) {
    const auto a = rng() % ts.size();
    const auto c = rng() % ts.size();
    g.add(loom::ops::scale_copy(ts[a], ts[c], 1.0F));
  }
  return g;
}

void BM_EagerGraph(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<DagShape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  const auto dag_case = loom::bench::dag_case(shape, n, rt);
  const Dag& dag = dag_case.dag;
  const auto& outputs = dag_case.outputs;
  const auto& g = dag_case.graph;
  loom::detail::Stream stream(0, 0);
  const cudaStream_t s = stream.view().native();
  const auto raw = [&] {
    const auto t0 = Clock::now();
    loom::bench::launch_raw(dag, outputs, s);
    LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
    return us_since(t0);
  };
  // Both sides warmed up, then timed alternately, so that both see the same
  // machine; the ratio is the median of the per-sample ratios.
  loom::bench::warm_up([&] {
    rt.submit(g).wait();
    (void)raw();
  });
  loom::bench::PairedTimes times(static_cast<double>(n));
  for (auto _ : state) {
    const auto t0 = Clock::now();
    rt.submit(g).wait();
    const double l = us_since(t0);
    times.add(l, raw());
    state.SetIterationTime(l * 1e-6);
  }
  times.report(state);
  state.counters["edges"] = static_cast<double>(dag.edges);
  state.SetLabel(loom::bench::dag_label(dag) +
                 ": eager submit+wait vs the same kernels launched on one raw stream + sync");
}
LOOM_DAG_BENCHMARK(BM_EagerGraph, 100, 100);
LOOM_DAG_BENCHMARK(BM_EagerGraph, 1000, 30);
LOOM_DAG_BENCHMARK(BM_EagerGraph, 10000, 8);

// The DAGs as loom graphs of kernel tasks, built on the CPU backend (no
// launches): loom's build cost a node, and the edge check, without a GPU.
void BM_DagGraphBuild(benchmark::State& state) {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  loom::Runtime rt(o);
  const auto shape = static_cast<DagShape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const Dag dag = loom::bench::make_dag(shape, n);
  const auto outputs = loom::bench::node_outputs(rt, n);
  loom::bench::check_edges(loom::bench::dag_graph(dag, outputs), dag);
  std::vector<double> us;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto g = loom::bench::dag_graph(dag, outputs);
    benchmark::DoNotOptimize(g.edge_count());
    us.push_back(us_since(t0) / n);
    state.PauseTiming();  // not the graph's destruction
    g = loom::Graph();
    state.ResumeTiming();
  }
  state.counters["loom_us_per_node"] = median(us);
  state.counters["edges"] = static_cast<double>(dag.edges);
  state.SetLabel(loom::bench::dag_label(dag) +
                 ": kernel tasks added to a graph (CPU backend, no launch)");
}
BENCHMARK(BM_DagGraphBuild)
    ->ArgNames({"shape", "nodes"})
    ->ArgsProduct({{0, 1, 2, 3}, {100, 1000, 10000}})
    ->Iterations(10)
    ->Unit(benchmark::kMicrosecond);

// A tiny kernel, then a host task: how long after the kernel's completion
// (seen by a raw event synchronize in the anchor) the host task starts.
void BM_HostTaskRelease(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
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
    auto g = random_op_graph(n, ts);
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
