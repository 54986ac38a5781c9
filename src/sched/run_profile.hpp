#pragma once
// Where a run's wall time goes, milestone by milestone, for the benchmarks
// (bench_compiled's BM_CompiledGraphContent): while a profile is set, the
// threads a run passes through (the submitter, the scheduling thread, the
// worker that publishes it) stamp each milestone with the steady clock, the
// latest run's stamp replacing the one before. Unset (the default), a
// milestone costs one relaxed atomic load.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace loom::detail {

enum class RunMilestone : std::uint8_t {
  submitted,  ///< Executor::submit entered (the submitting thread)
  admitted,   ///< the scheduling thread took the run in
  entered,    ///< ordered after earlier runs over its data
  launched,   ///< a task launched (on a stream) or posted (to a host worker); the last stays
  observed,   ///< the scheduling thread saw the run's work over
  ending,     ///< a worker began the run's end
  published,  ///< the run's Future turned ready
  count
};

struct RunProfile {
  std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(RunMilestone::count)> ns{};
  /// Microseconds from one milestone to a later one of the latest run.
  double us(RunMilestone from, RunMilestone to) const noexcept;
};

/// Sets (or, with null, clears) the process's run profile. Not owned.
void set_run_profile(RunProfile* profile) noexcept;

/// Stamps `m` of the current run into the profile, if one is set.
void mark(RunMilestone m) noexcept;

}  // namespace loom::detail
