#include "sched/worker_pool.hpp"

#include "core/log.hpp"

#include <chrono>

namespace loom::detail {

namespace {
constexpr std::chrono::microseconds kSpin{100};
}  // namespace

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::shutdown() {
  std::lock_guard join_lock(join_mutex_);
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) {
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

void WorkerPool::run(int index) {
  for (;;) {
    std::function<void(int)> job;
    // A worker that just finished spins a little before sleeping: a host task
    // released right after is picked up without a wake-up's latency.
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    while (queued_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    }
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        if (stop_) return true;
        for (const auto& q : queues_) {
          if (!q.empty()) return true;
        }
        return false;
      });
      // Highest priority first; drain the queues before stopping.
      for (int p = kPriorityLevels - 1; p >= 0 && !job; --p) {
        auto& q = queues_[static_cast<std::size_t>(p)];
        if (!q.empty()) {
          job = std::move(q.front());
          q.pop_front();
          queued_.fetch_sub(1, std::memory_order_relaxed);
        }
      }
      if (!job) return;  // stop requested and nothing queued
    }
    try {
      job(index);
    } catch (const std::exception& e) {
      logger().error("a host job escaped with an exception: {}", e.what());
    } catch (...) {
      logger().error("a host job escaped with a non-standard exception");
    }
  }
}

}  // namespace loom::detail
