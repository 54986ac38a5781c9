#pragma once
// Host worker threads with a ready queue ordered by priority (then FIFO).
// Workers run host tasks and continuations; they never wait on a stream.
//
// Thread-safety: post() from any thread; one mutex around the queue.

#include <loom/priority.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::detail {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// Queues `job`; `job` receives the index of the worker that runs it.
  void post(Priority priority, std::function<void(int worker)> job);
  int size() const noexcept { return static_cast<int>(threads_.size()); }
  /// Runs what is queued (and what that posts), then joins the threads. Idempotent.
  void shutdown();
  /// Runs one queued job on the calling thread if there is one (a worker
  /// that waits for loom's work helps instead of blocking); false if none.
  bool run_one(int worker);

 private:
  void run(int index);
  std::function<void(int)> take_locked();
  static void run_job(std::function<void(int)>& job, int worker) noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> queued_{0};  // jobs posted and not yet taken: idle workers spin on it briefly
  std::array<std::deque<std::function<void(int)>>, kPriorityLevels> queues_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::mutex join_mutex_;
};

}  // namespace loom::detail
