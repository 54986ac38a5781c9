#pragma once
// DAGs of tiny kernels, for bench_compiled (replay, compile) and bench_graph
// (eager), and the anchors a user would pick instead of loom for them.
//
// A DAG is nodes 0..n-1 in topological order, each with at most 4
// predecessors. Node i is one tiny kernel, dag_node<<<1, 32>>> (one
// multiply-add a thread), that reads the 32-float outputs of its
// predecessors and writes its own 32-float output. loom sees it as a user
// writes it: a loom::kernel_task whose reads are the predecessors' output
// tensors and whose write is its own, launched with loom::launch, so loom's
// inferred edges are exactly the DAG's (read after write; nothing is written
// twice, so no other hazard). check_edges() asserts it.
//
// The anchors run the same kernel on the same tensors:
//  - KernelNodeGraph: a CUDA graph built node by node with
//    cudaGraphAddKernelNode from the DAG's own edges (what Taskflow's
//    cudaFlow builds), instantiated once;
//  - CapturedGraph: the kernels captured in topological order on one stream
//    (cudaStreamBeginCapture ... cudaStreamEndCapture), instantiated once;
//  - launch_raw: the kernels launched on one stream in topological order
//    (the eager anchor).
// Every CUDA call is checked (LOOM_CUDA_CHECK).

#include <loom/graph.hpp>
#include <loom/runtime.hpp>
#include <loom/tensor.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::bench {

enum class DagShape { chain, lanes, random, diamonds };

/// "chain", "8 lanes", "random", "diamonds".
const char* to_string(DagShape shape) noexcept;

inline constexpr int kMaxPredecessors = 4;
inline constexpr std::int64_t kNodeFloats = 32;  // a node's output: one float a thread

struct Dag {
  DagShape shape = DagShape::chain;
  /// preds[i]: node i's predecessors, ascending, all < i, at most 4.
  std::vector<std::vector<int>> preds;
  std::size_t edges = 0;
  int nodes() const noexcept { return static_cast<int>(preds.size()); }
};

/// The DAG of `shape` with n nodes:
///  chain     i after i-1;
///  lanes     8 independent chains, interleaved: i after i-8;
///  random    fixed seed; node i >= 1 takes 0..3 distinct predecessors
///            (uniform, ~1.5 a node) uniformly among the nodes before it;
///  diamonds  repeated fork-4/join diamonds: a root, then 4 nodes after it
///            and a join after those 4, which roots the next diamond (8
///            edges every 5 nodes); a last incomplete diamond has no join.
Dag make_dag(DagShape shape, int n);

/// n tensors of kNodeFloats floats, node outputs: on the device, zeroed
/// (and dag_node loaded), on the CUDA backend.
std::vector<Tensor> node_outputs(Runtime& rt, int n);

/// The DAG as loom kernel tasks over `outputs` (one a node), in node order.
Graph dag_graph(const Dag& dag, const std::vector<Tensor>& outputs);

/// "chain, 1000 nodes, 999 edges": a benchmark's label starts with it.
std::string dag_label(const Dag& dag);

/// What a DAG benchmark works on: the DAG its range names (shape, nodes),
/// its node outputs on `rt`, and the loom graph of it (its edges checked).
struct DagCase {
  Dag dag;
  std::vector<Tensor> outputs;
  Graph graph;
};
DagCase dag_case(DagShape shape, int n, Runtime& rt);

/// Aborts, saying what differs, unless the graph's edges are exactly the
/// DAG's (same count, every DAG edge present).
void check_edges(const Graph& g, const Dag& dag);

/// The eager anchor: the DAG's kernels launched in node order on `stream`
/// (no synchronize).
void launch_raw(const Dag& dag, const std::vector<Tensor>& outputs, cudaStream_t stream);

/// `times` cudaGraphLaunch calls of `exec` on `stream`, then one
/// cudaStreamSynchronize: host microseconds.
double graph_replay_us(cudaGraphExec_t exec, cudaStream_t stream, int times = 1);

/// A CUDA graph built node by node (cudaGraphAddKernelNode) from the DAG's
/// edges, and instantiated. build_us and instantiate_us: host time of each.
class KernelNodeGraph {
 public:
  KernelNodeGraph(const Dag& dag, const std::vector<Tensor>& outputs);
  ~KernelNodeGraph();
  KernelNodeGraph(const KernelNodeGraph&) = delete;
  KernelNodeGraph& operator=(const KernelNodeGraph&) = delete;
  /// cudaGraphLaunch + cudaStreamSynchronize: host microseconds.
  double replay_us(cudaStream_t stream) const;
  /// `times` cudaGraphLaunch calls, then one cudaStreamSynchronize.
  double replay_n_us(cudaStream_t stream, int times) const;
  double build_us = 0;
  double instantiate_us = 0;

 private:
  cudaGraphExec_t exec_ = nullptr;
};

/// The DAG's kernels captured in node order on one stream, and instantiated.
/// capture_us and instantiate_us: host time of each.
class CapturedGraph {
 public:
  CapturedGraph(const Dag& dag, const std::vector<Tensor>& outputs, cudaStream_t stream);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  /// cudaGraphLaunch + cudaStreamSynchronize: host microseconds.
  double replay_us(cudaStream_t stream) const;
  double capture_us = 0;
  double instantiate_us = 0;

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace loom::bench

// Registers `fn` for every shape at `nodes` nodes, `iterations` samples
// (fewer for larger graphs: each run stays within a few seconds). Expanded
// where <benchmark/benchmark.h> is included.
#define LOOM_DAG_BENCHMARK(fn, nodes, iterations) \
  BENCHMARK(fn)                                   \
      ->ArgNames({"shape", "nodes"})              \
      ->ArgsProduct({{0, 1, 2, 3}, {nodes}})      \
      ->UseManualTime()                           \
      ->Iterations(iterations)                    \
      ->Unit(benchmark::kMicrosecond)
