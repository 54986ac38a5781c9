// Observing device work end (cuda_launcher.hpp): the events of watched tasks
// (stream order confirms everything launched before them on their stream),
// start marks, streams queried without an event; and, before the scheduler
// sleeps, host callbacks (Waker) queued behind the watched work.
#include "sched/cuda_run_streams.hpp"

#include "core/log.hpp"
#include "cuda/stream.hpp"
#include "sched/run_machine.hpp"
#include "sched/scheduler_loop.hpp"

#include <loom/error.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <exception>
#include <string>

namespace loom::detail {

namespace {

// True once everything queued on the stream has run, or the device is lost
// (nothing more will run). Never blocks.
bool stream_drained_or_lost(StreamView stream) {
  const cudaError_t rc = cudaStreamQuery(stream.native());
  if (rc == cudaErrorNotReady) return false;
  if (rc != cudaSuccess) (void)cudaGetLastError();
  return true;
}

}  // namespace

bool CudaLauncher::idle(const Run& run) const {
  const RunStreams& mine = streams_of(run);
  return mine.start_marks.empty() && mine.queried_streams.empty() && mine.watched.empty() &&
         mine.async_running.empty();
}

bool CudaLauncher::watching(const Run& run) const {
  const RunStreams& mine = streams_of(run);
  return !mine.watched.empty() || !mine.async_running.empty();
}

bool CudaLauncher::arm_wakeups(const RunList& runs) {
  if (waker_ == nullptr) return true;
  bool ok = true;
  for (const auto& r : runs) {
    const RunStreams& mine = streams_of(*r);
    for (auto w : mine.watched) {
      const auto s = physical(*r, r->plan().tasks[w].stream);
      // A callback runs behind all the stream's work: behind a later
      // launch it would come late. Such work is polled instead.
      if (mine.tasks[w].launch_seq != launches_[s]) {
        ok = false;
        continue;
      }
      if (!waker_->arm(s, streams_[s]->view())) ok = false;
    }
  }
  return ok;
}

// The collective running on the run's collective stream, if any (the first
// in flight whose start event has completed and whose end event has not):
// its op is asked whether it gives up (Op::overdue), counting from when its
// start was first seen; one that does fails by name, its device work made
// to end by the op. Collectives queued behind it are not judged yet.
void CudaLauncher::give_up_overdue(RunMachine& machine, Run& run) {
  RunStreams& mine = streams_of(run);
  const auto s = static_cast<std::size_t>(run.plan().collective_stream());
  if (s >= mine.streams.size()) return;
  const StreamCursor& cursor = mine.streams[s];
  for (std::size_t k = cursor.head; k < cursor.in_flight.size(); ++k) {
    const auto t = cursor.in_flight[k];
    DeviceTask& dt = mine.tasks[t];
    if (!dt.collective_start || !dt.collective_end) return;
    try {
      if (dt.collective_end->completed()) continue;
      if (!dt.started_seen) {
        if (!dt.collective_start->completed()) return;
        dt.started_seen = true;
        dt.started = std::chrono::steady_clock::now();
      }
    } catch (const std::exception&) {
      return;  // a device fault: the watched events report it
    }
    const Task& task = run.tasks()[t];
    if (dt.gave_up || task.kind != TaskKind::op || !task.op) return;
    std::string why;
    try {
      why = task.op->overdue(std::chrono::steady_clock::now() - dt.started);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty()) {
      dt.gave_up = true;
      machine.fail(run, t, std::make_exception_ptr(CommError(why)));
    }
    return;
  }
}

bool CudaLauncher::poll(RunMachine& machine, Run& run) {
  RunStreams& mine = streams_of(run);
  bool progress = false;
  for (std::size_t i = 0; i < mine.start_marks.size();) {
    bool done = true;
    try {
      done = mine.start_marks[i]->completed();
    } catch (const std::exception& e) {
      logger().debug("a run's start mark failed: {}", e.what());  // its tasks report the fault
    }
    if (!done) {
      ++i;
      continue;
    }
    mine.start_marks.erase(mine.start_marks.begin() + static_cast<std::ptrdiff_t>(i));
    progress = true;
  }
  for (std::size_t i = 0; i < mine.queried_streams.size();) {
    if (!stream_drained_or_lost(streams_[mine.queried_streams[i]]->view())) {
      ++i;
      continue;
    }
    mine.queried_streams.erase(mine.queried_streams.begin() + static_cast<std::ptrdiff_t>(i));
    progress = true;
  }
  for (std::size_t i = 0; i < mine.watched.size();) {
    const auto w = mine.watched[i];
    bool done = false;
    std::exception_ptr error;
    try {
      done = mine.tasks[w].event->completed();
    } catch (...) {
      done = true;
      error = std::current_exception();
    }
    if (!done) {
      ++i;
      continue;
    }
    mine.watched[i] = mine.watched.back();
    mine.watched.pop_back();
    progress = true;
    // A later watched task of the same stream may already have confirmed it.
    if (mine.tasks[w].confirmed) continue;
    // Stream order: everything launched on the stream up to w is done too.
    // A fault is seen the same way, through the watched event (events are
    // recorded only where something observes them: stream tails, tasks with
    // host or cross-stream successors; a traced task's timing events are
    // never polled), so it fails every task
    // of the stream whose end had not been seen up to w, each by its name,
    // and the run's error names the earliest of them: the faulting task when
    // it is the only one, possibly an earlier one of the same stream when
    // several small tasks were in flight (a sticky fault shows on every
    // event, so it may also be seen first through another stream's).
    StreamCursor& cursor = mine.streams[static_cast<std::size_t>(run.plan().tasks[w].stream)];
    while (cursor.head < cursor.in_flight.size()) {
      const auto t = cursor.in_flight[cursor.head++];
      mine.tasks[t].confirmed = true;
      if (error) {
        machine.fail(run, t, error);
      } else {
        machine.complete(run, t);  // a task that failed at its launch stays failed
      }
      if (t == w) break;
    }
  }
  if (poll_staged(machine, run)) progress = true;
  give_up_overdue(machine, run);
  return progress;
}

}  // namespace loom::detail
