#pragma once
// Building a compiled graph's segments (compile_plan.hpp) into CUDA graphs,
// once, on the compiling thread, with exactly the dependency DAG's edges.
//
// One capture a segment, on a stream private to it; the graph it ends with
// is the segment's. Before each task the capture's dependency set is replaced
// (cudaStreamUpdateCaptureDependencies) by the last nodes of the task's
// predecessors within the segment, after dropping a predecessor that is
// already a predecessor of another predecessor (the edge is implied); after
// the task, the capture's dependency set is the task's last nodes. A task
// that enqueues nothing passes its dependencies on. So every node hangs off
// the nodes of the tasks it depends on and nothing else: no event node, no
// fork or join, no serialization by the plan's streams, no bookkeeping node
// a task. Relaxed mode, because a task's workspace may come from the pool,
// which may reach cudaMalloc; an op that declares itself capturable
// promises not to synchronize (Op::capturable).
//
// Launch descriptions. A task whose op launches through loom::launch only
// (Op::launches_through_loom: every kernel task) is not captured: its
// run_cuda() runs on a probe stream (being captured too, so that any other
// work shows) with loom::launch describing each launch instead of making it
// (LaunchRecord: the kernel, its configuration, each parameter's bytes and
// whether it is a pointer), and its kernel nodes are added to the segment's
// graph directly (cudaGraphAddKernelNode), in a row after its dependencies:
// cheaper than a capture. They stay "described": a rebinding run can
// re-point them at the caller's tensors with cudaGraphExecKernelNodeSetParams
// instead of copying through the placeholder. A task that did other work on
// the probe, or passed a parameter of class type, is captured as it is.
// Built-in ops launch through their own kernels and are captured.
//
// A replay launches each instantiated graph on the stream the executor
// gives its segment task: one cudaGraphLaunch, asynchronous.

#include "compile/compile_plan.hpp"
#include "core/storage.hpp"
#include "sched/copy_engine.hpp"
#include "sched/prepared_graph.hpp"

#include <loom/op.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::detail {

struct CaptureOptions {
  int device = 0;
  CopyEngine* copies = nullptr;  ///< where workspaces come from
  /// Where workspaces are allocated (a stream every run waits for at its start).
  cudaStream_t resource_stream = nullptr;
};

/// A described launch of a segment: its kernel node and the parameters it
/// was added with.
struct DescribedLaunch {
  cudaGraphNode_t node = nullptr;
  cudaKernelNodeParams params{};  ///< as added; kernelParams is filled per update
  LaunchRecord record;
};

/// New bytes for some of a segment's described launches: one rebinding.
struct Repointing {
  struct Change {
    std::size_t launch = 0;  ///< into CapturedSegment::launches
    std::vector<unsigned char> bytes;
  };
  std::vector<Change> changes;
};

/// One segment's graph, its instantiation, and which pointers it now holds.
struct CapturedSegment {
  CapturedSegment() = default;
  ~CapturedSegment();
  CapturedSegment(const CapturedSegment&) = delete;
  CapturedSegment& operator=(const CapturedSegment&) = delete;

  cudaGraph_t graph = nullptr;  ///< kept: its nodes name the exec's nodes
  cudaGraphExec_t exec = nullptr;
  std::size_t nodes = 0;
  std::vector<DescribedLaunch> launches;
  /// The collectives captured into the graph, with their task names: the
  /// segment's op asks them whether they give up (Op::overdue) while it runs.
  struct Collective {
    OpPtr op;
    std::string task;
  };
  std::vector<Collective> collectives;
  /// Null: the placeholders' pointers. Only the executor's scheduling thread
  /// launches segments (Op::run_cuda), so re-pointing and launching take no
  /// lock, and none is held across a CUDA call.
  std::shared_ptr<const Repointing> applied;

  /// Launches the exec on `stream` with `repointing`'s pointers (null: the
  /// placeholders'), re-pointing only what differs from the last launch.
  void launch(cudaStream_t stream, const std::shared_ptr<const Repointing>& repointing);
};

/// The instantiated graphs of an executable and the memory they use; kept
/// alive by its segment tasks while any replay may run.
class CapturedGraphs {
 public:
  CapturedGraphs() = default;
  ~CapturedGraphs();
  CapturedGraphs(const CapturedGraphs&) = delete;
  CapturedGraphs& operator=(const CapturedGraphs&) = delete;

  std::vector<std::unique_ptr<CapturedSegment>> segments;  ///< one a segment step
  std::vector<std::shared_ptr<Storage>> workspaces;  ///< scratch the tasks asked for at capture
  /// By task of the prepared graph: 1 when its nodes are all described launches.
  std::vector<char> described;
};

/// Builds and instantiates every segment of `steps`, and makes the op that
/// replays it (`segment_ops[i]` for step i; null for other steps).
/// @throws InvalidArgument naming the task whose capture failed; CudaError.
std::shared_ptr<CapturedGraphs> capture_segments(const PreparedGraph& prepared,
                                                 const std::vector<CompiledStep>& steps,
                                                 const CaptureOptions& options,
                                                 std::vector<OpPtr>& segment_ops);

/// The op that replays segment `index` with `repointing` (a rebinding run),
/// reading and writing `reads` and `writes`.
OpPtr repointed_segment_op(std::shared_ptr<const CapturedGraphs> graphs, std::size_t index,
                           std::shared_ptr<const Repointing> repointing, std::vector<Tensor> reads,
                           std::vector<Tensor> writes);

/// The op that replays segment `index` `times` times in a row (Executable::run_n).
OpPtr repeated_segment_op(std::shared_ptr<const CapturedGraphs> graphs, std::size_t index,
                          int times, std::vector<Tensor> reads, std::vector<Tensor> writes);

}  // namespace loom::detail
