#include <loom/completion.hpp>
#include <loom/error.hpp>

#include "core/completion_state.hpp"
#include "core/task_context.hpp"
#include "core/thread_role.hpp"

#include <thread>

namespace loom {

Completion::Completion() : state_(std::make_shared<detail::CompletionState>()) {
  state_->done = true;
}

bool Completion::ready() const {
  auto& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    if (s.done) return true;
  }
  if (s.poll) {
    try {
      if (s.poll()) s.finish();
    } catch (...) {
      s.finish(std::current_exception());
    }
    std::lock_guard lock(s.mutex);
    return s.done;
  }
  return false;
}

void Completion::wait() const {
  auto& s = *state_;
  detail::check_may_wait("Completion::wait()");
  if (s.block) {
    // A worker that blocks here is replaced meanwhile, as in wait_helping.
    detail::block_helping(
        [&] {
          try {
            s.block();
            s.finish();
          } catch (...) {
            s.finish(std::current_exception());
          }
        },
        "Completion::wait()");
  }
  std::unique_lock lock(s.mutex);
  detail::wait_helping(
      lock, s.done_cv, [&] { return s.done; }, "Completion::wait()");
  // The waiter's own copy: the stored error's last reference may be
  // dropped on any thread (see copy_of_error).
  if (s.error) std::rethrow_exception(detail::copy_of_error(s.error));
}

bool Completion::wait_for(std::chrono::nanoseconds timeout) const {
  auto& s = *state_;
  if (s.poll) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool done = false;
    const auto poll_until_deadline = [&] {
      while (!(done = ready()) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    };
    try {
      // A worker polling here is replaced meanwhile, as in wait().
      detail::block_helping(poll_until_deadline, "Completion::wait_for()");
    } catch (const Error&) {
      poll_until_deadline();  // a thread that may not block: it only polls
    }
    return done;
  }
  std::unique_lock lock(s.mutex);
  return detail::wait_helping_for(
      lock, s.done_cv, [&] { return s.done; }, timeout, "Completion::wait_for()");
}

std::exception_ptr Completion::error() const {
  std::lock_guard lock(state_->mutex);
  return detail::copy_of_error(state_->error);
}

}  // namespace loom
