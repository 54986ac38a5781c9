#pragma once
// How a graph will run: where each task runs, which stream each device task
// goes to, and which cross-stream edges need an event. CUDA-free, so the
// stream assignment and the event elimination are tested on the CPU.
//
// Streams: `streams_per_priority` for each priority (index p * K + k), and
// one more for collectives (NCCL calls of a communicator stay on one stream,
// in one order). A task continues the stream of a predecessor that is still
// that stream's last task (so chains stay on one stream); otherwise it takes
// the least recently used stream of its priority (so branches spread out).
// A cross-stream edge costs an event only when the waiting stream does not
// already know, through earlier waits (vector clocks over the streams), that
// the predecessor is done: transitive edges cost nothing.

#include <loom/graph.hpp>

#include <cstdint>
#include <vector>

namespace loom::detail {

enum class Placement : std::uint8_t {
  device,  ///< enqueued on a stream by the scheduler
  host,    ///< run by a host worker
  async,   ///< started by the scheduler, completes on its own (staged copies)
};

struct PlannedTask {
  Placement placement = Placement::host;
  int stream = -1;                   ///< device tasks: the stream index
  std::vector<std::uint32_t> waits;  ///< device predecessors on other streams to wait on
  bool record_event = false;         ///< another stream waits on it, or it is watched
  bool watched = false;              ///< its completion is observed (host successors, stream tail)
};

struct Plan {
  std::vector<PlannedTask> tasks;
  std::vector<std::uint32_t> order;  ///< a topological order (submission order where possible)
  int stream_count = 0;              ///< streams the plan may use, in total
  std::size_t cross_stream_waits = 0;
  std::size_t cross_stream_edges = 0;  ///< before elimination

  int collective_stream() const noexcept { return stream_count - 1; }
};

/// @pre the graph is valid (acyclic). `placement` gives each task's placement.
Plan make_plan(const Graph& graph, const std::vector<Placement>& placement,
               int streams_per_priority);

}  // namespace loom::detail
