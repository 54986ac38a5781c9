#pragma once
// Capturing a compiled graph's segments (compile_plan.hpp) into CUDA graphs,
// once, on the compiling thread. Each segment is captured on streams private
// to the capture (the executor's streams carry other runs' launches, which a
// capture would swallow): an origin stream begins a relaxed-mode capture and
// records a fork event; each plan stream of the segment gets a private lane
// that waits for the fork; tasks are captured in plan order on their plan
// stream's lane, after event waits for the plan's cross-stream edges within
// the segment (edges from other steps are the replay graph's); every lane
// joins the origin, which ends the capture. Relaxed mode, because a task's
// workspace may come from the pool, which may reach cudaMalloc; an op that
// declares itself capturable promises not to synchronize (Op::capturable).
//
// A replay launches each instantiated graph on the stream the executor
// gives its segment task: one cudaGraphLaunch, asynchronous.

#include "compile/compile_plan.hpp"
#include "core/storage.hpp"
#include "sched/copy_engine.hpp"
#include "sched/prepared_graph.hpp"

#include <loom/op.hpp>

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

namespace loom::detail {

struct CaptureOptions {
  int device = 0;
  CopyEngine* copies = nullptr;  ///< where workspaces come from
  /// Where workspaces are allocated (a stream every run waits for at its start).
  cudaStream_t resource_stream = nullptr;
};

/// The instantiated graphs of an executable and the memory they use; kept
/// alive by its segment tasks while any replay may run.
class CapturedGraphs {
 public:
  CapturedGraphs() = default;
  ~CapturedGraphs();
  CapturedGraphs(const CapturedGraphs&) = delete;
  CapturedGraphs& operator=(const CapturedGraphs&) = delete;

  std::vector<cudaGraphExec_t> execs;                ///< one a segment
  std::vector<std::shared_ptr<Storage>> workspaces;  ///< scratch the tasks asked for at capture
  std::vector<std::size_t> nodes;                    ///< nodes a segment's graph holds
};

/// Captures and instantiates every segment of `steps`, and makes the op that
/// replays it (`segment_ops[i]` for step i; null for other steps).
/// @throws InvalidArgument naming the task whose capture failed; CudaError.
std::shared_ptr<CapturedGraphs> capture_segments(const PreparedGraph& prepared,
                                                 const std::vector<CompiledStep>& steps,
                                                 const CaptureOptions& options,
                                                 std::vector<OpPtr>& segment_ops);

}  // namespace loom::detail
