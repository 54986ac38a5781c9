// The real-time image pipeline (samples/image_pipeline): 4K RGB frames
// through loom::Pipeline (pinned slots, upload, gray -> blur -> histogram as
// compiled stages, download, frames overlapping) against the same work done
// the naive way in the same run (pageable memory, synchronous copies, one
// frame at a time). Reports frames/s of each, the ratio, latency
// percentiles and the GPU busy fraction of the pipeline (activity log).
#include "naive.hpp"
#include "pipelined.hpp"
#include "synthetic_video.hpp"

#include <loom/activity.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <vector>

namespace {

using loom::bench::skip_without_gpu;

constexpr int kWidth = 3840, kHeight = 2160, kRadius = 3;
constexpr std::uint64_t kFrames = 200;

// Arg: slots. One iteration is kFrames measured frames of each version.
void BM_ImagePipeline(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  loom::Runtime rt;
  const auto slots = static_cast<std::size_t>(state.range(0));
  loom_sample::SyntheticVideo video(kWidth, kHeight);
  double loom_fps = 0, naive_fps = 0, busy = 0, p50 = 0, p99 = 0;
  for (auto _ : state) {
    const loom_sample::NaiveRun naive = loom_sample::run_naive(rt, video, kFrames, kRadius, 0);
    const loom_sample::PipelinedRun piped =
        loom_sample::run_pipelined(rt, video, {kFrames, kRadius, slots}, 0);
    naive_fps = static_cast<double>(kFrames) / naive.seconds;
    loom_fps = static_cast<double>(kFrames) / piped.seconds;
    busy = loom::device_busy_fraction(piped.activity, 0, piped.activity.duration_us);
    p50 = loom_sample::percentile(piped.latencies_us, 0.5);
    p99 = loom_sample::percentile(piped.latencies_us, 0.99);
    state.SetIterationTime(piped.seconds);
  }
  state.counters["loom_fps"] = loom_fps;
  state.counters["anchor_naive_fps"] = naive_fps;
  state.counters["ratio"] = loom_fps / naive_fps;
  state.counters["gpu_busy"] = busy;
  state.counters["p50_us"] = p50;
  state.counters["p99_us"] = p99;
  state.SetLabel(
      "4K RGB frames: loom pipeline vs naive (sync, pageable, one stream); ratio = "
      "loom / naive frames/s");
}
BENCHMARK(BM_ImagePipeline)
    ->Arg(2)
    ->Arg(3)
    ->Arg(4)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
