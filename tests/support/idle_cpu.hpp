#pragma once
// How much CPU time a process takes while the caller sleeps: the check behind
// the README's "an idle runtime takes next to no CPU time".

#include <chrono>
#include <ctime>
#include <thread>

namespace loom::test {

/// The process's CPU time (all threads) over `window` while this thread
/// sleeps, after first sleeping `settle` (past the runtime's spins), as a
/// share of one core: 0 when every thread sleeps, 1 or more when one spins.
inline double idle_cpu_share(std::chrono::milliseconds settle = std::chrono::milliseconds(50),
                             std::chrono::milliseconds window = std::chrono::milliseconds(300)) {
  const auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  std::this_thread::sleep_for(settle);
  const double cpu_before = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(window);
  const double cpu = cpu_seconds() - cpu_before;
  return cpu / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace loom::test
