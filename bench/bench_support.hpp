#pragma once
// What every benchmark program shares: skipping without a GPU, host timing
// of repeated calls and of spans, medians.

#include <loom/device.hpp>
#include <loom/runtime.hpp>

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

/// Marks the benchmark skipped where `rt` runs on the CPU backend although
/// there is a GPU (LOOM_DEVICE=cpu): the anchors launch on the device.
inline bool skip_without_cuda_backend(benchmark::State& state, const loom::Runtime& rt) {
  if (!rt.has_gpu()) {
    state.SkipWithError("the runtime runs on the CPU backend (LOOM_DEVICE?): nothing to compare");
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

/// Microseconds from t0 to now.
inline double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

/// Calls f() for at least `duration` and at least `calls` times: clocks,
/// lazy module loading and pools settle before anything is timed.
template <class F>
void warm_up(F&& f, std::chrono::milliseconds duration = std::chrono::milliseconds(100),
             int calls = 3) {
  const auto until = Clock::now() + duration;
  for (int i = 0; i < calls || Clock::now() < until; ++i) f();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// loom's time and the anchor's, sample by sample, over `per` units (nodes,
/// node-replays): reported as loom_us_per_node, anchor_us_per_node and
/// ratio (the median of the per-sample ratios, loom / anchor).
struct PairedTimes {
  explicit PairedTimes(double units) : per(units) {}
  double per;
  std::vector<double> loom_us, anchor_us, ratios;

  void add(double loom, double anchor) {
    loom_us.push_back(loom / per);
    anchor_us.push_back(anchor / per);
    ratios.push_back(loom / anchor);
  }
  void report(benchmark::State& state) const {
    state.counters["loom_us_per_node"] = median(loom_us);
    state.counters["anchor_us_per_node"] = median(anchor_us);
    state.counters["ratio"] = median(ratios);
  }
};

}  // namespace loom::bench
