#pragma once
// Where a run+wait's wall time goes, step by step, for the benchmarks: the
// run-path profile (sched/run_profile.hpp) read over repeated runs.

#include "sched/run_profile.hpp"

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace loom::bench {

// Where a run+wait's wall time goes (run_profile.hpp): the median of each
// step over `times` runs of run_wait(), as counters path_<step>_us. The
// device work lies inside launched_to_observed. `between` runs, untimed,
// before each profiled run: an anchor's replay, to profile loom's runs as a
// loop alternating the two sees them (threads asleep, caches cold).
template <class F, class G>
void profile_run_path(benchmark::State& state, int times, F&& run_wait, G&& between,
                      const char* prefix = "path_") {
  using M = loom::detail::RunMilestone;
  loom::detail::RunProfile profile;
  loom::detail::set_run_profile(&profile);
  const std::pair<const char*, std::pair<M, M>> steps[] = {
      {"submit_to_admitted_us", {M::submitted, M::admitted}},
      {"admitted_to_entered_us", {M::admitted, M::entered}},
      {"entered_to_launched_us", {M::entered, M::launched}},
      {"launched_to_observed_us", {M::launched, M::observed}},
      {"observed_to_ending_us", {M::observed, M::ending}},
      {"ending_to_published_us", {M::ending, M::published}},
  };
  std::vector<std::vector<double>> took(std::size(steps));
  std::vector<double> returned, to_submit;
  for (int i = 0; i < times; ++i) {
    between();
    const auto t0 = Clock::now();
    run_wait();
    const double all = us_since(t0);
    const auto submitted_ns =
        profile.ns[static_cast<std::size_t>(M::submitted)].load(std::memory_order_relaxed);
    const auto published_ns =
        profile.ns[static_cast<std::size_t>(M::published)].load(std::memory_order_relaxed);
    const auto t0_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
    for (std::size_t s = 0; s < std::size(steps); ++s) {
      took[s].push_back(profile.us(steps[s].second.first, steps[s].second.second));
    }
    // The waiter's side: from the call to submit, and from the publication to wait()'s return.
    returned.push_back(all - static_cast<double>(published_ns - t0_ns) * 1e-3);
    to_submit.push_back(static_cast<double>(submitted_ns - t0_ns) * 1e-3);
  }
  loom::detail::set_run_profile(nullptr);
  const std::string p(prefix);
  for (std::size_t s = 0; s < std::size(steps); ++s) {
    state.counters[p + steps[s].first] = median(took[s]);
  }
  state.counters[p + "call_to_submitted_us"] = median(to_submit);
  state.counters[p + "published_to_returned_us"] = median(returned);
}

template <class F>
void profile_run_path(benchmark::State& state, int times, F&& run_wait) {
  profile_run_path(state, times, std::forward<F>(run_wait), [] {});
}

}  // namespace loom::bench
