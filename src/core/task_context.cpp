#include "core/task_context.hpp"

namespace loom::detail {
namespace {
thread_local std::string_view t_current_task;
}  // namespace

std::string_view current_task() noexcept { return t_current_task; }

TaskScope::TaskScope(std::string_view name) noexcept : previous_(t_current_task) {
  t_current_task = name;
}

TaskScope::~TaskScope() { t_current_task = previous_; }

}  // namespace loom::detail
