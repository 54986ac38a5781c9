#include "sched/run_profile.hpp"

#include <chrono>

namespace loom::detail {

namespace {
std::atomic<RunProfile*> profile{nullptr};
}  // namespace

double RunProfile::us(RunMilestone from, RunMilestone to) const noexcept {
  const auto at = [&](RunMilestone m) {
    return ns[static_cast<std::size_t>(m)].load(std::memory_order_relaxed);
  };
  return static_cast<double>(at(to) - at(from)) * 1e-3;
}

void set_run_profile(RunProfile* p) noexcept { profile.store(p, std::memory_order_release); }

void mark(RunMilestone m) noexcept {
  RunProfile* p = profile.load(std::memory_order_acquire);
  if (p == nullptr) return;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  p->ns[static_cast<std::size_t>(m)].store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), std::memory_order_relaxed);
}

}  // namespace loom::detail
