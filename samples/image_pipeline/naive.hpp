#pragma once
// The image pipeline's work done the naive way, to compare against: one
// frame at a time, drawn into pageable memory, uploaded with a synchronous
// copy, gray -> blur -> histogram submitted and waited for (one stream), the
// histogram downloaded synchronously.

#include "synthetic_video.hpp"

#include <loom/runtime.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace loom_sample {

using Histogram = std::array<std::int32_t, 256>;

struct NaiveRun {
  double seconds = 0;                 ///< wall time of the measured frames
  std::vector<double> latencies_us;   ///< upload start to histogram on the host, per frame
  double copy_us = 0;                 ///< time inside the synchronous copies
  std::vector<Histogram> histograms;  ///< of the first frames, to check the pipeline against
};

/// Runs `frames` frames (after one warm-up frame) of `video` with blur radius `radius`;
/// keeps the histograms of the first `keep` frames.
NaiveRun run_naive(loom::Runtime& rt, SyntheticVideo& video, std::uint64_t frames, int radius,
                   std::size_t keep);

}  // namespace loom_sample
