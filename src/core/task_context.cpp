#include "core/task_context.hpp"

#include <string>

namespace loom::detail {
namespace {
thread_local std::string_view t_current_task;
}  // namespace

std::string_view current_task() noexcept { return t_current_task; }

ErrorContext in_current_task() { return {"", "", 0, std::string(t_current_task)}; }

std::exception_ptr naming_task(const std::exception_ptr& error, std::string_view task,
                               std::string_view thrower) {
  const auto named = [&](std::string message) {
    return std::make_exception_ptr(Error(std::move(message), {"", "", 0, std::string(task)}));
  };
  const std::string who(thrower);
  if (!error) return named(who.empty() ? "an unknown failure" : who + " failed");
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.task() == task ? error : e.with_task(task);
  } catch (const std::exception& e) {
    return named(who.empty() ? std::string(e.what()) : who + " threw: " + e.what());
  } catch (...) {
    return named(who.empty() ? "an unknown exception" : who + " threw a non-standard exception");
  }
}

std::exception_ptr copy_of_error(const std::exception_ptr& error) noexcept {
  if (!error) return nullptr;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    try {
      return e.with_task(e.task());
    } catch (...) {
      return error;  // out of memory: the shared error still says what failed
    }
  } catch (...) {
    return error;
  }
}

TaskScope::TaskScope(std::string_view name) noexcept : previous_(t_current_task) {
  t_current_task = name;
}

TaskScope::~TaskScope() { t_current_task = previous_; }

}  // namespace loom::detail
