#include "core/thread_role.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {
namespace {
thread_local ThreadRole* t_role = nullptr;
// How long a helping waiter sleeps when there was nothing to help with: a
// job posted meanwhile or the awaited result wakes it no later than this.
constexpr auto kHelpNap = std::chrono::microseconds(200);
}  // namespace

ThreadRole* current_thread_role() noexcept { return t_role; }

ThreadRoleScope::ThreadRoleScope(ThreadRole* role) noexcept : previous_(t_role) { t_role = role; }

ThreadRoleScope::~ThreadRoleScope() { t_role = previous_; }

void check_may_wait(const char* what) {
  if (t_role == nullptr) return;
  if (const char* why = t_role->cannot_wait()) {
    throw InvalidArgument(std::string(what) + ": " + why);
  }
}

bool wait_helping_for(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                      const std::function<bool()>& done, std::chrono::nanoseconds timeout,
                      const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ThreadRole* role = t_role;
  if (role == nullptr) return cv.wait_until(lock, deadline, done);
  check_may_wait(what);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    lock.unlock();
    const bool helped = role->help();
    lock.lock();
    if (!helped && !done()) {
      cv.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + kHelpNap));
    }
  }
  return true;
}

void wait_helping(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  const std::function<bool()>& done, const char* what) {
  ThreadRole* role = t_role;
  if (role == nullptr) {
    cv.wait(lock, done);
    return;
  }
  check_may_wait(what);
  while (!done()) {
    lock.unlock();
    const bool helped = role->help();
    lock.lock();
    if (!helped && !done()) cv.wait_for(lock, kHelpNap);
  }
}

}  // namespace loom::detail
