#pragma once
// A launcher puts a run's ready tasks to work and reports back how they
// ended; the run state machine (RunMachine) decides what is ready, and knows
// no backend. Each placement has its launcher: host tasks go to host workers
// (CpuLauncher); device tasks and staged copies to streams (CudaLauncher,
// eager: each task enqueued as it comes).
//
// The contract, in the order the scheduling thread calls it:
//  - attach(run), at submit on the submitting thread: the launcher's per-run
//    state (Run::device), and nothing shared.
//  - admit(run, earlier, ...), once the run is ordered after the unfinished
//    runs `earlier` over the same data. A launcher that orders_runs() (stream
//    order does) lets a run of its tasks only start once those runs have
//    enqueued everything, not once they finished: it must then make the
//    run's work wait for theirs itself.
//  - start(run), when its gates open; ready(run, t), once a task, when every
//    predecessor is satisfied (the hot path: the one indirect call a task
//    costs); advance(run) and collect(), every scheduler round: launch what
//    may go and report outcomes through the machine.
//  - Outcomes: machine.enqueued(t) when a device task is in order on the
//    device (its device successors become ready at once: the launcher orders
//    device -> device edges itself, as the plan says: same stream, or an event
//    wait); machine.running(t) for work handed off; then machine.complete(t)
//    or machine.fail(t, error) once its end is observed. A launcher keeps
//    a run alive (idle() false) while anything it launched may still run.
//
// A CUDA-graph launcher (a group of device tasks captured once into a CUDA
// graph, then replayed) is another implementation of this interface for
// device placements, written without touching the state machine: attach()
// finds or instantiates the executable graph for run.prepared (cached per
// prepared graph); ready() counts a group's tasks whose predecessors are
// satisfied; advance() launches a group once all of its tasks are ready
// (cudaGraphLaunch on one of its streams, after the event waits of edges
// entering the group), reports each task enqueued(), records an event and
// polls it, and reports complete() or fail() for the group's tasks. Staged
// copies and device tasks outside any group it hands to an eager CudaLauncher
// it holds (the same calls, forwarded).
//
// Every call but attach(), trace_tracks() and mark_trace_clock() is made on the scheduling
// thread, which must never block: no synchronizing call, no waiting for a worker.

#include "sched/run.hpp"
#include "trace/chrome_trace.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace loom::detail {

class RunMachine;
using RunList = std::vector<std::unique_ptr<Run>>;

class Launcher {
 public:
  virtual ~Launcher() = default;

  /// At submit, on the submitting thread: the run's per-run state.
  virtual void attach(Run& run) { (void)run; }
  /// True when this launcher orders a run of its tasks after earlier runs
  /// itself, so that such a run may start once they have enqueued all their
  /// work (rather than once they have finished).
  virtual bool orders_runs() const noexcept { return false; }
  /// `run` was entered after the unfinished runs `earlier` (over the same
  /// data); `follows`: it starts once they settled, so this launcher orders it
  /// after them. `runs`: every run admitted and not yet finished.
  virtual void admit(Run& run, const std::vector<Run*>& earlier, bool follows,
                     const RunList& runs) {
    (void)run, (void)earlier, (void)follows, (void)runs;
  }
  /// The run starts (its gates opened), before any of its tasks is ready.
  /// @throws what its setup threw: the run's pending tasks fail with it.
  virtual void start(Run& run) { (void)run; }
  /// Task `t`, placed on this launcher and pending, has every predecessor satisfied.
  virtual void ready(RunMachine& machine, Run& run, std::uint32_t t) = 0;
  /// A scheduler round for `run`: launches what may go, reports what ended. True on progress.
  virtual bool advance(RunMachine& machine, Run& run) = 0;
  /// A scheduler round, once for every run: reports outcomes that came back
  /// from other threads. True on progress.
  virtual bool collect(RunMachine& machine) {
    (void)machine;
    return false;
  }
  /// Nothing the run handed this launcher may still run or is unobserved.
  virtual bool idle(const Run& run) const = 0;
  /// The run's work runs elsewhere and its end is watched by polling: the
  /// loop spins longer, then arms wake-ups before it sleeps.
  virtual bool watching(const Run& run) const {
    (void)run;
    return false;
  }
  /// Before the loop sleeps: makes the end of watched work wake it. False
  /// when some of it cannot (the loop then naps briefly and polls).
  virtual bool arm_wakeups(const RunList& runs) {
    (void)runs;
    return true;
  }
  /// The trace tracks this launcher's tasks appear on. Any thread (a worker
  /// names a finished run's tracks): reads the run and fixed configuration only.
  virtual void trace_tracks(const Run& run, std::vector<TraceTrack>& tracks) const {
    (void)run, (void)tracks;
  }
  /// Fills the track and times of completed task `t` (a device task; host
  /// tasks and staged copies are timed on the host, in TaskState); false
  /// when it has none.
  virtual bool trace_span(const Run& run, std::uint32_t t, TraceEvent& event) const {
    (void)run, (void)t, (void)event;
    return false;
  }
  /// Ties this launcher's trace clock (trace_span's) to the host's, for an
  /// activity log opened at `opened`: a mark whose host time is known. Null
  /// when this launcher times nothing on a clock of its own. Called on the
  /// thread that opens the log, which it may keep waiting for the device.
  virtual std::shared_ptr<const DeviceClockMark> mark_trace_clock(Clock::time_point opened) {
    (void)opened;
    return nullptr;
  }
  /// Where the times trace_span gives for `run` start, in µs on the clock of
  /// the log that `mark` was made for; none when unknown.
  virtual std::optional<double> trace_origin_us(const Run& run, const DeviceClockMark& mark) const {
    (void)run, (void)mark;
    return std::nullopt;
  }
};

}  // namespace loom::detail
