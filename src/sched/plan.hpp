#pragma once
// How a graph will run: where each task runs, which stream each device task
// goes to, and which cross-stream edges need an event. CUDA-free, so the
// stream assignment and the event elimination are tested on the CPU.
//
// Streams: `streams_per_priority` for each priority (index p * K + k), and
// one more for collectives (NCCL calls of a communicator stay on one stream,
// in one order). A task continues the stream of a predecessor that is still
// that stream's last task (so chains stay on one stream). Otherwise where it
// goes depends on what its work is worth (the cost model below):
//  - large work (or work of unknown size) takes the least recently used
//    stream of its priority, so that independent branches overlap; a join
//    (device predecessors on two or more streams) gains nothing from a fresh
//    stream and takes the one that needs the fewest waits;
//  - small work gains nothing from overlapping: its device time is below
//    what spreading costs (an event record and wait a crossing edge, ~2-4 µs
//    of launch time, and a watched tail a stream). It takes, in this order
//    of preference, a stream whose last task is neither large work nor
//    waiting for a host task or a staged copy (it must not queue behind a
//    long kernel, nor behind a launch that waits for the host: a stream
//    launches in plan order), the stream that needs the fewest waits,
//    the most recently used stream: independent small tasks gather on one
//    stream, in topological order, and a graph of small tasks alone runs on
//    one stream with no event at all, like raw launches on one stream.
// A cross-stream edge costs an event only when the waiting stream does not
// already know, through earlier waits (vector clocks over the streams), that
// the predecessor is done: transitive edges cost nothing.
//
// The cost model (small_work()): deterministic, from the graph alone, with
// the bytes a task touches as the proxy of its device time. A task's work
// is small when it touches fewer than kSmallWorkBytes: an op or kernel task
// (the bytes of the tensors it declares, read and written), a copy within
// device memory (its bytes, read and written), a copy over the host link
// (its bytes weighted by kHostLinkWeight: the link is that much slower than
// device memory). Large whatever their bytes: ops whose time is known not to
// follow their bytes (spin, matmul, a compiled graph's segment),
// collectives, host tasks. 4 MiB is about 1 µs of an H200's memory
// bandwidth: below it a memory-bound kernel lasts about as long as its
// launch. The proxy's limit: a kernel (task) that computes long on few
// bytes is taken for small work, and so runs in order with the other small
// work of its priority rather than beside it.

#include <loom/graph.hpp>
#include "core/task_kind.hpp"

#include <cstdint>
#include <vector>

namespace loom::detail {

enum class Placement : std::uint8_t {
  device,  ///< enqueued on a stream by the scheduler
  host,    ///< run by a host worker
  async,   ///< started by the scheduler, completes on its own (staged copies)
};

/// Work below this many bytes (weighted) gains nothing from a stream of its own.
inline constexpr std::uint64_t kSmallWorkBytes = std::uint64_t{4} << 20;
/// How much more a byte over the host link costs than one in device memory.
inline constexpr std::uint64_t kHostLinkWeight = 64;

/// The cost model: true when `task`'s device work is known to be small (see above).
bool small_work(const Task& task);

struct PlannedTask {
  Placement placement = Placement::host;
  int stream = -1;                   ///< device tasks: the stream index
  std::vector<std::uint32_t> waits;  ///< device predecessors on other streams to wait on
  bool record_event = false;         ///< another stream waits on it, or it is watched
  bool watched = false;              ///< its completion is observed (host successors, stream tail)
  bool small = false;                ///< small_work(): placed to spare streams and events
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
