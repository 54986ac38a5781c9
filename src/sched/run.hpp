#pragma once
// One submitted run as the scheduler keeps it: the prepared graph, each
// task's state, the run's place in the ordering across runs, and what its
// launchers keep for it. Owned by the scheduling thread from admission to
// its end (host workers write only the fields of the tasks they run, and
// hand them back through the host launcher's queue); torn down on a worker.
//
// Backend-free: a device launcher keeps its own per-run state (streams,
// events) behind `device`, made by it at submit.

#include "core/completion_state.hpp"
#include "sched/activity_recorder.hpp"
#include "sched/plan.hpp"
#include "sched/prepared_graph.hpp"
#include "sched/run_state.hpp"
#include "sched/run_times.hpp"

#include <loom/future.hpp>
#include <loom/graph.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

namespace loom::detail {

class CpuLauncher;
using Clock = std::chrono::steady_clock;

struct TaskState {
  std::uint32_t unmet = 0;  // predecessors not yet satisfied
  TaskStatus status = TaskStatus::pending;
  bool ready = false;        // every predecessor satisfied (a device task then waits for its turn)
  bool settled = false;      // terminal, or enqueued in order (later runs may follow it there)
  bool skipped = false;      // a worker found the run cancelled and did not run it
  int worker = -1;           // host tasks: the worker that ran it
  std::exception_ptr error;  // host tasks: what the worker caught
  double start_us = 0;       // host tasks and staged copies, since the run started (trace)
  double end_us = 0;
};

/// What a device launcher keeps per run (its streams, events, in-flight
/// lists); made by Launcher::attach() and destroyed with the run.
struct LaunchState {
  virtual ~LaunchState() = default;
  /// Lets go of everything the run held (events, workspaces), keeping the
  /// capacity of its vectors for the next run that reuses this state.
  virtual void release() noexcept {}
};

struct Run {
  std::shared_ptr<RunState> state;
  std::shared_ptr<const PreparedGraph> prepared;
  std::shared_ptr<CompletionState> completion;  // Runtime::copy's
  std::vector<TaskState> tasks_state;
  std::size_t unfinished = 0;  // tasks not yet terminal
  std::size_t unsettled = 0;   // tasks neither terminal nor enqueued in order
  // Ordering across runs: the runs this one waits for (gates), and those
  // waiting for this one to be wholly enqueued (settled) or finished.
  bool started = false;
  int gates = 0;
  std::vector<Run*> followers_settled;
  std::vector<Run*> followers_finished;
  // Every later run over this one's data, whichever way it starts: none of
  // them finishes before this one (so their Futures turn ready after its).
  std::vector<Run*> finish_followers;
  int unfinished_leaders = 0;  // earlier runs over its data not yet finished
  bool cancel_handled = false;
  std::exception_ptr first_error;
  std::vector<TaskReport> reports;  // names left out (the state has them); published at the end
  Clock::time_point started_at = Clock::now();
  unsigned long long number = 0;
  bool tracing = false;     // its tasks are timed (a trace file, an activity log)
  ActivityTicket activity;  // the activity log it joined at submit, if any
  // The host launcher's: kept here rather than behind a pointer, which would
  // cost every run an allocation.
  std::vector<std::uint32_t> ready_host;  // posted in priority order once per scheduler round
  std::atomic<int> host_outstanding{0};   // posted to workers, outcome not yet taken back
  // Who runs its host tasks: a worker's job then names only the run and the
  // task, small enough for std::function's own storage (no allocation a task).
  CpuLauncher* host_launcher = nullptr;
  // The device launcher's (null without one).
  std::unique_ptr<LaunchState> device;
  // Set at finish for the worker that winds the run up: its tasks' times
  // (traced runs only).
  RunTimes times;
  // The earlier runs over its data (admission): it is published after them.
  std::vector<std::weak_ptr<RunState>> leaders;
  Run* next_parked = nullptr;  // the next end parked with the same leader (RunState::parked_ends)

  /// Back to a new run's state, at teardown (on a worker): drops every
  /// reference the run held (its tensors through the prepared graph, its
  /// state, events and workspaces through `device`), keeping the capacity of
  /// its vectors and the launcher's state (released) for the next run made
  /// from this one (RunMachine keeps spare runs: a steady state allocates none).
  void recycle() noexcept {
    state.reset();
    prepared.reset();
    completion.reset();
    tasks_state.clear();
    unfinished = 0;
    unsettled = 0;
    started = false;
    gates = 0;
    followers_settled.clear();
    followers_finished.clear();
    finish_followers.clear();
    unfinished_leaders = 0;
    cancel_handled = false;
    first_error = nullptr;
    reports.clear();
    number = 0;
    tracing = false;
    activity = ActivityTicket{};
    ready_host.clear();
    host_outstanding.store(0, std::memory_order_relaxed);
    host_launcher = nullptr;
    times.tasks.clear();
    times.device_origin_us.reset();
    leaders.clear();
    next_parked = nullptr;
    if (device) device->release();
  }

  const std::vector<Task>& tasks() const noexcept { return prepared->tasks(); }
  const Plan& plan() const noexcept { return prepared->plan; }
  const std::vector<std::uint32_t>& stream_plan(std::size_t s) const noexcept {
    return prepared->stream_plan[s];
  }
  Placement placement(std::uint32_t t) const noexcept { return prepared->plan.tasks[t].placement; }
};

/// Microseconds since `t0`, for traces.
inline double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace loom::detail
