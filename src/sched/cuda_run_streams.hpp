#pragma once
// The eager CUDA launcher's state of one run (Run::device): each device
// task's launch state and each plan stream's cursor. Private to the
// launcher's files, each of which takes one concern:
//   cuda_launcher.cpp       the launcher: its streams, a run's state, a round
//   cuda_rotation.cpp       which executor streams a run lands on, and what
//                           they wait for at its start (earlier runs, the
//                           runtime's entry stream)
//   cuda_launch.cpp         launching device tasks in plan order, their
//                           event waits, the work a failed launch left behind
//   cuda_staged_copies.cpp  pageable copies, which start and end on their own
//   cuda_polling.cpp        observing completion (events, stream order) and
//                           the wake-ups armed before the scheduler sleeps
//   cuda_trace.cpp          device times of traced tasks, the trace clock

#include "cuda/event_pool.hpp"
#include "sched/cuda_launcher.hpp"
#include "sched/run.hpp"

#include <loom/completion.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace loom::detail {

struct Storage;

// A device task's launch state in one run.
struct CudaLauncher::DeviceTask {
  bool watching = false;         // its event is polled
  bool confirmed = false;        // seen complete through its stream's watched tail
  std::uint64_t launch_seq = 0;  // its place among its executor stream's launches
  // A collective's (the collective stream's tasks): events around its work,
  // so that the scheduling thread sees when it started and whether it ended,
  // and asks its op whether it gives up (Op::overdue).
  EventPool::Lease collective_start;
  EventPool::Lease collective_end;
  bool started_seen = false;
  bool gave_up = false;
  std::chrono::steady_clock::time_point started{};  // when its start was first seen
  EventPool::Lease event;
  EventPool::Lease trace_start;
  EventPool::Lease trace_end;
  Completion async;                                  // a staged copy's
  std::vector<std::shared_ptr<Storage>> workspaces;  // given back with the run, after its work
};

// One plan stream of a run: what was launched on it, in order, and how far
// its launches and its confirmed completions have come.
struct CudaLauncher::StreamCursor {
  std::vector<std::uint32_t> in_flight;  // launch order
  std::size_t head = 0;                  // the first launched and not yet confirmed
  std::size_t next = 0;                  // the next of the stream's plan to launch
};

// A run's state on the streams (Run::device).
struct CudaLauncher::RunStreams final : LaunchState {
  std::vector<DeviceTask> tasks;
  std::vector<StreamCursor> streams;  // per plan stream
  std::size_t order_next = 0;         // the next in prepared->device_order
  int rotation = 0;  // the plan's stream k of a priority runs on executor stream (k + rotation) % K
  std::vector<std::uint8_t> wait_streams;  // executor streams of earlier runs to wait on at start
  std::vector<EventPool::Lease> gate_events;
  std::vector<EventPool::Lease> start_marks;  // behind the waits on earlier runs, one a stream
  // Plan streams ordered after earlier runs by stream order alone (they land
  // on those runs' streams): no event, so no start mark unless nothing of
  // this run is launched there (see mark_unlaunched_waits).
  std::vector<std::uint8_t> stream_order_waits;
  bool unlaunched_marked = false;
  std::vector<std::size_t> queried_streams;  // executor streams watched without an event
  std::vector<std::uint32_t> watched;
  std::vector<std::uint32_t> async_running;
  EventPool::Lease trace_base;
  EventPool::Lease entry;

  // Back to a new run's state: every lease and workspace goes back to its
  // pool (the run's work is over), the vectors keep their capacity.
  void release() noexcept override {
    tasks.clear();
    for (auto& cursor : streams) {
      cursor.in_flight.clear();
      cursor.head = 0;
      cursor.next = 0;
    }
    order_next = 0;
    rotation = 0;
    wait_streams.clear();
    gate_events.clear();
    start_marks.clear();
    stream_order_waits.clear();
    unlaunched_marked = false;
    queried_streams.clear();
    watched.clear();
    async_running.clear();
    trace_base = {};
    entry = {};
  }
};

inline CudaLauncher::RunStreams& streams_of(Run& run) noexcept {
  return static_cast<CudaLauncher::RunStreams&>(*run.device);
}
inline const CudaLauncher::RunStreams& streams_of(const Run& run) noexcept {
  return static_cast<const CudaLauncher::RunStreams&>(*run.device);
}

}  // namespace loom::detail
