#pragma once
// What every benchmark program shares: skipping without a GPU, host timing
// of repeated calls, medians.

#include <loom/device.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace loom::bench {

using Clock = std::chrono::steady_clock;

/// Marks the benchmark skipped, with the reason, where CUDA is unavailable.
inline bool skip_without_gpu(benchmark::State& state) {
  if (!loom::cuda_availability().available) {
    state.SkipWithError(("no GPU: " + loom::cuda_availability().reason).c_str());
    return true;
  }
  return false;
}

/// Mean host time of one call of `f` over `calls` calls, in nanoseconds.
template <class F>
double ns_per_call(F&& f, int calls) {
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace loom::bench
