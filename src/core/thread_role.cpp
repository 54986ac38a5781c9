#include "core/thread_role.hpp"

#include "core/task_context.hpp"

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
    // Named where it is thrown: the scheduling thread runs an op's run_cuda
    // and a kernel task's launcher inside the task's TaskScope.
    throw InvalidArgument(std::string(what) + ": " + why, in_current_task());
  }
}

namespace {

// Waits with `lock` held; on a loom worker the pool is told around the wait
// (outside the caller's lock: the pool takes its own), so that it puts
// another thread in this one's place.
template <class Wait>
bool wait_as_role(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done,
                  const char* what, Wait&& wait) {
  ThreadRole* role = t_role;
  if (done()) return true;
  if (role == nullptr) return wait();
  check_may_wait(what);
  lock.unlock();
  role->begin_blocking();
  lock.lock();
  const bool ok = wait();
  lock.unlock();
  role->end_blocking();
  lock.lock();
  return ok;
}

}  // namespace

bool wait_helping_for(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                      const std::function<bool()>& done, std::chrono::nanoseconds timeout,
                      const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  return wait_as_role(lock, done, what, [&] { return cv.wait_until(lock, deadline, done); });
}

void wait_helping(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  const std::function<bool()>& done, const char* what) {
  wait_as_role(lock, done, what, [&] {
    cv.wait(lock, done);
    return true;
  });
}

void block_helping(const std::function<void()>& block, const char* what) {
  ThreadRole* role = t_role;
  if (role == nullptr) {
    block();
    return;
  }
  check_may_wait(what);
  role->begin_blocking();
  try {
    block();
  } catch (...) {
    role->end_blocking();
    throw;
  }
  role->end_blocking();
}

}  // namespace loom::detail
