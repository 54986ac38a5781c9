#pragma once
// The image pipeline proper: frames drawn into pinned slots, uploaded,
// gray -> blur -> histogram as three compiled stages, the histogram
// downloaded; a producer thread (the caller) and a consumer thread.

#include "naive.hpp"
#include "synthetic_video.hpp"

#include <loom/activity.hpp>
#include <loom/runtime.hpp>

#include <cstdint>
#include <vector>

namespace loom_sample {

struct PipelinedOptions {
  std::uint64_t frames = 300;
  int radius = 3;
  std::size_t slots = 3;
};

struct PipelinedRun {
  double seconds = 0;                 ///< from the first measured push to the last frame popped
  std::vector<double> latencies_us;   ///< push to download done, per measured frame
  std::vector<Histogram> histograms;  ///< of the first measured frames
  loom::ActivityLog activity;         ///< of the measured frames
  std::uint64_t bad_totals = 0;       ///< histograms whose counts do not add up to the pixels
};

/// The q-quantile (0 <= q <= 1, nearest rank) of non-empty `values`.
double percentile(std::vector<double> values, double q);

/// Runs 2 * slots warm-up frames, then `frames` measured ones (video frames
/// 0, 1, ..., as the naive run draws them); keeps the first `keep` histograms.
PipelinedRun run_pipelined(loom::Runtime& rt, SyntheticVideo& video, const PipelinedOptions& o,
                           std::size_t keep);

}  // namespace loom_sample
