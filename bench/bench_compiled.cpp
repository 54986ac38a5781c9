// Compiled graphs (Runtime::compile), each figure beside what a user would
// pick instead of loom, measured in the same process on the same kernels and
// tensors (issue 17, item 6). Every figure is host wall time of work run and
// waited for, a median over samples taken after a warm-up; the ratio is
// loom / anchor (below 1: loom is faster), the median of per-sample ratios.
//
// BM_CompiledReplay: DAGs of tiny kernels (bench_dag.hpp: chain, 8 lanes,
//   random with ~1.5 edges a node, fork-4/join diamonds; 100, 1000 and 10,000
//   nodes), each node a user's loom::kernel_task launching dag_node<<<1, 32>>>
//   with loom::launch; loom's inferred edges are checked equal to the DAG's.
//   loom: exe.run().wait() with default RuntimeOptions, µs a node.
//   Anchor (ratio): a CUDA graph built node by node from the DAG's own edges
//   (cudaGraphAddKernelNode), instantiated, replayed with cudaGraphLaunch +
//   cudaStreamSynchronize: what Taskflow's cudaFlow builds, and the best a
//   user writing CUDA graphs by hand gets, since it has the DAG's
//   concurrency and nothing else. Second anchor (anchor_capture_*): the
//   kernels captured in topological order on one stream, the easiest CUDA
//   graph to write (no concurrency at all).
// BM_CompiledReplayN: the same DAGs replayed kReplays times in one call and
//   waited for once: exe.run_n(kReplays).wait() against kReplays
//   cudaGraphLaunch calls of the anchor graph and one cudaStreamSynchronize
//   (Taskflow's run_n); µs a node a replay. The host's cost a run, which
//   a single replay pays whole, is shared by the replays here. Both report
//   path_*, the run path in their alternation (below).
// BM_CompiledGraphContent: loom's compiled graph of the same DAGs replayed by
//   itself against exe.run().wait() and the anchor: graph content apart
//   from the runtime's cost a run; counts the graph's nodes and edges.
//   loom_exec_x10 / anchor_x10: each graph launched ten times back to back
//   and synchronized once (what run_n(10) does), µs a node a launch.
//   path_*: where a run+wait's wall time goes, step by step (medians of 15
//   runs, sched/run_profile.hpp); BM_OneOp reports the same for one op.
//   alt_*: the same with an anchor replay before each sample, the order
//   BM_CompiledReplay samples in (alt_x10_path_*: run_n(10) after ten).
// BM_CompileCost: loom's graph build (the kernel tasks, g.add) + rt.compile,
//   µs a node, against building the anchor graph node by node +
//   cudaGraphInstantiate (ratio; Taskflow's build + instantiate), and against
//   the one-stream capture + instantiate. phase_*: rt.compile's own phases,
//   µs a node (compile_profile.hpp).
// BM_OneOp: one op, RGB to gray of a 4096x4096 interleaved image through the
//   public API (loom::ops::rgb_to_gray): compiled exe.run().wait() and eager
//   rt.submit(g).wait() against the same kernel launched raw
//   (loom::kernels::rgb_to_gray, what the op launches) + cudaStreamSynchronize:
//   what a user with one kernel to run writes. kernel_us: the kernel alone,
//   timed with events.
// BM_DeviceCopy: a 4 GiB device-to-device copy (halved while device memory
//   is short): a compiled graph holding one g.copy(src, dst), eager
//   rt.copy(src, dst).wait(), and cudaMemcpyAsync + cudaStreamSynchronize
//   (what a user calls). TB/s counts bytes read and written (2 x size);
//   ratio = compiled / eager.
//
// The eager side of the DAGs (submit + wait against raw launches on one
// stream) is bench_graph's BM_EagerGraph. Without a GPU every benchmark here
// is skipped, saying why, and the program exits 0.
#include "compile/capture.hpp"
#include "compile/compile_profile.hpp"
#include "cuda/check.hpp"
#include "cuda/stream.hpp"
#include "image/gray.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_dag.hpp"
#include "bench_device.hpp"
#include "bench_run_path.hpp"
#include "bench_support.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using loom::bench::CapturedGraph;
using loom::bench::Clock;
using loom::bench::Dag;
using loom::bench::DagShape;
using loom::bench::KernelNodeGraph;
using loom::bench::median;
using loom::bench::skip_without_gpu;
using loom::bench::us_since;
using loom::bench::warm_up;

// Host microseconds of f().
template <class F>
double time_us(F&& f) {
  const auto t0 = Clock::now();
  f();
  return us_since(t0);
}

void BM_CompiledReplay(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<DagShape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  const auto dag_case = loom::bench::dag_case(shape, n, rt);
  const Dag& dag = dag_case.dag;
  const auto& outputs = dag_case.outputs;
  const auto& g = dag_case.graph;
  const auto exe = rt.compile(g);
  loom::detail::Stream stream(0, 0);
  const cudaStream_t s = stream.view().native();
  const KernelNodeGraph by_nodes(dag, outputs);
  const CapturedGraph captured(dag, outputs, s);
  warm_up([&] {
    exe.run().wait();
    (void)by_nodes.replay_us(s);
    (void)captured.replay_us(s);
  });
  loom::bench::PairedTimes times(static_cast<double>(n));
  std::vector<double> capture_us, capture_ratios;
  for (auto _ : state) {
    const double l = time_us([&] { exe.run().wait(); });
    const double c = captured.replay_us(s);
    times.add(l, by_nodes.replay_us(s));
    state.SetIterationTime(l * 1e-6);
    capture_us.push_back(c / n);
    capture_ratios.push_back(l / c);
  }
  times.report(state);
  // Where a run's time goes when it follows the two anchors' replays, as above.
  loom::bench::profile_run_path(
      state, 15, [&] { exe.run().wait(); },
      [&] {
        (void)captured.replay_us(s);
        (void)by_nodes.replay_us(s);
      });
  state.counters["anchor_capture_us_per_node"] = median(capture_us);
  state.counters["ratio_vs_capture"] = median(capture_ratios);
  state.counters["edges"] = static_cast<double>(dag.edges);
  state.counters["segments"] = static_cast<double>(exe.segments());
  state.SetLabel(loom::bench::dag_label(dag) +
                 ": compiled replay+wait vs a CUDA graph of the DAG's edges (AddKernelNode)");
}

LOOM_DAG_BENCHMARK(BM_CompiledReplay, 100, 100);
LOOM_DAG_BENCHMARK(BM_CompiledReplay, 1000, 50);
LOOM_DAG_BENCHMARK(BM_CompiledReplay, 10000, 20);

constexpr int kReplays = 10;

void BM_CompiledReplayN(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<DagShape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  const auto dag_case = loom::bench::dag_case(shape, n, rt);
  const auto exe = rt.compile(dag_case.graph);
  loom::detail::Stream stream(0, 0);
  const cudaStream_t s = stream.view().native();
  const KernelNodeGraph by_nodes(dag_case.dag, dag_case.outputs);
  warm_up([&] {
    exe.run_n(kReplays).wait();
    (void)by_nodes.replay_n_us(s, kReplays);
  });
  loom::bench::PairedTimes times(static_cast<double>(n) * kReplays);
  for (auto _ : state) {
    const double l = time_us([&] { exe.run_n(kReplays).wait(); });
    times.add(l, by_nodes.replay_n_us(s, kReplays));
    state.SetIterationTime(l * 1e-6);
  }
  times.report(state);
  loom::bench::profile_run_path(
      state, 15, [&] { exe.run_n(kReplays).wait(); },
      [&] { (void)by_nodes.replay_n_us(s, kReplays); });
  state.counters["replays"] = kReplays;
  state.SetLabel(loom::bench::dag_label(dag_case.dag) + ": run_n(" + std::to_string(kReplays) +
                 ").wait() vs " + std::to_string(kReplays) +
                 " launches of a CUDA graph of the DAG's edges + one sync");
}

LOOM_DAG_BENCHMARK(BM_CompiledReplayN, 100, 50);
LOOM_DAG_BENCHMARK(BM_CompiledReplayN, 1000, 20);

// What loom's compiled graph holds, and where a replay's time goes: the
// segment's cudaGraphExec launched by itself with cudaGraphLaunch + sync,
// as the anchor is (loom_exec_us_per_node), against exe.run().wait()
// (loom_us_per_node: the same graph plus the runtime's cost a run) and the
// anchor graph (anchor_us_per_node). Each is timed in a loop of its own.
// Counters count the graph's nodes by cudaGraphNodeType (type0: kernel).
// LOOM_DOT_DIR=<dir> also writes loom's graph there as a DOT file.
void BM_CompiledGraphContent(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<DagShape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  const auto dag_case = loom::bench::dag_case(shape, n, rt);
  const Dag& dag = dag_case.dag;
  const auto& outputs = dag_case.outputs;
  const auto exe = rt.compile(dag_case.graph);
  const auto* graphs = loom::detail::captured_graphs(exe);
  if (graphs == nullptr || graphs->segments.size() != 1) {
    state.SkipWithError("expected one captured segment");
    return;
  }
  const auto& segment = *graphs->segments.front();
  if (const char* dir = std::getenv("LOOM_DOT_DIR")) {
    const std::string path = std::string(dir) + "/compiled-" + std::to_string(state.range(0)) +
                             "-" + std::to_string(n) + ".dot";
    LOOM_CUDA_CHECK(
        cudaGraphDebugDotPrint(segment.graph, path.c_str(), cudaGraphDebugDotFlagsVerbose));
  }
  std::size_t count = 0;
  LOOM_CUDA_CHECK(cudaGraphGetNodes(segment.graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  LOOM_CUDA_CHECK(cudaGraphGetNodes(segment.graph, nodes.data(), &count));
  std::map<int, int> by_type;
  for (auto node : nodes) {
    cudaGraphNodeType type{};
    LOOM_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    ++by_type[static_cast<int>(type)];
  }
  std::size_t edges = 0;
  LOOM_CUDA_CHECK(cudaGraphGetEdges(segment.graph, nullptr, nullptr, nullptr, &edges));
  loom::detail::Stream stream(0, 0);
  const cudaStream_t s = stream.view().native();
  const KernelNodeGraph by_nodes(dag, outputs);
  const double per = n;
  const auto loop = [&](auto&& once) {
    warm_up([&] { (void)once(); });
    std::vector<double> us;
    for (int i = 0; i < 15; ++i) us.push_back(once() / per);
    return median(us);
  };
  double exec_us = 0;
  for (auto _ : state) {
    exec_us = loop([&] { return loom::bench::graph_replay_us(segment.exec, s); });
    state.SetIterationTime(exec_us * per * 1e-6);
  }
  state.counters["loom_exec_us_per_node"] = exec_us;
  // How long cudaGraphLaunch itself holds the calling thread (a graph whose
  // nodes outrun the device's queue returns only once much of it has run),
  // on one stream and alternating between two (a launch on a stream other
  // than the last one's may cost the driver more).
  state.counters["exec_launch_call_us_per_node"] = loop([&] {
    const auto t0 = Clock::now();
    LOOM_CUDA_CHECK(cudaGraphLaunch(segment.exec, s));
    const double us = us_since(t0);
    LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
    return us;
  });
  loom::detail::Stream other(0, 0);
  bool flip = false;
  state.counters["exec_two_streams_us_per_node"] = loop([&] {
    flip = !flip;
    return loom::bench::graph_replay_us(segment.exec, flip ? other.view().native() : s);
  });
  state.counters["loom_us_per_node"] = loop([&] { return time_us([&] { exe.run().wait(); }); });
  state.counters["anchor_us_per_node"] = loop([&] { return by_nodes.replay_us(s); });
  // Ten launches back to back and one synchronize, each graph raw: what
  // run_n(10) does with loom's (BM_CompiledReplayN), without the runtime.
  state.counters["loom_exec_x10_us_per_node"] =
      loop([&] { return loom::bench::graph_replay_us(segment.exec, s, kReplays) / kReplays; });
  state.counters["anchor_x10_us_per_node"] =
      loop([&] { return by_nodes.replay_n_us(s, kReplays) / kReplays; });
  loom::bench::profile_run_path(state, 15, [&] { exe.run().wait(); });
  // The same, each loom sample taken right after an anchor replay, as
  // BM_CompiledReplay takes them (there the gap is several times larger):
  // run() and loom's exec raw, each alternating with the anchor, and the
  // run path of run() and of run_n(10) in that alternation.
  const auto alternate = [&](auto&& once) {
    return loop([&] {
      (void)by_nodes.replay_us(s);
      return once();
    });
  };
  state.counters["alt_loom_us_per_node"] =
      alternate([&] { return time_us([&] { exe.run().wait(); }); });
  state.counters["alt_exec_us_per_node"] =
      alternate([&] { return loom::bench::graph_replay_us(segment.exec, s); });
  state.counters["alt_exec_other_stream_us_per_node"] =
      alternate([&] { return loom::bench::graph_replay_us(segment.exec, other.view().native()); });
  const auto anchor_replay = [&] { (void)by_nodes.replay_us(s); };
  loom::bench::profile_run_path(
      state, 15, [&] { exe.run().wait(); }, anchor_replay, "alt_path_");
  loom::bench::profile_run_path(
      state, 15, [&] { exe.run_n(kReplays).wait(); },
      [&] { (void)by_nodes.replay_n_us(s, kReplays); }, "alt_x10_path_");
  state.counters["graph_nodes"] = static_cast<double>(count);
  state.counters["graph_edges"] = static_cast<double>(edges);
  for (const auto& [type, k] : by_type) state.counters["type" + std::to_string(type)] = k;
  state.SetLabel(loom::bench::dag_label(dag) +
                 ": loom's exec replayed by itself, and through run()");
}
LOOM_DAG_BENCHMARK(BM_CompiledGraphContent, 1000, 1);

void BM_CompileCost(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shape = static_cast<DagShape>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  const Dag dag = loom::bench::make_dag(shape, n);
  const auto outputs = loom::bench::node_outputs(rt, n);
  loom::detail::Stream stream(0, 0);
  const cudaStream_t s = stream.view().native();
  {  // warm-up: one of each
    const auto g = loom::bench::dag_graph(dag, outputs);
    loom::bench::check_edges(g, dag);
    const auto exe = rt.compile(g);
    const KernelNodeGraph by_nodes(dag, outputs);
    const CapturedGraph captured(dag, outputs, s);
  }
  std::vector<double> loom_us, build_us, compile_us, anchor_us, instantiate_us, capture_us, ratios,
      capture_ratios;
  const double nodes = n;
  // rt.compile's phases, summed over the iterations (compile_profile.hpp).
  loom::detail::CompileProfile phases;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const auto g = loom::bench::dag_graph(dag, outputs);  // a fresh graph: nothing prepared
    const double b = us_since(t0);
    loom::detail::compile_profile() = &phases;
    const auto exe = rt.compile(g);
    loom::detail::compile_profile() = nullptr;
    const double l = us_since(t0);
    state.SetIterationTime(l * 1e-6);
    const KernelNodeGraph by_nodes(dag, outputs);
    const CapturedGraph captured(dag, outputs, s);
    const double a = by_nodes.build_us + by_nodes.instantiate_us;
    const double c = captured.capture_us + captured.instantiate_us;
    loom_us.push_back(l / nodes);
    build_us.push_back(b / nodes);
    compile_us.push_back((l - b) / nodes);
    anchor_us.push_back(a / nodes);
    instantiate_us.push_back(by_nodes.instantiate_us / nodes);
    capture_us.push_back(c / nodes);
    ratios.push_back(l / a);
    capture_ratios.push_back(l / c);
  }
  state.counters["loom_us_per_node"] = median(loom_us);
  state.counters["loom_build_us_per_node"] = median(build_us);
  state.counters["loom_compile_us_per_node"] = median(compile_us);
  state.counters["anchor_us_per_node"] = median(anchor_us);
  state.counters["anchor_instantiate_us_per_node"] = median(instantiate_us);
  state.counters["ratio"] = median(ratios);
  state.counters["anchor_capture_us_per_node"] = median(capture_us);
  state.counters["ratio_vs_capture"] = median(capture_ratios);
  const double per_node = 1.0 / (nodes * static_cast<double>(loom_us.size()));
  using P = loom::detail::CompileProfile;
  const std::pair<const char*, double P::*> phase_names[] = {
      {"phase_bind", &P::bind_us},
      {"phase_prepare", &P::prepare_us},
      {"phase_steps", &P::steps_us},
      {"phase_describe", &P::describe_us},
      {"phase_add_nodes", &P::add_nodes_us},
      {"phase_end_capture", &P::end_capture_us},
      {"phase_instantiate", &P::instantiate_us},
      {"phase_segment_ops", &P::segment_ops_us},
      {"phase_replay", &P::replay_us}};
  for (const auto& [name, phase] : phase_names) state.counters[name] = phases.*phase * per_node;
  state.SetLabel(loom::bench::dag_label(dag) +
                 ": graph build + compile vs AddKernelNode build + cudaGraphInstantiate");
}
LOOM_DAG_BENCHMARK(BM_CompileCost, 100, 20);
LOOM_DAG_BENCHMARK(BM_CompileCost, 1000, 10);
LOOM_DAG_BENCHMARK(BM_CompileCost, 10000, 3);

void BM_OneOp(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  constexpr std::int64_t kSide = 4096;
  constexpr auto kPixels = static_cast<std::size_t>(kSide * kSide);
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  const auto rgb = rt.tensor<std::uint8_t>({kSide, kSide, 3});
  const auto gray = rt.tensor<std::uint8_t>({kSide, kSide});
  LOOM_CUDA_CHECK(cudaMemset(rgb.data(), 0x5B, 3 * kPixels));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  loom::Graph g;
  g.add(loom::ops::rgb_to_gray(rgb, gray));
  const auto exe = rt.compile(g);
  loom::detail::Stream stream(0, 0);
  const auto launch = [&] {
    loom::kernels::rgb_to_gray(rgb.data_as<std::uint8_t>(), gray.data_as<std::uint8_t>(), kPixels,
                               loom::kernels::RgbLayout::interleaved, stream.view());
  };
  const auto raw = [&] {
    launch();
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream.view().native()));
  };
  warm_up([&] {
    exe.run().wait();
    rt.submit(g).wait();
    raw();
  });
  std::vector<double> compiled_us, eager_us, raw_us, ratios, eager_ratios;
  for (auto _ : state) {
    const double c = time_us([&] { exe.run().wait(); });
    const double e = time_us([&] { rt.submit(g).wait(); });
    const double r = time_us(raw);
    state.SetIterationTime(c * 1e-6);
    compiled_us.push_back(c);
    eager_us.push_back(e);
    raw_us.push_back(r);
    ratios.push_back(c / r);
    eager_ratios.push_back(e / r);
  }
  const double kernel_ms = loom::bench::time_launches_ms(
      stream, [&](int) { launch(); }, 7, 20);
  loom::bench::profile_run_path(state, 50, [&] { exe.run().wait(); });
  state.counters["loom_compiled_us"] = median(compiled_us);
  state.counters["loom_eager_us"] = median(eager_us);
  state.counters["anchor_us"] = median(raw_us);
  state.counters["ratio"] = median(ratios);
  state.counters["ratio_eager"] = median(eager_ratios);
  state.counters["kernel_us"] = kernel_ms * 1e3;
  state.SetLabel(
      "rgb_to_gray 4096x4096: compiled run+wait (ratio) and eager submit+wait (ratio_eager) vs "
      "the raw kernel launch + cudaStreamSynchronize");
}
BENCHMARK(BM_OneOp)->UseManualTime()->Iterations(200)->Unit(benchmark::kMicrosecond);

void BM_DeviceCopy(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  loom::Runtime rt;
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  LOOM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::size_t bytes = std::size_t{4} << 30;
  constexpr std::size_t kMargin = std::size_t{1} << 30;
  while (bytes > (std::size_t{64} << 20) && 2 * bytes + kMargin > free_bytes) bytes /= 2;
  const auto src = rt.tensor<std::uint8_t>({static_cast<std::int64_t>(bytes)});
  const auto dst = rt.tensor<std::uint8_t>({static_cast<std::int64_t>(bytes)});
  LOOM_CUDA_CHECK(cudaMemset(src.data(), 0x5B, bytes));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  loom::Graph g;
  g.copy(src, dst);
  const auto exe = rt.compile(g);
  loom::detail::Stream stream(0, 0);
  const cudaStream_t s = stream.view().native();
  const auto raw = [&] {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s));
    LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
  };
  warm_up([&] {
    exe.run().wait();
    rt.copy(src, dst).wait();
    raw();
  });
  // Bytes read and written, per microsecond, in TB/s.
  const auto tbps = [&](double us) { return 2.0 * static_cast<double>(bytes) / us * 1e-6; };
  std::vector<double> compiled, eager, anchor, ratios, compiled_raw, eager_raw;
  for (auto _ : state) {
    const double c = time_us([&] { exe.run().wait(); });
    const double e = time_us([&] { rt.copy(src, dst).wait(); });
    const double r = time_us(raw);
    state.SetIterationTime(c * 1e-6);
    compiled.push_back(tbps(c));
    eager.push_back(tbps(e));
    anchor.push_back(tbps(r));
    ratios.push_back(e / c);
    compiled_raw.push_back(r / c);
    eager_raw.push_back(r / e);
  }
  state.counters["GiB"] = static_cast<double>(bytes) / static_cast<double>(std::size_t{1} << 30);
  state.counters["loom_compiled_TBps"] = median(compiled);
  state.counters["loom_eager_TBps"] = median(eager);
  state.counters["anchor_TBps"] = median(anchor);
  state.counters["ratio"] = median(ratios);
  state.counters["compiled_vs_anchor"] = median(compiled_raw);
  state.counters["eager_vs_anchor"] = median(eager_raw);
  state.SetLabel(
      "device-to-device copy: compiled g.copy run+wait vs eager rt.copy().wait() (ratio = "
      "compiled / eager TB/s) vs cudaMemcpyAsync + sync (anchor)");
}
BENCHMARK(BM_DeviceCopy)->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
