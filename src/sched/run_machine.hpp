#pragma once
// The run state machine: which tasks of a run are ready, what a task's end
// means for the rest (completion satisfies successors; a failure cancels its
// dependants, not independent work, and names its task; a cancel takes every
// pending task), when a run may start (after the unfinished runs over the
// same data: RunOrdering and the runs' gates), and its end (the outcome
// published once, on a worker, after the run's teardown).
//
// It knows no backend: tasks go to the launcher of their placement
// (launcher.hpp), which reports back through enqueued(), running(),
// complete(), fail() and skipped(). Unit-tested with fake launchers.
//
// Thread-safety: make_run(), wait_idle() and the activity log's calls from
// any thread; everything else on the scheduling thread only.

#include "sched/launcher.hpp"
#include "sched/lifecycle.hpp"
#include "sched/poison.hpp"
#include "sched/run.hpp"
#include "sched/run_ordering.hpp"
#include "sched/run_trace.hpp"
#include "sched/worker_pool.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace loom::detail {

/// How long device work keeps a worker warm after its last progress (and the
/// scheduling thread spinning over it, scheduler_loop.cpp).
inline constexpr std::chrono::milliseconds kDeviceSpin{2};

class RunMachine {
 public:
  /// `host` runs host tasks; `device` (null on the CPU backend) device tasks
  /// and staged copies. `workers` tear runs down and run continuations.
  /// `trace_path`: empty, or the base of each run's Chrome trace file.
  RunMachine(Launcher& host, Launcher* device, Poison& poison, std::shared_ptr<WorkerPool> workers,
             std::string trace_path);
  RunMachine(const RunMachine&) = delete;
  RunMachine& operator=(const RunMachine&) = delete;

  /// A new run of `prepared`, counted live until it is published. Any thread.
  std::unique_ptr<Run> make_run(std::shared_ptr<const PreparedGraph> prepared,
                                std::shared_ptr<CompletionState> completion);
  /// Blocks until every run made has been published. Any thread but loom's own.
  void wait_idle();
  /// The shutdown protocol's first step (lifecycle.hpp): waits for every run
  /// and continuation, including those they submit meanwhile, then refuses
  /// new runs. Any thread but loom's own.
  void drain_and_close() { lifecycle_->drain_and_close(); }
  /// The runtime's lifecycle (compiles count themselves in it).
  Lifecycle& lifecycle() noexcept { return *lifecycle_; }
  /// Opens an activity log: the runs made from now on time their tasks and
  /// hand their spans to it. Any thread. @throws InvalidArgument when one is open.
  void start_activity_log();
  /// Closes it; waits for the runs that joined it. Any thread but loom's own.
  /// @throws InvalidArgument when none is open.
  ActivityLog stop_activity_log() { return recorder_.stop(); }

  // The scheduling thread's round.
  /// Takes `run` in, ordered after the unfinished runs over the same data.
  void admit(std::unique_ptr<Run> run);
  /// Starts the runs whose gates opened.
  void start_ready_runs();
  bool runs_to_start() const noexcept { return !to_start_.empty(); }
  /// Handles a cancel request, then lets the run's launchers advance. True on progress.
  bool advance(Run& run);
  /// Ends every finished run (published on a worker). True if one ended.
  bool finish_runs();
  const RunList& runs() const noexcept { return runs_; }
  /// Keeps a worker awake until `until`: a device run's end, published on
  /// a worker, then starts without a wake-up (WorkerPool::keep_one_warm).
  void keep_a_worker_warm(std::chrono::steady_clock::time_point until);

  // What launchers report.
  /// Device task `t` is enqueued in order on the device: running, and its
  /// device successors are satisfied (the launcher orders those edges).
  void enqueued(Run& run, std::uint32_t t);
  /// Task `t` was handed off (to a worker, a staged copy): running.
  void running(Run& run, std::uint32_t t);
  void complete(Run& run, std::uint32_t t);
  /// Task `t` failed: the error gets its name, its dependants are cancelled.
  void fail(Run& run, std::uint32_t t, std::exception_ptr error);
  /// Task `t` was not run, the run being cancelled: its dependants are cancelled.
  void skipped(Run& run, std::uint32_t t);

 private:
  Launcher& launcher_for(Placement placement) noexcept {
    return placement == Placement::host ? host_ : *device_;
  }
  void start(Run& run);
  void make_ready(Run& run, std::uint32_t t);
  void satisfy(Run& run, std::uint32_t t);
  void settle(Run& run, std::uint32_t t);
  void release_followers(std::vector<Run*>& followers);
  void cancel_successors(Run& run, std::uint32_t t, const std::string& why);
  /// Cancels every pending task; how many there were.
  std::size_t cancel_pending(Run& run, const std::string& why);
  /// The user's cancel stopped a task: the run reports Cancelled (unless a
  /// task failed first).
  void note_user_cancel(Run& run);
  bool finished(const Run& run) const;
  void finish(std::unique_ptr<Run> run);
  /// On a worker, before the run is recycled: its trace file's contents and
  /// its spans on its activity log's clock.
  FinishedTrace finished_trace(Run& run, const RunTimes& times) noexcept;
  /// Parks `run`'s end with the first run it follows by its data that is not
  /// published yet (that run's end posts it again); false if there is none.
  bool park_behind_a_leader(Run* run);
  /// Gives the run's end to the waiter spinning on its Future, if one is:
  /// false if none is (then a worker ends it).
  bool hand_end_to_waiter(Run* run) noexcept;
  static void end_for_waiter(void* machine, void* run) noexcept;
  /// On a worker: the run's teardown (recycled into the spare runs), its
  /// trace, then its outcome published. `this` may be gone once it returns.
  void end_on_worker(Run* run);
  /// A run made fresh, with room reserved for the runs it follows and leads.
  static std::unique_ptr<Run> new_run();
  /// A spare run to make a new one from; null when there is none. Any thread.
  std::unique_ptr<Run> take_spare_run();
  /// Keeps a recycled run for a later make_run (or deletes it past the bound).
  void give_spare_run(Run* run) noexcept;

  Launcher& host_;
  Launcher* device_;
  Poison& poison_;
  std::shared_ptr<WorkerPool> workers_;
  std::string trace_path_;
  std::atomic<unsigned long long> run_counter_{0};
  ActivityRecorder recorder_;
  RunList runs_;                           // scheduling thread only
  std::vector<Run*> to_start_;             // scheduling thread only: gates just opened
  std::vector<Run*> starting_;             // scheduling thread only: scratch
  std::vector<RunOrdering::RunId> after_;  // scheduling thread only: scratch
  std::vector<Run*> earlier_;              // scheduling thread only: scratch
  RunOrdering ordering_;                   // scheduling thread only
  std::shared_ptr<Lifecycle> lifecycle_;   // live runs, pending continuations, shutdown
  // Finished runs, recycled (Run::recycle) so that making a run allocates
  // nothing in a steady state. Under spare_mutex_ (make_run from any
  // thread, teardown on workers); capacity reserved, never exceeded.
  std::mutex spare_mutex_;
  std::vector<std::unique_ptr<Run>> spare_runs_;
};

}  // namespace loom::detail
