// The image kernels on 4096 x 4096 frames: RGB to gray (each variant, each
// layout), box blur (each variant, radii 1, 3, 7 and 8, where the tiled
// variants run naive; automatic and sliding over r = 0 .. 127; the sliding
// kernel's segment length swept) and the histogram (each variant, on random,
// blurred and one-value frames), against a device-to-device copy that moves
// the same bytes, timed in the same run.
//
// Bytes moved: gray reads 3 and writes 1 byte a pixel (64 MB a frame), blur
// reads 1 and writes 1 (32 MB: the halo comes from L2), the histogram reads 1
// (16 MB; its 1 KB of counts is noise). The floor is those bytes at the
// copy's bandwidth (bytes read plus bytes written a second).
//
// Counters: loom_us (a frame), floor_us (the same bytes at copy_GBps),
// loom_GBps, copy_GBps, ratio = loom_GBps / copy_GBps (targets: gray >= 0.8,
// blur >= 0.7 at r = 3, histogram shared >= 0.5 on random and blurred frames;
// global_atomics serializes on equal values, far below on one-value frames).
#include "image/blur.hpp"
#include "image/gray.hpp"
#include "image/histogram.hpp"

#include <benchmark/benchmark.h>

#include "bench_device.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using loom::bench::skip_without_gpu;

constexpr std::int64_t kSide = 4096;
constexpr std::size_t kPixels = static_cast<std::size_t>(kSide * kSide);
// Input and output sets rotate so that consecutive launches miss in L2 (60 MB).
constexpr std::size_t kRotateBytes = std::size_t{512} << 20;

using loom::bench::DeviceBytes;

// The median launch time in milliseconds (7 batches of 20 launches).
template <class Launch>
double time_ms(loom::detail::Stream& stream, Launch&& launch) {
  return loom::bench::time_launches_ms(stream, std::forward<Launch>(launch), 7, 20);
}

// Buffers of `in_bytes` and `out_bytes`, as many sets as keep the rotation
// larger than L2.
struct Rotation {
  Rotation(std::size_t in_bytes, std::size_t out_bytes)
      : sets(std::max<std::size_t>(2, kRotateBytes / (in_bytes + out_bytes))),
        in(sets * in_bytes),
        out(sets * out_bytes),
        in_stride(in_bytes),
        out_stride(out_bytes) {
    LOOM_CUDA_CHECK(cudaMemset(in.get(), 0x5B, sets * in_bytes));
  }
  const std::uint8_t* input(int i) const {
    return in.get() + (static_cast<std::size_t>(i) % sets) * in_stride;
  }
  std::uint8_t* output(int i) const {
    return out.get() + (static_cast<std::size_t>(i) % sets) * out_stride;
  }
  std::size_t sets;
  DeviceBytes in, out;
  std::size_t in_stride, out_stride;
};

void report(benchmark::State& state, double loom_ms, double copy_ms, std::size_t moved) {
  const double loom_gbs = static_cast<double>(moved) / (loom_ms * 1e-3) / 1e9;
  const double copy_gbs = static_cast<double>(moved) / (copy_ms * 1e-3) / 1e9;
  state.counters["loom_us"] = loom_ms * 1e3;
  state.counters["floor_us"] = copy_ms * 1e3;
  state.counters["loom_GBps"] = loom_gbs;
  state.counters["copy_GBps"] = copy_gbs;
  state.counters["ratio"] = loom_gbs / copy_gbs;
}

// The anchor: a copy of moved / 2 bytes reads and writes `moved` bytes.
double copy_ms(loom::detail::Stream& stream, std::size_t moved) {
  Rotation r(moved / 2, moved / 2);
  return time_ms(stream, [&](int i) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(r.output(i), r.input(i), moved / 2, cudaMemcpyDeviceToDevice,
                                    stream.view()));
  });
}

void BM_RgbToGray(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto variant = static_cast<loom::kernels::GrayVariant>(state.range(0));
  const auto layout = static_cast<loom::kernels::RgbLayout>(state.range(1));
  loom::detail::Stream stream(0, 0);
  Rotation r(3 * kPixels, kPixels);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int i) {
      loom::kernels::rgb_to_gray(r.input(i), r.output(i), kPixels, layout, stream.view(), variant);
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const std::size_t moved = 4 * kPixels;
  report(state, ms, copy_ms(stream, moved), moved);
  state.SetLabel(std::string(to_string(variant)) + " " + std::string(to_string(layout)) +
                 " 4096x4096");
}
BENCHMARK(BM_RgbToGray)
    ->ArgNames({"variant", "layout"})
    ->ArgsProduct({{static_cast<int>(loom::kernels::GrayVariant::naive),
                    static_cast<int>(loom::kernels::GrayVariant::vectorized)},
                   {static_cast<int>(loom::kernels::RgbLayout::interleaved),
                    static_cast<int>(loom::kernels::RgbLayout::planar)}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

void BM_BoxBlur(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto variant = static_cast<loom::kernels::BlurVariant>(state.range(0));
  const int radius = static_cast<int>(state.range(1));
  loom::detail::Stream stream(0, 0);
  Rotation r(kPixels, kPixels);
  DeviceBytes workspace(loom::kernels::box_blur_workspace_bytes(1, kSide, kSide, radius, variant));
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int i) {
      loom::kernels::box_blur(r.input(i), r.output(i), 1, kSide, kSide, radius, stream.view(),
                              variant, workspace.p);
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const std::size_t moved = 2 * kPixels;
  report(state, ms, copy_ms(stream, moved), moved);
  const bool falls_back = (variant == loom::kernels::BlurVariant::tiled ||
                           variant == loom::kernels::BlurVariant::tiled_v1) &&
                          (radius < 1 || radius > loom::kernels::kBlurTiledMaxRadius);
  state.SetLabel(std::string(to_string(variant)) + (falls_back ? " (runs naive)" : "") +
                 " r=" + std::to_string(radius) + " 4096x4096");
}
BENCHMARK(BM_BoxBlur)
    ->ArgNames({"variant", "radius"})
    ->ArgsProduct({{static_cast<int>(loom::kernels::BlurVariant::naive),
                    static_cast<int>(loom::kernels::BlurVariant::tiled),
                    static_cast<int>(loom::kernels::BlurVariant::tiled_v1),
                    static_cast<int>(loom::kernels::BlurVariant::separable)},
                   {1, 3, 7, 8}})
    // The radius sweep against the floor: automatic (tiled for 1..7, the
    // streaming kernel to 15, sliding for the others) and the sliding kernel
    // itself at every radius, whose cost should hardly move with r (targets:
    // ratio >= 0.7 at r = 3, >= 0.6 for every r <= 64; the naive kernel's
    // grows as r squared: 963 us at r = 8).
    ->ArgsProduct({{static_cast<int>(loom::kernels::BlurVariant::automatic),
                    static_cast<int>(loom::kernels::BlurVariant::sliding),
                    static_cast<int>(loom::kernels::BlurVariant::banded)},
                   {0, 1, 3, 7, 8, 12, 15, 16, 32, 64, 127}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

// The sliding (kernel 0), banded (kernel 1) or streaming (kernel 2, what
// tiled runs for radius 1..7) kernel with segments of
// `segment_rows` rows (0: the kernel's own choice, named in the label): a
// segment first reads 2r rows to fill its window, so long segments read
// less, but leave fewer warps to cover DRAM's latency. For choosing
// box_blur_sliding_segment_rows()'s and box_blur_banded_segment_rows()'s rules.
void BM_BoxBlurSegments(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const int kernel = static_cast<int>(state.range(0));
  const bool banded = kernel == 1;
  const int radius = static_cast<int>(state.range(1));
  const int segment_rows = static_cast<int>(state.range(2));
  loom::detail::Stream stream(0, 0);
  Rotation r(kPixels, kPixels);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int i) {
      if (kernel == 2) {
        loom::kernels::box_blur_stream(r.input(i), r.output(i), 1, kSide, kSide, radius,
                                       stream.view(), segment_rows);
      } else if (banded) {
        loom::kernels::box_blur_banded(r.input(i), r.output(i), 1, kSide, kSide, radius,
                                       stream.view(), segment_rows);
      } else {
        loom::kernels::box_blur_sliding(r.input(i), r.output(i), 1, kSide, kSide, radius,
                                        stream.view(), segment_rows);
      }
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const std::size_t moved = 2 * kPixels;
  report(state, ms, copy_ms(stream, moved), moved);
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int chosen =
      kernel == 2 ? loom::kernels::box_blur_stream_segment_rows(1, kSide, kSide, radius)
      : banded    ? loom::kernels::box_blur_banded_segment_rows(1, kSide, kSide, radius, sms)
                  : loom::kernels::box_blur_sliding_segment_rows(1, kSide, kSide, radius, sms);
  const int rows = segment_rows > 0 ? segment_rows : chosen;
  const char* name = kernel == 2 ? "stream (tiled)" : banded ? "banded" : "sliding";
  state.SetLabel(std::string(name) + " r=" + std::to_string(radius) + " segment_rows=" +
                 std::to_string(rows) + (segment_rows > 0 ? "" : " (chosen)") + " 4096x4096");
}
BENCHMARK(BM_BoxBlurSegments)
    ->ArgNames({"kernel", "radius", "segment_rows"})
    ->ArgsProduct({{0}, {3, 8, 32, 64, 127}, {0, 16, 32, 64, 128, 256}})
    ->ArgsProduct({{1}, {3, 8, 32, 64, 127}, {0, 16, 32, 64, 128, 256}})
    ->ArgsProduct({{2}, {1, 2, 3, 4, 5, 6, 7, 8, 11, 15}, {0, 8, 12, 16, 20, 24, 28, 32}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

enum class Frame : int { random, blurred, one_value };

std::string_view to_string(Frame frame) {
  switch (frame) {
    case Frame::random: return "random";
    case Frame::blurred: return "blurred r=3";
    case Frame::one_value: return "one value";
  }
  return "unknown";
}

// Every input set of `r` holds the same frame: uniform random bytes; those
// blurred with radius 3 (a few dozen values, in short runs); or the one value
// Rotation's memset left.
void fill_frames(Rotation& r, Frame frame, loom::detail::Stream& stream) {
  if (frame == Frame::one_value) return;
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> words(kPixels / sizeof(std::uint64_t));
  for (auto& w : words) w = rng();
  DeviceBytes random(kPixels);
  LOOM_CUDA_CHECK(cudaMemcpy(random.get(), words.data(), kPixels, cudaMemcpyHostToDevice));
  DeviceBytes blurred(frame == Frame::blurred ? kPixels : 0);
  const std::uint8_t* source = random.get();
  if (frame == Frame::blurred) {
    loom::kernels::box_blur(random.get(), blurred.get(), 1, kSide, kSide, 3, stream.view());
    stream.synchronize();
    source = blurred.get();
  }
  for (std::size_t set = 0; set < r.sets; ++set) {
    LOOM_CUDA_CHECK(
        cudaMemcpy(r.in.get() + set * r.in_stride, source, kPixels, cudaMemcpyDeviceToDevice));
  }
}

void BM_Histogram(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto variant = static_cast<loom::kernels::HistogramVariant>(state.range(0));
  const auto frame = static_cast<Frame>(state.range(1));
  loom::detail::Stream stream(0, 0);
  constexpr std::size_t kCountBytes = loom::kernels::kHistogramBins * sizeof(std::int32_t);
  Rotation r(kPixels, kCountBytes);
  fill_frames(r, frame, stream);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int i) {
      loom::kernels::histogram(r.input(i), kPixels, reinterpret_cast<std::int32_t*>(r.output(i)),
                               stream.view(), variant);
    });
    state.SetIterationTime(ms * 1e-3);
  }
  report(state, ms, copy_ms(stream, kPixels), kPixels);
  state.SetLabel(std::string(to_string(variant)) + " " + std::string(to_string(frame)) +
                 " 4096x4096");
}
BENCHMARK(BM_Histogram)
    ->ArgNames({"variant", "frame"})
    ->ArgsProduct({{static_cast<int>(loom::kernels::HistogramVariant::global_atomics),
                    static_cast<int>(loom::kernels::HistogramVariant::shared)},
                   {static_cast<int>(Frame::random), static_cast<int>(Frame::blurred),
                    static_cast<int>(Frame::one_value)}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
