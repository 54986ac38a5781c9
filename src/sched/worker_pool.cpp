#include "sched/worker_pool.hpp"

#include "core/log.hpp"
#include "core/thread_role.hpp"

#include <chrono>

namespace loom::detail {

namespace {
constexpr std::chrono::microseconds kSpin{100};

class WorkerRole final : public ThreadRole {
 public:
  WorkerRole(WorkerPool& pool, int index) : pool_(pool), index_(index) {}
  bool help() override { return pool_.run_one(index_); }
  const char* cannot_wait() const noexcept override { return nullptr; }

 private:
  WorkerPool& pool_;
  int index_;
};
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

std::function<void(int)> WorkerPool::take_locked() {
  // Highest priority first.
  for (int p = kPriorityLevels - 1; p >= 0; --p) {
    auto& q = queues_[static_cast<std::size_t>(p)];
    if (!q.empty()) {
      auto job = std::move(q.front());
      q.pop_front();
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

bool WorkerPool::run_one(int worker) {
  std::function<void(int)> job;
  {
    std::lock_guard lock(mutex_);
    job = take_locked();
  }
  if (!job) return false;
  run_job(job, worker);
  return true;
}

void WorkerPool::run(int index) {
  WorkerRole role(*this, index);
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
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        if (stop_) return true;
        for (const auto& q : queues_) {
          if (!q.empty()) return true;
        }
        return false;
      });
      // Drain the queues before stopping.
      job = take_locked();
      if (!job) return;  // stop requested and nothing queued
    }
    run_job(job, index);
  }
}

}  // namespace loom::detail
