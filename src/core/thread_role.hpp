#pragma once
// What a thread of loom's own may do while it waits for loom's work. A host
// worker that waits (Future::wait inside a host task or a continuation) runs
// other ready host jobs meanwhile, so that waiting never starves the pool
// (Taskflow's corun); the scheduling thread must never wait at all, and
// says so at once instead of deadlocking.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace loom::detail {

class ThreadRole {
 public:
  virtual ~ThreadRole() = default;
  /// Runs one ready job if there is one; false when there was none.
  virtual bool help() = 0;
  /// Null when this thread may wait; else why waiting here would deadlock.
  virtual const char* cannot_wait() const noexcept = 0;
};

/// The role of the calling thread; null for threads that are not loom's.
ThreadRole* current_thread_role() noexcept;

/// Gives the calling thread `role` for the scope's lifetime.
class ThreadRoleScope {
 public:
  explicit ThreadRoleScope(ThreadRole* role) noexcept;
  ~ThreadRoleScope();
  ThreadRoleScope(const ThreadRoleScope&) = delete;
  ThreadRoleScope& operator=(const ThreadRoleScope&) = delete;

 private:
  ThreadRole* previous_;
};

/// Waits on `cv` (with `lock` held on entry and exit) until `done()`. On a
/// loom worker it runs other ready jobs meanwhile. @throws InvalidArgument
/// on a thread that must not wait, naming `what`.
void wait_helping(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  const std::function<bool()>& done, const char* what);

/// As wait_helping, for at most `timeout`; true if done() became true.
bool wait_helping_for(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                      const std::function<bool()>& done, std::chrono::nanoseconds timeout,
                      const char* what);

/// @throws InvalidArgument when the calling thread must not wait (naming `what`).
void check_may_wait(const char* what);

}  // namespace loom::detail
