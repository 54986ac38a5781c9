#include "sched/lifecycle.hpp"

#include "core/log.hpp"
#include "core/task_context.hpp"
#include "core/thread_role.hpp"
#include "sched/worker_pool.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {

void Lifecycle::throw_if_closed() const {
  if (!closed_) return;
  throw InvalidArgument(
      "the runtime is being destroyed: its runs in flight and their continuations have "
      "finished, and it accepts no more work (submit before destroying it, or keep it alive)",
      in_current_task());
}

void Lifecycle::run_made() {
  std::lock_guard lock(mutex_);
  throw_if_closed();
  ++live_runs_;
}

void Lifecycle::compile_begun() {
  std::lock_guard lock(mutex_);
  throw_if_closed();
  ++compiles_;
}

void Lifecycle::compile_done() {
  {
    std::lock_guard lock(mutex_);
    --compiles_;
  }
  cv_.notify_all();
}

void Lifecycle::run_published(std::vector<std::function<void()>> continuations) {
  {
    std::lock_guard lock(mutex_);
    --live_runs_;
    // Counted before the run stops being live: a drain never sees a gap.
    pending_ += static_cast<int>(continuations.size());
  }
  cv_.notify_all();
  for (auto& job : continuations) post_counted(std::move(job));
}

void Lifecycle::post_continuation(std::function<void()> job) {
  {
    std::unique_lock lock(mutex_);
    if (closed_) {
      lock.unlock();
      run_logged(job);  // the workers are gone, or going
      return;
    }
    ++pending_;
  }
  post_counted(std::move(job));
}

void Lifecycle::post_counted(std::function<void()> job) {
  workers_->post(Priority::normal, [self = shared_from_this(), job = std::move(job)](int) {
    run_logged(job);
    {
      std::lock_guard lock(self->mutex_);
      --self->pending_;
    }
    self->cv_.notify_all();
  });
}

void Lifecycle::run_logged(const std::function<void()>& job) noexcept {
  try {
    job();
  } catch (const std::exception& e) {
    logger().error("a continuation threw: {}", e.what());
  } catch (...) {
    logger().error("a continuation threw a non-standard exception");
  }
}

void Lifecycle::wait_no_runs() {
  std::unique_lock lock(mutex_);
  wait_helping(
      lock, cv_, [&] { return live_runs_ == 0; }, "Runtime::synchronize()");
}

void Lifecycle::drain_and_close() {
  std::unique_lock lock(mutex_);
  const auto drained = [&] { return live_runs_ == 0 && pending_ == 0 && compiles_ == 0; };
  try {
    // On a worker of another runtime (destroying this one inside its task),
    // that runtime's pool puts a thread in this one's place meanwhile.
    wait_helping(lock, cv_, drained, "destroying a runtime");
  } catch (const Error&) {
    // A thread that must not wait for its own runtime's work: this one's
    // work does not need it, so a plain wait cannot deadlock.
    cv_.wait(lock, drained);
  }
  closed_ = true;
}

}  // namespace loom::detail
