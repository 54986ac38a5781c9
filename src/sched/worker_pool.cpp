#include "sched/worker_pool.hpp"

#include "core/log.hpp"
#include "core/thread_role.hpp"

#include <chrono>

namespace loom::detail {

namespace {
constexpr std::chrono::microseconds kSpin{100};

class WorkerRole final : public ThreadRole {
 public:
  explicit WorkerRole(WorkerPool& pool) : pool_(pool) {}
  void begin_blocking() override { pool_.begin_blocking(); }
  void end_blocking() noexcept override { pool_.end_blocking(); }
  const char* cannot_wait() const noexcept override { return nullptr; }
  const void* owner() const noexcept override { return &pool_; }

 private:
  WorkerPool& pool_;
};
}  // namespace

WorkerPool::WorkerPool(int threads) : target_(threads) {
  std::lock_guard lock(mutex_);
  for (int i = 0; i < threads; ++i) start_thread_locked();
}

void WorkerPool::start_thread_locked() {
  const int index = static_cast<int>(threads_.size());
  threads_.emplace_back([this, index] { run(index); });
  size_.store(static_cast<int>(threads_.size()), std::memory_order_relaxed);
}

void WorkerPool::begin_blocking() {
  std::lock_guard lock(mutex_);
  ++blocked_;
  if (static_cast<int>(threads_.size()) - blocked_ < target_) start_thread_locked();
}

void WorkerPool::end_blocking() {
  std::lock_guard lock(mutex_);
  --blocked_;
}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::shutdown() {
  std::lock_guard join_lock(join_mutex_);
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  // A job still draining may block and start a thread in its place: join
  // until the list stops growing.
  for (std::size_t i = 0;; ++i) {
    std::thread t;
    {
      std::lock_guard lock(mutex_);
      if (i >= threads_.size()) break;
      t = std::move(threads_[i]);
    }
    if (t.joinable()) t.join();
  }
}

void WorkerPool::post(Priority priority, std::function<void(int)> job) {
  {
    std::lock_guard lock(mutex_);
    queues_[static_cast<std::size_t>(priority_index(priority))].push_back(std::move(job));
    queued_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_one();
}

std::function<void(int)> WorkerPool::take_locked() {
  // Highest priority first.
  for (int p = kPriorityLevels - 1; p >= 0; --p) {
    auto& q = queues_[static_cast<std::size_t>(p)];
    if (!q.empty()) {
      auto job = q.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
      return job;
    }
  }
  return {};
}

void WorkerPool::run_job(std::function<void(int)>& job, int worker) noexcept {
  try {
    job(worker);
  } catch (const std::exception& e) {
    logger().error("a host job escaped with an exception: {}", e.what());
  } catch (...) {
    logger().error("a host job escaped with a non-standard exception");
  }
}

void WorkerPool::keep_one_warm(std::chrono::steady_clock::time_point until) {
  // The deadline only moves later, and in steps of 100 µs, rounded up: every
  // device launch calls this, and spinning workers read the line it shares,
  // so it is written at most once a step; rounded up, it never ends before
  // what was asked (a spin that stopped short would send wake after wake).
  constexpr auto kStep = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::microseconds(100))
                             .count();
  const auto asked = until.time_since_epoch().count();
  const auto ticks = (asked + kStep - 1) / kStep * kStep;
  if (ticks > warm_until_.load(std::memory_order_relaxed)) {
    warm_until_.store(ticks, std::memory_order_relaxed);
  }
  if (warm_worker_.load(std::memory_order_acquire)) return;
  if (warm_wake_sent_.exchange(true, std::memory_order_acq_rel)) return;
  // Under the mutex: a worker that tested warm_wanted() before the deadline
  // moved is then asleep (or about to re-test), not between test and sleep.
  { std::lock_guard lock(mutex_); }
  wake_.notify_one();
}

bool WorkerPool::warm_wanted() const noexcept {
  return !warm_worker_.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now().time_since_epoch().count() <
             warm_until_.load(std::memory_order_relaxed);
}

// One worker at a time spins until the deadline (which may move) or a job.
void WorkerPool::spin_warm() noexcept {
  if (warm_worker_.exchange(true, std::memory_order_acq_rel)) return;
  while (queued_.load(std::memory_order_acquire) == 0 && !stop_.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now().time_since_epoch().count() <
             warm_until_.load(std::memory_order_relaxed)) {
    std::this_thread::yield();
  }
  warm_worker_.store(false, std::memory_order_release);
}

void WorkerPool::run(int index) {
  WorkerRole role(*this);
  const ThreadRoleScope scope(&role);
  for (;;) {
    std::function<void(int)> job;
    // A worker that just finished spins a little before sleeping: a host task
    // released right after is picked up without a wake-up's latency.
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    while (queued_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    }
    bool stop = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        if (stop_) return true;
        for (const auto& q : queues_) {
          if (!q.empty()) return true;
        }
        if (warm_wanted()) return true;
        // Going to sleep: a wake sent for keep_one_warm that found nothing
        // to do (another worker took it up, or the deadline passed while
        // every worker was busy) must not keep the next one from being sent.
        warm_wake_sent_.store(false, std::memory_order_release);
        return false;
      });
      // Whatever woke it, the next keep_one_warm may wake one again.
      warm_wake_sent_.store(false, std::memory_order_release);
      // Drain the queues before stopping.
      job = take_locked();
      stop = stop_;
    }
    if (!job) {
      if (stop) return;  // stop requested and nothing queued
      spin_warm();       // woken to stay warm (keep_one_warm)
      continue;
    }
    run_job(job, index);
  }
}

}  // namespace loom::detail
