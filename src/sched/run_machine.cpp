#include "sched/run_machine.hpp"

#include "core/log.hpp"
#include "core/task_context.hpp"
#include "core/thread_role.hpp"
#include "sched/run_profile.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <chrono>

namespace loom::detail {

namespace {

// Spare runs kept for reuse: more than the runs a runtime has in flight at once, usually.
constexpr std::size_t kMaxSpareRuns = 64;

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown exception";
  }
}

}  // namespace

RunMachine::RunMachine(Launcher& host, Launcher* device, Poison& poison,
                       std::shared_ptr<WorkerPool> workers, std::string trace_path)
    : host_(host),
      device_(device),
      poison_(poison),
      workers_(std::move(workers)),
      trace_path_(std::move(trace_path)),
      lifecycle_(std::make_shared<Lifecycle>(workers_)) {
  spare_runs_.reserve(kMaxSpareRuns);
}

std::unique_ptr<Run> RunMachine::new_run() {
  auto run = std::make_unique<Run>();
  // Room for a few runs before and after it over the same data, now: a
  // spare run that has only ever led may next follow, and would allocate
  // then, in steady state.
  run->leaders.reserve(kRoomForLeaders);
  run->finish_followers.reserve(kRoomForLeaders);
  run->followers_settled.reserve(kRoomForLeaders);
  run->followers_finished.reserve(kRoomForLeaders);
  return run;
}

std::unique_ptr<Run> RunMachine::take_spare_run() {
  std::lock_guard lock(spare_mutex_);
  if (spare_runs_.empty()) return nullptr;
  auto run = std::move(spare_runs_.back());
  spare_runs_.pop_back();
  return run;
}

void RunMachine::give_spare_run(Run* run) noexcept {
  {
    std::lock_guard lock(spare_mutex_);
    if (spare_runs_.size() < spare_runs_.capacity()) {
      spare_runs_.emplace_back(run);
      return;
    }
  }
  delete run;
}

std::unique_ptr<Run> RunMachine::make_run(std::shared_ptr<const PreparedGraph> prepared,
                                          std::shared_ptr<CompletionState> completion) {
  std::unique_ptr<Run> run = take_spare_run();
  if (!run) run = new_run();
  run->prepared = std::move(prepared);
  run->completion = std::move(completion);
  const std::size_t n = run->tasks().size();
  run->state = make_run_state();
  run->state->lifecycle = lifecycle_;
  run->state->names = run->prepared->names;
  run->state->waits_on_device = run->prepared->uses_streams;
  // The reports go to the state when the run is published: a recycled
  // state brings their capacity back.
  run->reports.swap(run->state->reports);
  run->reports.resize(n);
  run->tasks_state.assign(n, TaskState{});
  run->unfinished = n;
  run->unsettled = n;
  run->started_at = Clock::now();
  run->number = ++run_counter_;
  if (recorder_.open()) run->activity = recorder_.join();
  run->tracing = !trace_path_.empty() || static_cast<bool>(run->activity);
  host_.attach(*run);
  if (device_ != nullptr) device_->attach(*run);
  lifecycle_->run_made();  // last: a run refused (shutting down) was never live
  return run;
}

void RunMachine::wait_idle() {
  check_may_wait("Runtime::synchronize()");
  if (current_thread_role() != nullptr) {
    throw InvalidArgument(
        "Runtime::synchronize() inside a task or continuation would wait for its own run",
        in_current_task());
  }
  lifecycle_->wait_no_runs();
}

void RunMachine::start_activity_log() {
  recorder_.start([this](Clock::time_point opened) -> std::shared_ptr<const DeviceClockMark> {
    return device_ != nullptr ? device_->mark_trace_clock(opened) : nullptr;
  });
}

void RunMachine::admit(std::unique_ptr<Run> owned) {
  runs_.push_back(std::move(owned));
  Run& run = *runs_.back();
  mark(RunMilestone::admitted);
  after_.clear();
  ordering_.enter(&run, run.prepared->accesses, after_);
  mark(RunMilestone::entered);
  earlier_.clear();
  for (auto id : after_) earlier_.push_back(static_cast<Run*>(const_cast<void*>(id)));
  // A run wholly on a launcher that orders runs itself (stream order) may
  // start once the earlier runs enqueued all their work; any other run (host
  // tasks, staged copies) once they are over.
  const bool follows = run.prepared->device_only && device_ != nullptr && device_->orders_runs();
  if (device_ != nullptr) device_->admit(run, earlier_, follows, runs_);
  std::unique_lock state_lock(run.state->mutex, std::defer_lock);
  for (Run* earlier : earlier_) {
    earlier->finish_followers.push_back(&run);
    ++run.unfinished_leaders;
    run.leaders.push_back(earlier->state);
    if (!follows) {
      earlier->followers_finished.push_back(&run);
      ++run.gates;
    } else if (earlier->unsettled > 0 || !earlier->started) {
      earlier->followers_settled.push_back(&run);
      ++run.gates;
    } else {
      continue;
    }
    // For Future::wait inside a task of `earlier`: this run cannot start first.
    if (!state_lock.owns_lock()) state_lock.lock();
    run.state->follows.push_back(earlier->state);
  }
  if (run.gates == 0) to_start_.push_back(&run);
}

void RunMachine::start_ready_runs() {
  while (!to_start_.empty()) {
    starting_.clear();
    starting_.swap(to_start_);  // both keep their capacity
    for (Run* r : starting_) {
      Run& run = *r;
      if (run.started) continue;
      try {
        start(run);
      } catch (...) {
        // Only a launcher's setup (CUDA calls: the entry event, tracing) can
        // throw here: fail the whole run, cleanly.
        const auto error = std::current_exception();
        for (std::uint32_t t = 0; t < run.tasks_state.size(); ++t) {
          if (run.tasks_state[t].status == TaskStatus::pending) fail(run, t, error);
        }
      }
    }
  }
}

void RunMachine::start(Run& run) {
  run.started = true;
  run.started_at = Clock::now();
  host_.start(run);
  if (device_ != nullptr) device_->start(run);
  const auto& tasks = run.tasks();
  for (std::uint32_t t = 0; t < tasks.size(); ++t) {
    run.tasks_state[t].unmet = static_cast<std::uint32_t>(tasks[t].predecessors.size());
  }
  for (auto t : run.prepared->roots) make_ready(run, t);
  // Settled before it started (cancelled while it waited for earlier runs):
  // its followers were kept until now, when its streams wait for those
  // runs' work in its place.
  if (run.unsettled == 0) release_followers(run.followers_settled);
}

bool RunMachine::advance(Run& run) {
  bool progress = false;
  if (run.state->cancel_requested.load() && !run.cancel_handled) {
    run.cancel_handled = true;
    // A cancel that stopped nothing (every task had started) leaves the
    // run's outcome as its tasks make it.
    if (cancel_pending(run, "the run was cancelled by the user") > 0) note_user_cancel(run);
    progress = true;
  }
  if (!run.started) return progress;  // waits for earlier runs over the same data
  // Device work first: its launches are what keeps the device busy.
  if (device_ != nullptr && device_->advance(*this, run)) progress = true;
  if (host_.advance(*this, run)) progress = true;
  return progress;
}

bool RunMachine::finished(const Run& run) const {
  // Not before it started: a run cancelled while it waited for earlier runs
  // over its data ends after them (later runs follow it in their place).
  // Nor before the earlier runs over its data: runs over the same data
  // finish, and so are published, in their order (a device run that started
  // once its leader was enqueued may see its own work done first).
  return run.started && run.unfinished == 0 && run.unfinished_leaders == 0 && host_.idle(run) &&
         (device_ == nullptr || device_->idle(run));
}

void RunMachine::keep_a_worker_warm(std::chrono::steady_clock::time_point until) {
  workers_->keep_one_warm(until);
}

bool RunMachine::finish_runs() {
  bool progress = false;
  for (std::size_t i = 0; i < runs_.size();) {
    if (finished(*runs_[i])) {
      auto run = std::move(runs_[i]);
      runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(i));
      finish(std::move(run));
      progress = true;
    } else {
      ++i;
    }
  }
  return progress;
}

void RunMachine::make_ready(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  if (ts.status != TaskStatus::pending) return;
  if (run.state->cancel_requested.load()) return;  // cancel_pending() will take it
  ts.ready = true;
  launcher_for(run.placement(t)).ready(*this, run, t);
}

void RunMachine::satisfy(Run& run, std::uint32_t t) {
  if (--run.tasks_state[t].unmet == 0) make_ready(run, t);
}

void RunMachine::settle(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  if (ts.settled) return;
  ts.settled = true;
  // A run keeps its place in the order until it starts: a follower that
  // starts once this run settled must find this run's streams waiting for
  // the earlier runs' work (start() releases a run settled before it).
  if (--run.unsettled == 0 && run.started) release_followers(run.followers_settled);
}

void RunMachine::release_followers(std::vector<Run*>& followers) {
  for (Run* f : followers) {
    if (--f->gates == 0) to_start_.push_back(f);
  }
  followers.clear();
}

void RunMachine::enqueued(Run& run, std::uint32_t t) {
  run.tasks_state[t].status = TaskStatus::running;
  run.reports[t].status = TaskStatus::running;
  settle(run, t);
  for (auto s : run.tasks()[t].successors) {
    if (run.placement(s) == Placement::device) satisfy(run, s);
  }
}

void RunMachine::running(Run& run, std::uint32_t t) {
  run.tasks_state[t].status = TaskStatus::running;
  run.reports[t].status = TaskStatus::running;
}

void RunMachine::complete(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  if (ts.status == TaskStatus::completed || ts.status == TaskStatus::failed) return;
  ts.status = TaskStatus::completed;
  run.reports[t].status = TaskStatus::completed;
  --run.unfinished;
  settle(run, t);
  const bool device = run.placement(t) == Placement::device;
  for (auto s : run.tasks()[t].successors) {
    // Device successors of a device task were satisfied when it was enqueued.
    if (!device || run.placement(s) != Placement::device) satisfy(run, s);
  }
}

void RunMachine::fail(Run& run, std::uint32_t t, std::exception_ptr error) {
  TaskState& ts = run.tasks_state[t];
  if (ts.status == TaskStatus::completed || ts.status == TaskStatus::failed ||
      ts.status == TaskStatus::cancelled) {
    return;
  }
  const std::string& name = run.tasks()[t].name;
  // A new error when it names another task or none: the one passed in may
  // fail other tasks too, or be another run's, and is never changed.
  error = naming_task(error, name);
  poison_.note(error);
  ts.status = TaskStatus::failed;
  ts.error = error;
  run.reports[t].status = TaskStatus::failed;
  run.reports[t].error = message_of(error);
  --run.unfinished;
  settle(run, t);
  if (!run.first_error) run.first_error = error;
  detail::logger().debug("task '{}' failed: {}", name, run.reports[t].error);
  cancel_successors(run, t, "task '" + name + "' failed");
}

void RunMachine::skipped(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  ts.status = TaskStatus::cancelled;
  --run.unfinished;
  settle(run, t);
  run.reports[t].status = TaskStatus::cancelled;
  run.reports[t].error = "cancelled: the run was cancelled by the user";
  note_user_cancel(run);
  cancel_successors(run, t, "task '" + run.tasks()[t].name + "' was cancelled");
}

void RunMachine::note_user_cancel(Run& run) {
  if (!run.first_error) {
    run.first_error = std::make_exception_ptr(Cancelled("the run was cancelled by the user"));
  }
}

void RunMachine::cancel_successors(Run& run, std::uint32_t t, const std::string& why) {
  std::vector<std::uint32_t> stack(run.tasks()[t].successors);
  while (!stack.empty()) {
    const auto s = stack.back();
    stack.pop_back();
    TaskState& ts = run.tasks_state[s];
    if (ts.status != TaskStatus::pending) continue;  // launched work finishes on its own
    ts.status = TaskStatus::cancelled;
    run.reports[s].status = TaskStatus::cancelled;
    run.reports[s].error = "cancelled: " + why;
    --run.unfinished;
    settle(run, s);
    for (auto n : run.tasks()[s].successors) stack.push_back(n);
  }
}

std::size_t RunMachine::cancel_pending(Run& run, const std::string& why) {
  std::size_t cancelled = 0;
  for (std::uint32_t t = 0; t < run.tasks_state.size(); ++t) {
    TaskState& ts = run.tasks_state[t];
    if (ts.status != TaskStatus::pending) continue;
    ts.status = TaskStatus::cancelled;
    run.reports[t].status = TaskStatus::cancelled;
    run.reports[t].error = "cancelled: " + why;
    --run.unfinished;
    settle(run, t);
    ++cancelled;
  }
  return cancelled;
}

void RunMachine::finish(std::unique_ptr<Run> owned) {
  Run& run = *owned;
  mark(RunMilestone::observed);
  ordering_.leave(&run, run.prepared->accesses);
  release_followers(run.followers_settled);
  release_followers(run.followers_finished);
  for (Run* f : run.finish_followers) --f->unfinished_leaders;
  run.finish_followers.clear();
  // No earlier run still lists this one: finished() waited for every leader
  // (each gate is a leader too), and a leader forgets its followers as it
  // finishes.
  std::erase(to_start_, &run);
  // Only the times are read here (a device task's from its events, which
  // this thread alone queries); names, files and spans are made on the worker.
  if (run.tracing) {
    run.times.tasks = time_completed_tasks(run, device_);
    const DeviceClockMark* mark = run.activity ? run.activity.session().device_clock() : nullptr;
    // Only a run with device spans needs its base placed: a host-only run's
    // base may never have run, and an error thrown here would cost this thread.
    const bool device_spans = std::any_of(
        run.times.tasks.begin(), run.times.tasks.end(),
        [&](const TaskTiming& t) { return run.placement(t.task) == Placement::device; });
    if (mark != nullptr && device_ != nullptr && device_spans)
      run.times.device_origin_us = device_->trace_origin_us(run, *mark);
  }
  // The run's last references to its tensors (and so perhaps their memory)
  // are dropped on a worker or on the thread spinning in its wait(), never
  // here, and before the run is published: once wait() returns, the run
  // holds nothing (take() works). High priority: user host work must not
  // hold back a run's end. The job is two pointers, which std::function
  // keeps without allocating.
  Run* raw = owned.release();
  if (hand_end_to_waiter(raw)) return;
  workers_->post(Priority::high, [this, raw](int) { end_on_worker(raw); });
}

bool RunMachine::hand_end_to_waiter(Run* run) noexcept {
  RunState& s = *run->state;
  if (s.end_handoff.load(std::memory_order_acquire) != RunState::kEndWaiterSpins) return false;
  // Only this thread writes them, and the waiter reads them only once the
  // exchange below succeeds (release); after a failed one nobody does.
  s.end_run = &RunMachine::end_for_waiter;
  s.end_machine = this;
  s.end_of = run;
  int expected = RunState::kEndWaiterSpins;
  return s.end_handoff.compare_exchange_strong(expected, RunState::kEndHanded,
                                               std::memory_order_acq_rel);
}

void RunMachine::end_for_waiter(void* machine, void* run) noexcept {
  // The same end as a worker's (the machine lives while the run is not
  // published); a failure there is logged, as a worker's job's would be.
  try {
    static_cast<RunMachine*>(machine)->end_on_worker(static_cast<Run*>(run));
  } catch (const std::exception& e) {
    logger().error("a run's end failed on its waiter's thread: {}", e.what());
  } catch (...) {
    logger().error("a run's end failed on its waiter's thread: a non-standard exception");
  }
}

bool RunMachine::park_behind_a_leader(Run* run) {
  for (const auto& weak : run->leaders) {
    // Gone: no run holds it any more, so it was published.
    const std::shared_ptr<RunState> leader = weak.lock();
    if (!leader) continue;
    std::lock_guard lock(leader->mutex);
    if (!leader->done) {
      run->next_parked = static_cast<Run*>(leader->parked_ends);
      leader->parked_ends = run;
      return true;
    }
  }
  return false;
}

void RunMachine::end_on_worker(Run* raw) {
  // The earlier runs over its data finished first, but their ends may still
  // be under way on other workers: this run turns ready after them, so its
  // end is parked with the first that is not published yet, which posts it
  // again once it is (the end then looks at the rest). Never a wait here: a
  // worker that waited would need another in its place.
  if (park_behind_a_leader(raw)) return;
  mark(RunMilestone::ending);
  FinishedTrace trace = finished_trace(*raw, raw->times);
  // What publishing needs, taken out of the run before it lets go of the rest.
  auto lifecycle = lifecycle_;
  auto state = std::move(raw->state);
  auto completion = std::move(raw->completion);
  auto error = std::move(raw->first_error);
  auto reports = std::move(raw->reports);
  raw->recycle();
  give_spare_run(raw);  // before publishing: then this machine may be gone
  if (trace.file) {
    // A run's outcome does not depend on its trace (nor do the runs parked
    // behind it): a failure to write it is logged, not thrown.
    try {
      write_chrome_trace(trace.file->path, trace.file->tracks, trace.file->events);
    } catch (const std::exception& e) {
      logger().error("the trace was not written: {}", e.what());
    }
  }
  std::vector<std::function<void(const Future&)>> continuations;
  void* parked = nullptr;
  // The Completion gets an error of its own, and this worker keeps no
  // reference to either: each stored error dies with the state that holds
  // it, after every waiter that read it (see copy_of_error).
  auto completion_error = copy_of_error(error);
  {
    std::lock_guard lock(state->mutex);
    state->error = std::move(error);
    state->reports = std::move(reports);
    state->done = true;
    state->wake_scheduler = nullptr;
    continuations.swap(state->continuations);
    std::swap(parked, state->parked_ends);
  }
  state->published.store(true, std::memory_order_release);
  mark(RunMilestone::published);
  state->done_cv.notify_all();
  if (completion) completion->finish(std::move(completion_error));
  // After the Completion too (a later rt.copy's must not finish first). The
  // parked runs are live (unpublished), so this machine is too.
  for (Run* follower = static_cast<Run*>(parked); follower != nullptr;) {
    Run* next = follower->next_parked;
    follower->next_parked = nullptr;
    workers_->post(Priority::high, [this, follower](int) { end_on_worker(follower); });
    follower = next;
  }
  std::vector<std::function<void()>> jobs;
  jobs.reserve(continuations.size());
  for (auto& fn : continuations) {
    jobs.emplace_back([fn = std::move(fn), state] { fn(FutureAccess::make(state)); });
  }
  // No longer live, its continuations counted until they return: the
  // runtime's shutdown waits for both.
  lifecycle->run_published(std::move(jobs));
  trace.activity.deliver(std::move(trace.spans));
}

FinishedTrace RunMachine::finished_trace(Run& run, const RunTimes& times) noexcept {
  FinishedTrace trace;
  trace.activity = std::move(run.activity);
  if (!run.tracing) return trace;
  try {
    const auto tracks = run_trace_tracks(run, device_, workers_->size());
    if (trace.activity) {
      const double host_origin_us = std::chrono::duration<double, std::micro>(
                                        run.started_at - trace.activity.session().opened())
                                        .count();
      trace.spans =
          activity_spans(run, tracks, times.tasks, host_origin_us, times.device_origin_us);
    }
    if (!trace_path_.empty()) {
      trace.file = RunTraceFile{trace_path_for_run(trace_path_, run.number), tracks,
                                run_trace_events(run, times.tasks)};
    }
  } catch (const std::exception& e) {
    // The run's outcome does not depend on its trace: it is still published.
    logger().error("run {}: its trace was not recorded: {}", run.number, e.what());
  } catch (...) {
    logger().error("run {}: its trace was not recorded: a non-standard exception", run.number);
  }
  return trace;
}

}  // namespace loom::detail
