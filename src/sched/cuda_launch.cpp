// Launching device tasks (cuda_launcher.hpp): in plan order across streams
// while it can, then each stream on its own; a task's event waits for its
// cross-stream predecessors, its events, its run_cuda on the task's stream,
// and what a failed launch left on the stream (still watched to its end).
#include "sched/cuda_run_streams.hpp"

#include "core/storage.hpp"
#include "core/task_context.hpp"
#include "core/task_kind.hpp"
#include "cuda/check.hpp"
#include "sched/copy_engine.hpp"
#include "sched/run_machine.hpp"
#include "sched/run_profile.hpp"
#include "trace/nvtx_range.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>

#include <chrono>
#include <string>

namespace loom::detail {

namespace {

// A launch that went wrong without a failing call (a bad configuration, too
// much shared memory) leaves its error for cudaGetLastError: read it right
// after the op, so it fails this task and is not blamed on the next one.
void check_op_launch(const Task& task) {
  const cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess) return;
  const std::string what = std::string(kind_name(task)) + " '" + task.name + "' launch";
  throw_cuda_error(rc, what.c_str(), __FILE__, __LINE__);
}

// A launch may hold this thread for as long as its work runs (a CUDA
// graph whose branches outrun the device's queue returns only near its end,
// run_n's launches one after another), while nothing else keeps a worker
// warm: the one that ends the run would be asleep when its end is seen. So
// a worker is kept warm over the launch, and again after a long one.
template <class F>
void keep_warm_over(RunMachine& machine, F&& launch) {
  constexpr auto kLong = std::chrono::microseconds(100);
  const auto t0 = std::chrono::steady_clock::now();
  machine.keep_a_worker_warm(t0 + kDeviceSpin);
  launch();
  const auto t1 = std::chrono::steady_clock::now();
  if (t1 - t0 > kLong) machine.keep_a_worker_warm(t1 + kDeviceSpin);
}

}  // namespace

// What a running device task may ask for: scratch memory for its stream,
// kept until the run is over (its device work has finished by then), and the
// device's properties.
class CudaLauncher::Resources final : public TaskResources {
 public:
  Resources(CudaLauncher& launcher, DeviceTask& task, StreamView stream)
      : launcher_(launcher), task_(task), stream_(stream) {}
  void* workspace(std::size_t bytes) override {
    task_.workspaces.push_back(launcher_.copies_.workspace(bytes, stream_));
    return task_.workspaces.back()->base;
  }
  const DeviceProperties& properties() override {
    if (!launcher_.properties_)
      launcher_.properties_ = device_properties(launcher_.options_.device);
    return *launcher_.properties_;
  }

 private:
  CudaLauncher& launcher_;
  DeviceTask& task_;
  StreamView stream_;
};

bool CudaLauncher::take_next_on_stream(RunMachine& machine, Run& run, std::uint32_t t, int stream) {
  const TaskState& ts = run.tasks_state[t];
  const bool skipped = ts.status == TaskStatus::cancelled || ts.status == TaskStatus::failed;
  if (!skipped && (ts.status != TaskStatus::pending || !ts.ready)) return false;
  ++streams_of(run).streams[static_cast<std::size_t>(stream)].next;
  if (!skipped) launch(machine, run, t);
  // Skipped or failed: the work already launched on the stream must still be seen to finish.
  if (ts.status == TaskStatus::cancelled || ts.status == TaskStatus::failed) {
    watch_stream_tail(machine, run, stream);
  }
  return true;
}

bool CudaLauncher::advance_in_plan_order(RunMachine& machine, Run& run) {
  RunStreams& mine = streams_of(run);
  const auto& order = run.prepared->device_order;
  bool progress = false;
  while (mine.order_next < order.size()) {
    const auto t = order[mine.order_next];
    const int stream = run.plan().tasks[t].stream;
    const auto s = static_cast<std::size_t>(stream);
    if (mine.streams[s].next > run.prepared->stream_pos[t] ||  // its stream got past it
        take_next_on_stream(machine, run, t, stream)) {
      ++mine.order_next;
      progress = true;
      continue;
    }
    break;
  }
  return progress;
}

bool CudaLauncher::advance_stream(RunMachine& machine, Run& run, int stream) {
  const auto& queue = run.stream_plan(static_cast<std::size_t>(stream));
  auto& next = streams_of(run).streams[static_cast<std::size_t>(stream)].next;
  bool progress = false;
  while (next < queue.size() && take_next_on_stream(machine, run, queue[next], stream)) {
    progress = true;
  }
  return progress;
}

void CudaLauncher::watch_stream_tail(RunMachine& machine, Run& run, int stream) {
  RunStreams& mine = streams_of(run);
  StreamCursor& cursor = mine.streams[static_cast<std::size_t>(stream)];
  const auto& flight = cursor.in_flight;
  if (cursor.head >= flight.size()) return;  // nothing launched is unconfirmed
  const auto last = flight.back();
  DeviceTask& dt = mine.tasks[last];
  if (dt.watching) return;
  try {
    if (!dt.event) {
      dt.event = events_->acquire();
      dt.event->record(streams_[physical(run, stream)]->view());
    }
  } catch (...) {
    // No event to watch the tail with: the stream itself is queried until
    // it has drained, so the run (and its memory) still outlives its work.
    const auto error = std::current_exception();
    for (std::size_t i = cursor.head; i < flight.size(); ++i) {
      mine.tasks[flight[i]].confirmed = true;
      machine.fail(run, flight[i], error);
    }
    cursor.head = flight.size();
    mine.queried_streams.push_back(physical(run, stream));
    return;
  }
  dt.watching = true;
  mine.watched.push_back(last);
}

void CudaLauncher::launch(RunMachine& machine, Run& run, std::uint32_t t) {
  if (run.tasks_state[t].status != TaskStatus::pending) return;
  RunStreams& mine = streams_of(run);
  DeviceTask& dt = mine.tasks[t];
  const Task& task = run.tasks()[t];
  const PlannedTask& planned = run.plan().tasks[t];
  StreamCursor& cursor = mine.streams[static_cast<std::size_t>(planned.stream)];
  const std::size_t executor_stream = physical(run, planned.stream);
  const StreamView stream = streams_[executor_stream]->view();
  bool enqueued_some = false;  // a failure after this point may leave work on the stream
  try {
    const TaskScope scope(task.name);
    const NvtxRange range(task.name);
    for (auto p : planned.waits) mine.tasks[p].event->make_wait(stream);
    if (run.tracing) {
      dt.trace_start = timing_events_->acquire();
      dt.trace_start->record(stream);
    }
    const bool collective = planned.stream == run.plan().collective_stream();
    if (collective) {
      dt.collective_start = events_->acquire();
      dt.collective_start->record(stream);
    }
    Resources resources(*this, dt, stream);
    const ExecutionContext ctx(options_.device, stream.native(), &resources);
    enqueued_some = true;
    switch (task.kind) {
      case TaskKind::op:
        keep_warm_over(machine, [&] { task.op->run_cuda(ctx); });
        check_op_launch(task);
        break;
      case TaskKind::copy: copies_.enqueue(task.copy_src, task.copy_dst, stream); break;
      case TaskKind::host: throw InternalError("a host task was planned on a stream");
    }
    if (collective) {
      dt.collective_end = events_->acquire();
      dt.collective_end->record(stream);
    }
    if (run.tracing) {
      dt.trace_end = timing_events_->acquire();
      dt.trace_end->record(stream);
    }
    if (planned.record_event) {
      dt.event = events_->acquire();
      dt.event->record(stream);
    }
  } catch (...) {
    const auto error = std::current_exception();
    if (enqueued_some) {
      // Whatever the task enqueued before it failed still runs: its stream
      // tail is watched, so that the run (and its memory) outlives it.
      dt.event = {};
      cursor.in_flight.push_back(t);
    }
    machine.fail(run, t, error);
    return;
  }
  dt.launch_seq = ++launches_[executor_stream];
  cursor.in_flight.push_back(t);
  if (planned.watched) {
    dt.watching = true;
    mine.watched.push_back(t);
  }
  mark(RunMilestone::launched);
  machine.enqueued(run, t);
}

}  // namespace loom::detail
