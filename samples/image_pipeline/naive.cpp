#include "naive.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <string>

namespace loom_sample {

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// What a hand-written program does: cudaMemcpy from pageable memory, which
// returns once the copy is done. Without a GPU, "device" memory is host memory.
void copy_sync(void* dst, const void* src, std::size_t bytes, bool gpu, cudaMemcpyKind kind) {
  if (!gpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const cudaError_t rc = cudaMemcpy(dst, src, bytes, kind);
  if (rc != cudaSuccess)
    throw loom::Error(std::string("naive copy failed: ") + cudaGetErrorString(rc),
                      {.call = "cudaMemcpy", .file = __FILE__, .line = __LINE__, .task = "naive"});
}

}  // namespace

NaiveRun run_naive(loom::Runtime& rt, SyntheticVideo& video, std::uint64_t frames, int radius,
                   std::size_t keep) {
  const bool gpu = rt.has_gpu();
  const std::int64_t h = video.height(), w = video.width();
  std::vector<std::uint8_t> frame(video.frame_bytes());
  Histogram counts{};
  auto rgb = rt.tensor<std::uint8_t>({h, w, 3});
  auto gray = rt.tensor<std::uint8_t>({h, w});
  auto blurred = rt.tensor<std::uint8_t>({h, w});
  auto hist = rt.tensor<std::int32_t>({256});
  loom::Graph g;
  g.add(loom::ops::rgb_to_gray(rgb, gray));
  g.add(loom::ops::box_blur(gray, blurred, radius));
  g.add(loom::ops::histogram(blurred, hist));

  NaiveRun out;
  auto one_frame = [&](std::uint64_t f) {
    video.draw(frame.data(), f);
    const Clock::time_point t0 = Clock::now();
    copy_sync(rgb.data(), frame.data(), frame.size(), gpu, cudaMemcpyHostToDevice);
    const Clock::time_point t1 = Clock::now();
    rt.submit(g).wait();
    const Clock::time_point t2 = Clock::now();
    copy_sync(counts.data(), hist.data(), sizeof counts, gpu, cudaMemcpyDeviceToHost);
    const Clock::time_point t3 = Clock::now();
    out.copy_us += micros(t1 - t0) + micros(t3 - t2);
    return micros(t3 - t0);
  };
  video.forget_buffers();
  one_frame(0);  // warm-up: pools, streams, the graph's plan
  out.copy_us = 0;
  out.latencies_us.reserve(frames);
  const Clock::time_point start = Clock::now();
  for (std::uint64_t f = 0; f < frames; ++f) {
    out.latencies_us.push_back(one_frame(f));
    if (f < keep) out.histograms.push_back(counts);
  }
  out.seconds = micros(Clock::now() - start) * 1e-6;
  return out;
}

}  // namespace loom_sample
