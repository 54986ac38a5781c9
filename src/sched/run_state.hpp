#pragma once
// The shared state of one run: what a Future sees. Written by the executor
// (scheduler thread and workers), read by any thread through the Future. It
// keeps the task names for report() and nothing else of the graph: a Future
// that outlives its run holds no tensor.

#include <loom/future.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace loom::detail {

class Lifecycle;

/// How many runs over the same data a new run and a new state have room
/// for before they grow (lists of leaders and followers).
inline constexpr std::size_t kRoomForLeaders = 4;

struct RunState {
  mutable std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  // Set (release) once `done` is: a waiter on a thread of its own spins on
  // it briefly before sleeping on done_cv (a hint; `done` decides).
  std::atomic<bool> published{false};
  // Whether the run has device work (set at submit, before any Future of
  // it exists): a waiter spins longer on such a run (future.cpp).
  bool waits_on_device = false;
  std::exception_ptr error;                               // the first failure
  std::vector<TaskReport> reports;                        // report() adds the names
  std::shared_ptr<const std::vector<std::string>> names;  // shared by every run of a graph
  std::atomic<bool> cancel_requested{false};
  std::vector<std::function<void(const Future&)>> continuations;
  std::weak_ptr<Lifecycle> lifecycle;  // where continuations run (counted), while the runtime lives
  std::function<void()> wake_scheduler;  // after cancel(); cleared when the run is over
  // The runs it waits for (ordering across runs), set at admission: a task
  // waiting for this run from inside one of them would wait forever.
  std::vector<std::weak_ptr<RunState>> follows;
  // The ends of later runs over its data (their Run, opaque here, linked
  // through Run::next_parked: parking allocates nothing and cannot throw),
  // parked until this run is published: then they go back to the workers.
  void* parked_ends = nullptr;
  // The run's end, handed to the one waiter spinning on it (future.cpp),
  // which then runs it on its own thread: the device's end reaches wait()'s
  // return with one thread hand-off fewer (no worker in between).
  std::atomic<int> end_handoff{kNoEndWaiter};
  // Written before end_handoff turns kEndHanded, read after: how to end it.
  void (*end_run)(void* machine, void* run) noexcept = nullptr;
  void* end_machine = nullptr;
  void* end_of = nullptr;

  static constexpr int kNoEndWaiter = 0;     // the run's end goes to a worker
  static constexpr int kEndWaiterSpins = 1;  // a waiter spins and would take it
  static constexpr int kEndHanded = 2;       // the waiter is to run the end
  static constexpr int kEndTaken = 3;        // the waiter ran it (or is running it)
};

/// The end handed to `s`'s spinning waiter, if any, run here once: true if
/// this call ran it. The waiter's side of RunMachine::hand_end_to_waiter.
bool run_handed_end(RunState& s) noexcept;

/// A RunState as new (one per run), recycled: the state, its control block
/// and the capacity of its vectors come back to a process-wide pool when
/// the last reference (a Future, a continuation) goes, so that a steady
/// state of runs allocates none. Any thread; the pool outlives every
/// runtime (a Future may outlive its runtime). @throws std::bad_alloc.
std::shared_ptr<RunState> make_run_state();

/// The run whose host task the calling thread is running; null elsewhere.
RunState* current_run() noexcept;

/// Makes `run` the calling thread's current run for the scope's lifetime.
class CurrentRunScope {
 public:
  explicit CurrentRunScope(RunState* run) noexcept;
  ~CurrentRunScope();
  CurrentRunScope(const CurrentRunScope&) = delete;
  CurrentRunScope& operator=(const CurrentRunScope&) = delete;

 private:
  RunState* previous_;
};

/// True when `run` waits, directly or through other unfinished runs, for
/// `waiter` (which is not over): waiting for `run` inside `waiter` never ends.
bool waits_for(const std::shared_ptr<RunState>& run, const RunState* waiter);

/// loom's way to make a Future of a run.
struct FutureAccess {
  static Future make(std::shared_ptr<RunState> state) { return Future(std::move(state)); }
};

}  // namespace loom::detail
