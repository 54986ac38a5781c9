#pragma once
// A runtime's lifecycle as its runs see it: the runs made and not yet
// published, the continuations posted and not yet run, and whether new work
// is still accepted.
//
// The shutdown protocol (Runtime::~Runtime): drain_and_close() waits until
// no run is live and no continuation is pending. Work submitted meanwhile
// from inside tasks and continuations is part of the work in flight: it is
// accepted and drained too. Then the lifecycle closes: from then on a submit
// throws InvalidArgument, and a continuation added to a finished run runs on
// the thread that adds it. Only after that do the scheduling thread and the
// workers stop, so none of them can meet a runtime that is going away.
//
// Thread-safety: every member from any thread.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace loom::detail {

class WorkerPool;

class Lifecycle : public std::enable_shared_from_this<Lifecycle> {
 public:
  explicit Lifecycle(std::shared_ptr<WorkerPool> workers) : workers_(std::move(workers)) {}

  /// A run is made. @throws InvalidArgument once closed (the runtime is
  /// being destroyed), naming the task the call came from, if any.
  void run_made();
  /// A compile begins: it uses the runtime's streams, pools and arena, so it
  /// is work in flight, which the drain waits for, until compile_done().
  /// @throws InvalidArgument once closed, as run_made.
  void compile_begun();
  void compile_done();
  /// A run is published: it is no longer live, and its continuations run on
  /// the workers, counted until they return (exceptions they throw are logged).
  void run_published(std::vector<std::function<void()>> continuations);
  /// Runs `job` on a worker, counted until it returns; once closed, here.
  /// Exceptions it throws are logged, never propagated.
  void post_continuation(std::function<void()> job);
  /// Blocks until no run is live (Runtime::synchronize).
  void wait_no_runs();
  /// Blocks until no run or compile is live and no continuation pending,
  /// then closes. Idempotent.
  void drain_and_close();
  /// Runs a continuation here; what it throws is logged, never propagated.
  static void run_logged(const std::function<void()>& job) noexcept;

 private:
  void post_counted(std::function<void()> job);
  void throw_if_closed() const;  // under mutex_

  std::shared_ptr<WorkerPool> workers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int live_runs_ = 0;  // under mutex_
  int pending_ = 0;    // continuations posted, not yet returned; under mutex_
  int compiles_ = 0;   // compiles begun, not yet done; under mutex_
  bool closed_ = false;
};

}  // namespace loom::detail
