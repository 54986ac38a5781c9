#include "core/thread_role.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {
namespace {
thread_local ThreadRole* t_role = nullptr;
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
  if (role == nullptr || done()) return cv.wait_until(lock, deadline, done);
  check_may_wait(what);
  // Not under the caller's lock: the pool takes its own.
  lock.unlock();
  role->begin_blocking();
  lock.lock();
  const bool ok = cv.wait_until(lock, deadline, done);
  lock.unlock();
  role->end_blocking();
  lock.lock();
  return ok;
}

void wait_helping(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  const std::function<bool()>& done, const char* what) {
  ThreadRole* role = t_role;
  if (done()) return;
  if (role == nullptr) {
    cv.wait(lock, done);
    return;
  }
  check_may_wait(what);
  lock.unlock();
  role->begin_blocking();
  lock.lock();
  cv.wait(lock, done);
  lock.unlock();
  role->end_blocking();
  lock.lock();
}

}  // namespace loom::detail
