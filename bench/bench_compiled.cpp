// Compiled graphs (Runtime::compile): replay per node against a CUDA graph of
// the same kernels built by hand in the same run (stream capture on raw
// streams with the same dependencies, cudaGraphLaunch), for a chain of 1000
// tiny kernels, 8 independent lanes and a random DAG of 1000; the cost of
// compiling, per node, against the hand-built graph's cudaGraphInstantiate
// (and its capture + instantiate); and eager against compiled runs of a
// 100-node chain.
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "elementwise/map.hpp"
#include "sched/plan.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::bench::Clock;
using loom::bench::median;
using loom::bench::skip_without_gpu;

constexpr std::int64_t kTiny = 256;  // floats a tiny kernel touches
constexpr int kReplays = 20;         // launches a timed sample

enum class Shape { chain, lanes, random_dag };

const char* shape_name(Shape s) {
  return s == Shape::chain ? "chain" : s == Shape::lanes ? "8 lanes" : "random DAG";
}

// n tiny scale_copy kernels: one chain in place; 8 chains on 8 tensors,
// interleaved; or random pairs of 16 tensors.
loom::Graph make_graph(Shape shape, int n, const std::vector<loom::Tensor>& ts) {
  loom::Graph g;
  std::mt19937 rng(7);
  for (int i = 0; i < n; ++i) {
    switch (shape) {
      case Shape::chain: g.add(loom::ops::scale_copy(ts[0], ts[0], 1.0F)); break;
      case Shape::lanes: {
        const auto& t = ts[static_cast<std::size_t>(i % 8)];
        g.add(loom::ops::scale_copy(t, t, 1.0F));
        break;
      }
      case Shape::random_dag:
        g.add(loom::ops::scale_copy(ts[rng() % ts.size()], ts[rng() % ts.size()], 1.0F));
        break;
    }
  }
  return g;
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// The anchor: the graph's kernels captured by hand on raw streams, with the
// dependencies loom's plan gives them (same streams, same event waits),
// forked from and joined to one origin stream, then instantiated.
class HandGraph {
 public:
  explicit HandGraph(const loom::Graph& g) : origin_(0, 0), fork_(0) {
    const auto plan = loom::detail::make_plan(
        g, std::vector<loom::detail::Placement>(g.size(), loom::detail::Placement::device), 4);
    std::vector<std::unique_ptr<loom::detail::Stream>> streams(
        static_cast<std::size_t>(plan.stream_count));
    std::vector<std::unique_ptr<loom::detail::Event>> events(g.size());
    std::vector<loom::detail::Event> joins;
    for (auto t : plan.order) {
      auto& s = streams[static_cast<std::size_t>(plan.tasks[t].stream)];
      if (!s) s = std::make_unique<loom::detail::Stream>(0, 0);
      for (auto w : plan.tasks[t].waits) {
        if (!events[w]) events[w] = std::make_unique<loom::detail::Event>(0);
      }
    }
    for (const auto& s : streams) {
      if (s) joins.emplace_back(0);
    }
    const auto t0 = Clock::now();
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(origin_.view().native(), cudaStreamCaptureModeRelaxed));
    fork_.record(origin_.view());
    for (const auto& s : streams) {
      if (s) fork_.make_wait(s->view());
    }
    for (auto t : plan.order) {
      const auto sv = streams[static_cast<std::size_t>(plan.tasks[t].stream)]->view();
      for (auto w : plan.tasks[t].waits) events[w]->make_wait(sv);
      const auto& task = g.tasks()[t];
      loom::kernels::scale_copy(task.reads.front().data_as<float>(),
                                task.writes.front().data_as<float>(), kTiny, 1.0F, sv);
      if (events[t]) events[t]->record(sv);
    }
    std::size_t j = 0;
    for (const auto& s : streams) {
      if (!s) continue;
      joins[j].record(s->view());
      joins[j].make_wait(origin_.view());
      ++j;
    }
    cudaGraph_t graph = nullptr;
    LOOM_CUDA_CHECK(cudaStreamEndCapture(origin_.view().native(), &graph));
    capture_us = us_since(t0);
    const auto t1 = Clock::now();
    LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph, 0));
    instantiate_us = us_since(t1);
    LOOM_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  ~HandGraph() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  }
  HandGraph(const HandGraph&) = delete;
  HandGraph& operator=(const HandGraph&) = delete;

  /// `times` launches, then a wait: microseconds.
  double replay_us(int times) {
    const auto t0 = Clock::now();
    for (int i = 0; i < times; ++i)
      LOOM_CUDA_CHECK(cudaGraphLaunch(exec_, origin_.view().native()));
    origin_.synchronize();
    return us_since(t0);
  }

  double capture_us = 0;
  double instantiate_us = 0;

 private:
  loom::detail::Stream origin_;
  loom::detail::Event fork_;
  cudaGraphExec_t exec_ = nullptr;
};

std::vector<loom::Tensor> tiny_tensors(loom::Runtime& rt) {
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 16; ++i) ts.push_back(rt.tensor<float>({kTiny}));
  loom::Graph init;
  for (const auto& t : ts) init.add(loom::ops::fill(t, 1.0F));
  rt.submit(init).wait();
  return ts;
}

double loom_replay_us(const loom::Executable& exe, int times) {
  const auto t0 = Clock::now();
  loom::Future last;
  for (int i = 0; i < times; ++i) last = exe.run();
  last.wait();
  return us_since(t0);
}

void BM_CompiledReplay(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<Shape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  const auto ts = tiny_tensors(rt);
  const auto g = make_graph(shape, n, ts);
  const auto exe = rt.compile(g);
  HandGraph hand(g);
  for (const auto until = Clock::now() + std::chrono::milliseconds(100); Clock::now() < until;) {
    (void)loom_replay_us(exe, 2);
    (void)hand.replay_us(2);
  }
  std::vector<double> loom_us, anchor_us, ratios;
  const double nodes = static_cast<double>(n) * kReplays;
  for (auto _ : state) {
    const double l = loom_replay_us(exe, kReplays);
    const double a = hand.replay_us(kReplays);
    state.SetIterationTime(l * 1e-6);
    loom_us.push_back(l / nodes);
    anchor_us.push_back(a / nodes);
    ratios.push_back(l / a);
  }
  state.counters["loom_us_per_node"] = median(loom_us);
  state.counters["anchor_us_per_node"] = median(anchor_us);
  state.counters["ratio"] = median(ratios);
  state.counters["segments"] = static_cast<double>(exe.segments());
  state.SetLabel(std::string(shape_name(shape)) +
                 ": compiled replay vs the same kernels in a hand-built CUDA graph");
}
BENCHMARK(BM_CompiledReplay)
    ->ArgsProduct({{0, 1, 2}, {1000}})
    ->UseManualTime()
    ->Iterations(20)
    ->Unit(benchmark::kMicrosecond);

void BM_CompileCost(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<Shape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  const auto ts = tiny_tensors(rt);
  { const auto warm = rt.compile(make_graph(shape, n, ts)); }
  std::vector<double> loom_us, instantiate_us, capture_instantiate_us, ratios;
  for (auto _ : state) {
    const auto g = make_graph(shape, n, ts);  // fresh: nothing prepared yet
    const auto t0 = Clock::now();
    const auto exe = rt.compile(g);
    const double l = us_since(t0);
    state.SetIterationTime(l * 1e-6);
    const HandGraph hand(g);
    loom_us.push_back(l / n);
    instantiate_us.push_back(hand.instantiate_us / n);
    capture_instantiate_us.push_back((hand.capture_us + hand.instantiate_us) / n);
    ratios.push_back(l / hand.instantiate_us);
  }
  state.counters["loom_us_per_node"] = median(loom_us);
  state.counters["anchor_us_per_node"] = median(instantiate_us);
  state.counters["anchor_capture_us_per_node"] = median(capture_instantiate_us);
  state.counters["ratio"] = median(ratios);
  state.SetLabel(std::string(shape_name(shape)) +
                 ": compile (validate, plan, capture, instantiate) vs cudaGraphInstantiate of "
                 "the hand-built graph");
}
BENCHMARK(BM_CompileCost)
    ->ArgsProduct({{0, 1, 2}, {1000}})
    ->UseManualTime()
    ->Iterations(10)
    ->Unit(benchmark::kMillisecond);

void BM_EagerVsCompiled(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int n = static_cast<int>(state.range(0));
  loom::Runtime rt;
  const auto ts = tiny_tensors(rt);
  const auto g = make_graph(Shape::chain, n, ts);
  const auto exe = rt.compile(g);
  for (const auto until = Clock::now() + std::chrono::milliseconds(100); Clock::now() < until;) {
    rt.submit(g).wait();
    exe.run().wait();
  }
  std::vector<double> eager_us, compiled_us, ratios;
  for (auto _ : state) {
    auto t0 = Clock::now();
    rt.submit(g).wait();
    const double e = us_since(t0);
    t0 = Clock::now();
    exe.run().wait();
    const double c = us_since(t0);
    state.SetIterationTime(c * 1e-6);
    eager_us.push_back(e / n);
    compiled_us.push_back(c / n);
    ratios.push_back(e / c);
  }
  state.counters["loom_us_per_node"] = median(compiled_us);
  state.counters["anchor_us_per_node"] = median(eager_us);
  state.counters["ratio"] = median(ratios);
  state.SetLabel(
      "a chain run and waited for: compiled (loom) vs eager submit (anchor); "
      "ratio = eager / compiled");
}
BENCHMARK(BM_EagerVsCompiled)
    ->Arg(100)
    ->UseManualTime()
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
