#pragma once
// Host worker threads with a ready queue ordered by priority (then FIFO).
// Workers run host tasks and continuations; they never wait on a stream.
// A worker that blocks waiting for loom's work (Future::wait inside a host
// task) is compensated: while it waits, another thread takes its place, so
// the pool never runs fewer workers than it was made with (and a waiting
// task can never starve the work it waits for). Threads made that way stay
// for later waits; they are joined at shutdown.
//
// Thread-safety: post() and the blocking calls from any thread; one mutex
// around the queue and the thread list.

#include <loom/priority.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
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
  /// Threads, compensating ones included.
  int size() const noexcept { return size_.load(std::memory_order_relaxed); }
  /// Runs what is queued (and what that posts), then joins the threads. Idempotent.
  void shutdown();
  /// A worker is about to block: start a thread in its place if the pool
  /// would otherwise run fewer than it was made with.
  void begin_blocking();
  /// The worker that blocked runs again.
  void end_blocking();
  /// Keeps one idle worker spinning until `until` (or the latest deadline
  /// asked so far, rounded up to 100 µs) instead of sleeping, waking one if
  /// none is awake, so that a job posted before then (a device run's end,
  /// published on a worker) starts without a wake-up's latency. The
  /// scheduling thread calls it at each device launch and while it spins on
  /// device work; a few atomic loads once a worker is warm or woken (the
  /// mutex, briefly, to send a wake).
  void keep_one_warm(std::chrono::steady_clock::time_point until);
  /// Whether a worker spins for keep_one_warm now (for tests).
  bool has_warm_worker() const noexcept { return warm_worker_.load(std::memory_order_acquire); }

 private:
  void run(int index);
  void start_thread_locked();
  std::function<void(int)> take_locked();
  static void run_job(std::function<void(int)>& job, int worker) noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> queued_{0};  // jobs posted and not yet taken: idle workers spin on it briefly
  // keep_one_warm's deadline (steady_clock ticks), whether a worker spins
  // for it, and whether one was woken for it and has not yet taken it up.
  std::atomic<std::chrono::steady_clock::rep> warm_until_{0};
  std::atomic<bool> warm_worker_{false};
  std::atomic<bool> warm_wake_sent_{false};
  bool warm_wanted() const noexcept;
  void spin_warm() noexcept;
  // A FIFO of jobs over a ring that only grows: once it has held as many
  // jobs as it ever holds at once, posting allocates nothing (a job small
  // enough for std::function's own storage, such as a run's end, allocates
  // nothing at all).
  class JobQueue {
   public:
    bool empty() const noexcept { return size_ == 0; }
    void push_back(std::function<void(int)> job) {
      if (size_ == slots_.size()) grow();
      slots_[(head_ + size_) % slots_.size()] = std::move(job);
      ++size_;
    }
    std::function<void(int)> pop_front() noexcept {
      auto job = std::move(slots_[head_]);
      slots_[head_] = nullptr;
      head_ = (head_ + 1) % slots_.size();
      --size_;
      return job;
    }

   private:
    void grow() {
      std::vector<std::function<void(int)>> bigger(std::max<std::size_t>(16, 2 * slots_.size()));
      for (std::size_t i = 0; i < size_; ++i) {
        bigger[i] = std::move(slots_[(head_ + i) % slots_.size()]);
      }
      slots_ = std::move(bigger);
      head_ = 0;
    }
    std::vector<std::function<void(int)>> slots_;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
  };
  std::array<JobQueue, kPriorityLevels> queues_;
  std::atomic<bool> stop_{false};     // written under mutex_; a warm worker reads it spinning
  int target_ = 0;                    // workers the pool was made with
  int blocked_ = 0;                   // workers blocked in a wait (under mutex_)
  std::vector<std::thread> threads_;  // under mutex_
  std::atomic<int> size_{0};
  std::mutex join_mutex_;
};

}  // namespace loom::detail
