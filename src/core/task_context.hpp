#pragma once
// The name of the task running on this thread, so that every checked call
// can say which task it failed in without threading the name through every
// function. Set by the executor (and by tests) with a TaskScope.

#include <string_view>

namespace loom::detail {

/// Name of the task running on the calling thread; empty outside a task.
std::string_view current_task() noexcept;

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
