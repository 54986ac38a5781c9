// DAGs of tiny kernels and their anchors (see bench_dag.hpp).
#include "bench_dag.hpp"

#include "cuda/check.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/kernel_task.hpp>

#include "bench_support.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <type_traits>

namespace loom::bench {

namespace {

// One node: out = 1 + (sum of the inputs) / 4, a thread an element. Unused
// inputs are null.
__global__ void dag_node(const float* a, const float* b, const float* c, const float* d,
                         float* out) {
  const unsigned t = threadIdx.x;
  float sum = 0.0F;
  if (a != nullptr) sum += a[t];
  if (b != nullptr) sum += b[t];
  if (c != nullptr) sum += c[t];
  if (d != nullptr) sum += d[t];
  out[t] = 0.25F * sum + 1.0F;
}

// A node's kernel arguments.
struct NodeArgs {
  std::array<const float*, kMaxPredecessors> in{};
  float* out = nullptr;
};

NodeArgs args_of(const Dag& dag, const std::vector<Tensor>& outputs, int i) {
  NodeArgs a;
  const auto& preds = dag.preds[static_cast<std::size_t>(i)];
  for (std::size_t k = 0; k < preds.size(); ++k) {
    a.in[k] = outputs[static_cast<std::size_t>(preds[k])].data_as<float>();
  }
  a.out = outputs[static_cast<std::size_t>(i)].data_as<float>();
  return a;
}

const dim3 kGrid(1);
const dim3 kBlock(static_cast<unsigned>(kNodeFloats));

struct GraphDeleter {
  void operator()(cudaGraph_t g) const noexcept { LOOM_CUDA_ASSERT(cudaGraphDestroy(g)); }
};
using GraphPtr = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;

void add_edge(Dag& dag, int from, int to) {
  dag.preds[static_cast<std::size_t>(to)].push_back(from);
  ++dag.edges;
}

}  // namespace

const char* to_string(DagShape shape) noexcept {
  switch (shape) {
    case DagShape::chain: return "chain";
    case DagShape::lanes: return "8 lanes";
    case DagShape::random: return "random";
    case DagShape::diamonds: return "diamonds";
  }
  return "?";
}

Dag make_dag(DagShape shape, int n) {
  Dag dag;
  dag.shape = shape;
  dag.preds.resize(static_cast<std::size_t>(n));
  switch (shape) {
    case DagShape::chain:
      for (int i = 1; i < n; ++i) add_edge(dag, i - 1, i);
      break;
    case DagShape::lanes:
      for (int i = 8; i < n; ++i) add_edge(dag, i - 8, i);
      break;
    case DagShape::random: {
      std::mt19937 rng(20261217);
      for (int i = 1; i < n; ++i) {
        const int want = std::min(static_cast<int>(rng() % 4), i);
        auto& preds = dag.preds[static_cast<std::size_t>(i)];
        while (static_cast<int>(preds.size()) < want) {
          const int p = static_cast<int>(rng() % static_cast<unsigned>(i));
          if (std::find(preds.begin(), preds.end(), p) == preds.end()) preds.push_back(p);
        }
        std::sort(preds.begin(), preds.end());
        dag.edges += preds.size();
      }
      break;
    }
    case DagShape::diamonds: {
      int root = 0;
      int i = 1;
      while (i < n) {
        const int width = std::min(4, n - i);
        for (int k = 0; k < width; ++k) add_edge(dag, root, i + k);
        i += width;
        if (width < 4 || i >= n) break;
        for (int k = 4; k >= 1; --k) add_edge(dag, i - k, i);
        root = i++;
      }
      break;
    }
  }
  return dag;
}

std::vector<Tensor> node_outputs(Runtime& rt, int n) {
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    outputs.push_back(rt.tensor<float>({kNodeFloats}));
    if (rt.has_gpu()) {
      LOOM_CUDA_CHECK(cudaMemset(outputs.back().data(), 0, kNodeFloats * sizeof(float)));
    }
  }
  if (rt.has_gpu()) {
    // Loads dag_node's module now (lazy loading would load it at the first
    // launch, inside a capture or a timed run).
    cudaFuncAttributes attributes{};
    LOOM_CUDA_CHECK(cudaFuncGetAttributes(&attributes, dag_node));
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return outputs;
}

Graph dag_graph(const Dag& dag, const std::vector<Tensor>& outputs) {
  Graph g;
  for (int i = 0; i < dag.nodes(); ++i) {
    std::vector<Tensor> reads;
    for (int p : dag.preds[static_cast<std::size_t>(i)]) {
      reads.push_back(outputs[static_cast<std::size_t>(p)]);
    }
    const NodeArgs a = args_of(dag, outputs, i);
    g.add(kernel_task(
        "node", std::move(reads), {outputs[static_cast<std::size_t>(i)]}, [a](KernelContext& k) {
          launch(k, dag_node, kGrid, kBlock, 0, a.in[0], a.in[1], a.in[2], a.in[3], a.out);
        }));
  }
  return g;
}

std::string dag_label(const Dag& dag) {
  return std::string(to_string(dag.shape)) + ", " + std::to_string(dag.nodes()) + " nodes, " +
         std::to_string(dag.edges) + " edges";
}

DagCase dag_case(DagShape shape, int n, Runtime& rt) {
  DagCase c;
  c.dag = make_dag(shape, n);
  c.outputs = node_outputs(rt, n);
  c.graph = dag_graph(c.dag, c.outputs);
  check_edges(c.graph, c.dag);
  return c;
}

void check_edges(const Graph& g, const Dag& dag) {
  const auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "bench: the loom graph of the %s DAG of %d nodes: %s\n",
                 to_string(dag.shape), dag.nodes(), what.c_str());
    std::abort();
  };
  if (g.size() != static_cast<std::size_t>(dag.nodes())) fail("another number of tasks");
  if (g.edge_count() != dag.edges) {
    fail(std::to_string(g.edge_count()) + " edges, the DAG has " + std::to_string(dag.edges));
  }
  for (int i = 0; i < dag.nodes(); ++i) {
    for (int p : dag.preds[static_cast<std::size_t>(i)]) {
      if (!g.has_edge(TaskId(static_cast<std::uint32_t>(p)),
                      TaskId(static_cast<std::uint32_t>(i)))) {
        fail("no edge " + std::to_string(p) + " -> " + std::to_string(i));
      }
    }
  }
}

void launch_raw(const Dag& dag, const std::vector<Tensor>& outputs, cudaStream_t stream) {
  for (int i = 0; i < dag.nodes(); ++i) {
    NodeArgs a = args_of(dag, outputs, i);
    void* params[] = {&a.in[0], &a.in[1], &a.in[2], &a.in[3], &a.out};
    LOOM_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(dag_node), kGrid, kBlock, params,
                                     0, stream));
  }
}

KernelNodeGraph::KernelNodeGraph(const Dag& dag, const std::vector<Tensor>& outputs) {
  const auto t0 = Clock::now();
  cudaGraph_t raw = nullptr;
  LOOM_CUDA_CHECK(cudaGraphCreate(&raw, 0));
  const GraphPtr graph(raw);
  std::vector<cudaGraphNode_t> nodes(static_cast<std::size_t>(dag.nodes()));
  std::vector<cudaGraphNode_t> deps;
  for (int i = 0; i < dag.nodes(); ++i) {
    NodeArgs a = args_of(dag, outputs, i);
    void* params[] = {&a.in[0], &a.in[1], &a.in[2], &a.in[3], &a.out};
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(dag_node);
    p.gridDim = kGrid;
    p.blockDim = kBlock;
    p.sharedMemBytes = 0;
    p.kernelParams = params;
    p.extra = nullptr;
    deps.clear();
    for (int q : dag.preds[static_cast<std::size_t>(i)]) {
      deps.push_back(nodes[static_cast<std::size_t>(q)]);
    }
    LOOM_CUDA_CHECK(cudaGraphAddKernelNode(&nodes[static_cast<std::size_t>(i)], graph.get(),
                                           deps.data(), deps.size(), &p));
  }
  build_us = us_since(t0);
  const auto t1 = Clock::now();
  LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph.get(), 0));
  instantiate_us = us_since(t1);
}

KernelNodeGraph::~KernelNodeGraph() {
  if (exec_ != nullptr) LOOM_CUDA_ASSERT(cudaGraphExecDestroy(exec_));
}

double graph_replay_us(cudaGraphExec_t exec, cudaStream_t stream, int times) {
  const auto t0 = Clock::now();
  for (int i = 0; i < times; ++i) LOOM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return us_since(t0);
}

double KernelNodeGraph::replay_us(cudaStream_t stream) const {
  return graph_replay_us(exec_, stream);
}

double KernelNodeGraph::replay_n_us(cudaStream_t stream, int times) const {
  return graph_replay_us(exec_, stream, times);
}

CapturedGraph::CapturedGraph(const Dag& dag, const std::vector<Tensor>& outputs,
                             cudaStream_t stream) {
  const auto t0 = Clock::now();
  LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t raw = nullptr;
  try {
    launch_raw(dag, outputs, stream);
  } catch (...) {
    if (cudaStreamEndCapture(stream, &raw) == cudaSuccess && raw != nullptr) {
      LOOM_CUDA_ASSERT(cudaGraphDestroy(raw));
    }
    throw;
  }
  LOOM_CUDA_CHECK(cudaStreamEndCapture(stream, &raw));
  const GraphPtr graph(raw);
  capture_us = us_since(t0);
  const auto t1 = Clock::now();
  LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph.get(), 0));
  instantiate_us = us_since(t1);
}

CapturedGraph::~CapturedGraph() {
  if (exec_ != nullptr) LOOM_CUDA_ASSERT(cudaGraphExecDestroy(exec_));
}

double CapturedGraph::replay_us(cudaStream_t stream) const {
  return graph_replay_us(exec_, stream);
}

}  // namespace loom::bench
