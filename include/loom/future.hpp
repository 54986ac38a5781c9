#pragma once
/// @file future.hpp
/// The completion of one run of a graph: wait for it, poll it, continue
/// from it, cancel it, and read what happened to each task.
///
/// Thread-safety: every member may be called from any thread, concurrently.

#include <loom/export.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom {

namespace detail {
struct RunState;
struct FutureAccess;
}  // namespace detail

enum class TaskStatus { pending, running, completed, failed, cancelled };

LOOM_API std::string_view to_string(TaskStatus status) noexcept;

/// What happened to one task of a finished run.
struct TaskReport {
  std::string name;
  TaskStatus status = TaskStatus::pending;
  std::string error;  ///< the failure or the reason for cancellation; empty when completed
};

class LOOM_API Future {
 public:
  Future() = default;

  bool valid() const noexcept { return state_ != nullptr; }
  /// True once every task has completed, failed or been cancelled and the
  /// run has been wound up on a worker; never before the earlier runs it is
  /// ordered after by its data (README: ordering across runs, which also
  /// says when two runs are not ordered) are ready. Never blocks.
  bool ready() const;
  /// Blocks until the run is over; rethrows the first failure (a loom::Error
  /// naming its task), or loom::Cancelled when the run was cancelled. Called
  /// on a host worker (inside a host task or a continuation), another worker
  /// thread takes the waiting one's place, so waiting never starves the
  /// pool. @throws InvalidArgument on loom's scheduling thread (inside an
  /// op's run_cuda), and inside a host task whose own run this run is
  /// ordered after (it touches that run's data): waiting could never end.
  void wait() const;
  /// Waits at most `timeout`; true if the run is over. Does not throw.
  bool wait_for(std::chrono::nanoseconds timeout) const;
  /// The first failure, or null. Meaningful once ready().
  std::exception_ptr error() const;
  /// Runs `fn` on a host worker once the run is over (at once if it is).
  /// `fn` receives this future; exceptions it throws are logged.
  void then(std::function<void(const Future&)> fn) const;
  /// Asks the run to stop: tasks not yet started are cancelled; started
  /// ones finish. wait() then throws loom::Cancelled (or the first failure)
  /// when at least one task was stopped; a cancel that stopped nothing
  /// (every task had started, or the run was over) leaves its result as is.
  void cancel() const;
  /// Per-task outcome, in the graph's task order.
  std::vector<TaskReport> report() const;

 private:
  friend struct detail::FutureAccess;  // loom's way in
  explicit Future(std::shared_ptr<detail::RunState> state) : state_(std::move(state)) {}
  const detail::RunState& state() const;
  std::shared_ptr<detail::RunState> state_;
};

}  // namespace loom
