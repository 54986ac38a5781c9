#pragma once
// The name of the task running on this thread, so that every checked call
// can say which task it failed in without threading the name through every
// function. Set by the executor (and by tests) with a TaskScope.

#include <loom/error.hpp>

#include <exception>
#include <string_view>

namespace loom::detail {

/// Name of the task running on the calling thread; empty outside a task.
std::string_view current_task() noexcept;

/// An ErrorContext that names the current task (none outside a task): for
/// errors raised on a thread where a task runs.
ErrorContext in_current_task();

/// `error` as the failure of task `task`, as a run reports it: a loom::Error
/// that names `task`. The very same exception when it names `task` already;
/// else a new one of its type (Error::with_task), for the error thrown is
/// never changed: it may be stored in a Future and rethrown elsewhere. Any
/// other exception becomes a loom::Error whose message is its what(), after
/// "<thrower> threw: " when `thrower` says who threw it.
/// @throws std::bad_alloc only.
std::exception_ptr naming_task(const std::exception_ptr& error, std::string_view task,
                               std::string_view thrower = {});

/// A copy of `error` that no other thread holds: what a waiter rethrows or
/// returns. A stored error may be read by many threads and its last
/// reference dropped by any of them; exception_ptr's count is invisible to
/// thread checkers, so a waiter that kept the very object would "race" with
/// the worker that frees it. A loom::Error is copied with its dynamic type
/// (Error::with_task); any other exception, or any error when memory runs
/// out, is returned as it is.
std::exception_ptr copy_of_error(const std::exception_ptr& error) noexcept;

/// Makes `name` the current task of this thread for the scope's lifetime.
/// Scopes nest; the name must outlive the scope.
class TaskScope {
 public:
  explicit TaskScope(std::string_view name) noexcept;
  ~TaskScope();
  TaskScope(const TaskScope&) = delete;
  TaskScope& operator=(const TaskScope&) = delete;

 private:
  std::string_view previous_;
};

}  // namespace loom::detail
