#include <loom/error.hpp>
#include <loom/future.hpp>

#include "core/log.hpp"
#include "core/thread_role.hpp"
#include "sched/lifecycle.hpp"
#include "sched/run_state.hpp"
#include "sched/worker_pool.hpp"

namespace loom {

std::string_view to_string(TaskStatus status) noexcept {
  switch (status) {
    case TaskStatus::pending: return "pending";
    case TaskStatus::running: return "running";
    case TaskStatus::completed: return "completed";
    case TaskStatus::failed: return "failed";
    case TaskStatus::cancelled: return "cancelled";
  }
  return "unknown";
}

const detail::RunState& Future::state() const {
  if (!state_) throw InvalidArgument("this Future belongs to no run (default-constructed)");
  return *state_;
}

bool Future::ready() const {
  const auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.done;
}

void Future::wait() const {
  const auto& s = state();
  std::unique_lock lock(s.mutex);
  // On a host worker (a host task or a continuation waiting for another
  // run), other ready host jobs run meanwhile, so the pool never starves.
  detail::wait_helping(
      lock, const_cast<std::condition_variable&>(s.done_cv), [&] { return s.done; },
      "Future::wait()");
  if (s.error) std::rethrow_exception(s.error);
}

bool Future::wait_for(std::chrono::nanoseconds timeout) const {
  const auto& s = state();
  std::unique_lock lock(s.mutex);
  try {
    return detail::wait_helping_for(
        lock, const_cast<std::condition_variable&>(s.done_cv), [&] { return s.done; }, timeout,
        "Future::wait_for()");
  } catch (const Error& e) {
    detail::logger().error("{}", e.what());
    return s.done;
  }
}

std::exception_ptr Future::error() const {
  const auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.error;
}

void Future::then(std::function<void(const Future&)> fn) const {
  if (!fn) throw InvalidArgument("Future::then: an empty function");
  auto& s = const_cast<detail::RunState&>(state());
  {
    std::lock_guard lock(s.mutex);
    if (!s.done) {
      s.continuations.push_back(std::move(fn));
      return;
    }
  }
  // Already over: run it on a worker while the runtime accepts work (its
  // shutdown waits for it), else here. Either way what it throws is logged.
  auto job = [fn = std::move(fn), self = *this] { fn(self); };
  if (auto lifecycle = s.lifecycle.lock()) {
    lifecycle->post_continuation(std::move(job));
    return;
  }
  try {
    job();
  } catch (const std::exception& e) {
    detail::logger().error("a continuation threw: {}", e.what());
  } catch (...) {
    detail::logger().error("a continuation threw a non-standard exception");
  }
}

void Future::cancel() const {
  auto& s = const_cast<detail::RunState&>(state());
  std::lock_guard lock(s.mutex);
  if (s.done) return;
  s.cancel_requested = true;
  // Under the lock: the run cannot end (and its executor go away) meanwhile.
  if (s.wake_scheduler) s.wake_scheduler();
}

std::vector<TaskReport> Future::report() const {
  const auto& s = state();
  std::lock_guard lock(s.mutex);
  const std::size_t n = s.names != nullptr ? s.names->size() : 0;
  std::vector<TaskReport> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].name = (*s.names)[i];
    if (i < s.reports.size()) {
      out[i].status = s.reports[i].status;
      out[i].error = s.reports[i].error;
    }
  }
  return out;
}

}  // namespace loom
