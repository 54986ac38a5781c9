// The sliding box blur's launch (the kernel is blur_sliding.cuh's): one
// instantiation for each r % 16 with 16-byte accesses and one for any
// radius with byte accesses, in a translation unit of its own so that a
// build compiles it beside blur.cu.
#include "common/check.hpp"
#include "common/device_limits.hpp"
#include "common/launch.hpp"
#include "image/blur.hpp"
#include "image/blur_sliding.cuh"

#include <loom/error.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

namespace loom::kernels {
namespace {

using Kernel = void (*)(const std::uint8_t*, std::uint8_t*, int, int, int, int, int);

template <int... S>
constexpr std::array<Kernel, sizeof...(S)> kernels_for(std::integer_sequence<int, S...>) {
  return {&blur_detail::blur_sliding<S>...};
}

// blur_sliding<r % 16>, then blur_sliding<kSlideGeneric>.
constexpr auto kKernels =
    kernels_for(std::make_integer_sequence<int, blur_detail::kSlideGeneric + 1>{});

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

bool box_blur_sliding_takes(std::int64_t height, std::int64_t width, int radius) noexcept {
  (void)height;  // any: a window of one row (cy = 1) divides as well
  return radius >= 0 && radius <= blur_detail::kSlideMaxRadius && (radius == 0 || width >= 2);
}

int box_blur_sliding_segment_rows(std::int64_t planes, std::int64_t height, std::int64_t width,
                                  int radius, int sm_count) noexcept {
  // Past radius 127 a warp would have no outputs (slide_outputs <= 0).
  if (!box_blur_sliding_takes(height, width, radius) || planes <= 0) return 0;
  return blur_detail::slide_segment_rows(planes, static_cast<int>(height), static_cast<int>(width),
                                         radius, sm_count);
}

void box_blur_sliding(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                      std::int64_t height, std::int64_t width, int radius, StreamView stream,
                      int segment_rows) {
  if (planes == 0 || height == 0 || width == 0) return;
  if (!box_blur_sliding_takes(height, width, radius)) {
    throw InvalidArgument(
        "box_blur: the sliding kernel takes radius 0..127, and widths of at "
        "least 2 past radius 0; got radius " +
        std::to_string(radius) + " over " + std::to_string(height) + " x " + std::to_string(width));
  }
  const auto p = static_cast<int>(planes);
  const auto h = static_cast<int>(height);
  const auto w = static_cast<int>(width);
  if (segment_rows <= 0) {
    segment_rows = blur_detail::slide_segment_rows(p, h, w, radius, device_multiprocessors());
  }
  const bool vectorized = w % 16 == 0 && aligned16(src) && aligned16(dst);
  const long long tasks = blur_detail::slide_tasks(p, h, w, radius, segment_rows);
  // Few tasks: a warp a block, so that the block scheduler spreads them
  // evenly over the SMs; many: four, fewer blocks to schedule.
  const int warps = tasks >= 64LL * device_multiprocessors() ? blur_detail::kSlideWarps : 1;
  const long long blocks = std::min<long long>((tasks + warps - 1) / warps, 0x7FFFFFFF);
  const int kernel = vectorized ? radius % blur_detail::kSlideStrip : blur_detail::kSlideGeneric;
  loom::detail::launch_on_stream(stream, kKernels[static_cast<std::size_t>(kernel)],
                                 dim3(static_cast<unsigned>(blocks)),
                                 dim3(static_cast<unsigned>(warps * blur_detail::kSlideLanes)), 0,
                                 src, dst, p, h, w, radius, segment_rows);
  LOOM_KERNEL_CHECK_LAUNCH("box_blur sliding kernel launch");
}

}  // namespace loom::kernels
