#include <loom/error.hpp>
#include <loom/future.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/log.hpp"
#include "core/task_context.hpp"
#include "core/thread_role.hpp"
#include "sched/lifecycle.hpp"
#include "sched/run_state.hpp"
#include "sched/worker_pool.hpp"

namespace loom {

std::string_view to_string(TaskStatus status) noexcept {
  switch (status) {
    case TaskStatus::pending: return "pending";
    case TaskStatus::running: return "running";
    case TaskStatus::completed: return "completed";
    case TaskStatus::failed: return "failed";
    case TaskStatus::cancelled: return "cancelled";
  }
  return "unknown";
}

namespace detail {

namespace {
thread_local RunState* t_current_run = nullptr;
}  // namespace

RunState* current_run() noexcept { return t_current_run; }

CurrentRunScope::CurrentRunScope(RunState* run) noexcept : previous_(t_current_run) {
  t_current_run = run;
}

CurrentRunScope::~CurrentRunScope() { t_current_run = previous_; }

bool waits_for(const std::shared_ptr<RunState>& run, const RunState* waiter) {
  std::vector<std::shared_ptr<RunState>> stack{run};
  std::vector<const RunState*> seen;
  while (!stack.empty()) {
    const auto r = std::move(stack.back());
    stack.pop_back();
    if (std::find(seen.begin(), seen.end(), r.get()) != seen.end()) continue;
    seen.push_back(r.get());
    std::lock_guard lock(r->mutex);
    if (r->done) continue;  // over: it holds no one back
    for (const auto& f : r->follows) {
      auto earlier = f.lock();
      if (!earlier) continue;
      if (earlier.get() == waiter) return true;
      stack.push_back(std::move(earlier));
    }
  }
  return false;
}

bool run_handed_end(RunState& s) noexcept {
  // A plain load first: the spin calls this each turn, and a failed exchange
  // would take the line from the scheduling thread that reads it.
  if (s.end_handoff.load(std::memory_order_acquire) != RunState::kEndHanded) return false;
  int handed = RunState::kEndHanded;
  if (!s.end_handoff.compare_exchange_strong(handed, RunState::kEndTaken,
                                             std::memory_order_acq_rel)) {
    return false;
  }
  s.end_run(s.end_machine, s.end_of);
  return true;
}

}  // namespace detail

const detail::RunState& Future::state() const {
  if (!state_) throw InvalidArgument("this Future belongs to no run (default-constructed)");
  return *state_;
}

bool Future::ready() const {
  const auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.done;
}

namespace {

// How long a waiter on a thread of its own spins (yielding) before it
// sleeps: a run's end is then seen without a wake-up's latency, as
// cudaStreamSynchronize's spin sees a stream's. On a run with device work,
// as long as the scheduling thread's spin over it (on the H200 a sleeping
// waiter's wake-up added tens of µs to a compiled replay of ~1 ms); on a
// host-only run briefly, since the workers need the cores it would take.
constexpr auto kDeviceWaitSpin = std::chrono::milliseconds(2);
constexpr auto kHostWaitSpin = std::chrono::microseconds(50);

// The first waiter to spin offers to take the run's end (RunState's
// end_handoff); if the scheduling thread hands it over, the waiter runs it
// here, with no worker's wake-up in between.
void spin_briefly_for(detail::RunState& s) {
  if (detail::current_thread_role() != nullptr) return;  // loom's threads wait their own way
  const auto until =
      std::chrono::steady_clock::now() +
      (s.waits_on_device ? std::chrono::microseconds(kDeviceWaitSpin) : kHostWaitSpin);
  int none = detail::RunState::kNoEndWaiter;
  const bool offered = s.end_handoff.compare_exchange_strong(
      none, detail::RunState::kEndWaiterSpins, std::memory_order_acq_rel);
  while (!s.published.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
    if (offered && detail::run_handed_end(s)) return;
    std::this_thread::yield();
  }
  if (!offered) return;
  // Withdraw the offer; if the end was handed over meanwhile, it is ours.
  int spinning = detail::RunState::kEndWaiterSpins;
  if (!s.end_handoff.compare_exchange_strong(spinning, detail::RunState::kNoEndWaiter,
                                             std::memory_order_acq_rel)) {
    detail::run_handed_end(s);
  }
}

}  // namespace

void Future::wait() const {
  const auto& s = state();
  // The hand-off's fields are atomics or written before it: a waiter may
  // take part through a const Future.
  spin_briefly_for(const_cast<detail::RunState&>(s));
  auto& cv = const_cast<std::condition_variable&>(s.done_cv);
  const auto done = [&] { return s.done; };
  std::unique_lock lock(s.mutex);
  const detail::RunState* waiter = detail::current_run();
  if (waiter == nullptr || waiter == &s) {
    // On a host worker (a host task or a continuation waiting for another
    // run), another worker takes this one's place, so the pool never starves.
    detail::wait_helping(lock, cv, done, "Future::wait()");
  } else {
    // Inside a host task: a run ordered after the task's own run (it touches
    // that run's data) can never start while the task waits. Admission is
    // asynchronous, so look again now and then.
    while (!detail::wait_helping_for(lock, cv, done, std::chrono::milliseconds(20),
                                     "Future::wait()")) {
      lock.unlock();
      if (detail::waits_for(state_, waiter)) {
        throw InvalidArgument(
            "Future::wait(): the run waited for is ordered after the run of this very task "
            "(it touches data that run reads or writes), so it cannot start before this task "
            "ends: the wait would never end; give the nested run data of its own",
            detail::in_current_task());
      }
      lock.lock();
    }
  }
  // The waiter's own copy: the stored error's last reference may be
  // dropped on any thread (see copy_of_error).
  if (s.error) std::rethrow_exception(detail::copy_of_error(s.error));
}

bool Future::wait_for(std::chrono::nanoseconds timeout) const {
  const auto& s = state();
  std::unique_lock lock(s.mutex);
  try {
    return detail::wait_helping_for(
        lock, const_cast<std::condition_variable&>(s.done_cv), [&] { return s.done; }, timeout,
        "Future::wait_for()");
  } catch (const Error& e) {
    detail::logger().error("{}", e.what());
    return s.done;
  }
}

std::exception_ptr Future::error() const {
  const auto& s = state();
  std::lock_guard lock(s.mutex);
  return detail::copy_of_error(s.error);
}

void Future::then(std::function<void(const Future&)> fn) const {
  if (!fn) throw InvalidArgument("Future::then: an empty function");
  auto& s = const_cast<detail::RunState&>(state());
  {
    std::lock_guard lock(s.mutex);
    if (!s.done) {
      s.continuations.push_back(std::move(fn));
      return;
    }
  }
  // Already over: run it on a worker while the runtime accepts work (its
  // shutdown waits for it), else here. Either way what it throws is logged.
  auto job = [fn = std::move(fn), self = *this] { fn(self); };
  if (auto lifecycle = s.lifecycle.lock()) {
    lifecycle->post_continuation(std::move(job));
  } else {
    detail::Lifecycle::run_logged(job);
  }
}

void Future::cancel() const {
  auto& s = const_cast<detail::RunState&>(state());
  std::lock_guard lock(s.mutex);
  if (s.done) return;
  s.cancel_requested = true;
  // Under the lock: the run cannot end (and its executor go away) meanwhile.
  if (s.wake_scheduler) s.wake_scheduler();
}

std::vector<TaskReport> Future::report() const {
  const auto& s = state();
  std::lock_guard lock(s.mutex);
  const std::size_t n = s.names != nullptr ? s.names->size() : 0;
  std::vector<TaskReport> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].name = (*s.names)[i];
    if (i < s.reports.size()) {
      out[i].status = s.reports[i].status;
      out[i].error = s.reports[i].error;
    }
  }
  return out;
}

}  // namespace loom
