#pragma once
// What a thread of loom's own may do while it waits for loom's work. A host
// worker that waits (Future::wait inside a host task or a continuation)
// blocks, and its pool starts another thread in its place meanwhile, so that
// waiting never starves the pool. (Running other jobs on the waiting thread,
// as Taskflow's corun does, can deadlock: a job run there may wait for the
// run of the task beneath it on the same stack.) The scheduling thread must
// never wait at all, and says so at once instead of deadlocking.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace loom::detail {

class ThreadRole {
 public:
  virtual ~ThreadRole() = default;
  /// The thread is about to block in a wait (its pool may compensate).
  virtual void begin_blocking() = 0;
  /// The wait is over.
  virtual void end_blocking() noexcept = 0;
  /// Null when this thread may wait; else why waiting here would deadlock.
  virtual const char* cannot_wait() const noexcept = 0;
  /// What the thread belongs to (its worker pool, its scheduler), so that a
  /// runtime can tell its own threads from others'; null when nothing.
  virtual const void* owner() const noexcept { return nullptr; }
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
/// loom worker, another worker takes this one's place meanwhile.
/// @throws InvalidArgument on a thread that must not wait, naming `what`.
void wait_helping(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  const std::function<bool()>& done, const char* what);

/// As wait_helping, for at most `timeout`; true if done() became true.
bool wait_helping_for(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                      const std::function<bool()>& done, std::chrono::nanoseconds timeout,
                      const char* what);

/// Runs `block`, a call that blocks without a condition variable (an event's
/// synchronize); on a loom worker another worker takes this one's place
/// meanwhile. @throws InvalidArgument on a thread that must not wait,
/// naming `what`; what `block` throws.
void block_helping(const std::function<void()>& block, const char* what);

/// @throws InvalidArgument when the calling thread must not wait (naming `what`).
void check_may_wait(const char* what);

}  // namespace loom::detail
