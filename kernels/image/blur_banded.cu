// The banded box blur's launch (the kernel is blur_banded.cuh's): one
// instantiation for each r % 4, in a translation unit of its own so that a
// build compiles it beside blur.cu and blur_sliding.cu.
#include "common/check.hpp"
#include "common/device_limits.hpp"
#include "common/launch.hpp"
#include "image/blur.hpp"
#include "image/blur_banded.cuh"

#include <loom/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

namespace loom::kernels {
namespace {

using Kernel = void (*)(const std::uint8_t*, std::uint8_t*, int, int, int, int, int);

constexpr std::array<Kernel, 4> kKernels = {
    &blur_detail::blur_banded<0>, &blur_detail::blur_banded<1>, &blur_detail::blur_banded<2>,
    &blur_detail::blur_banded<3>};

// Whether each kernel may take kBandSharedBytes on each device (the first 64).
std::array<std::atomic<std::uint64_t>, 4> opted_in{};

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

bool box_blur_banded_takes(std::int64_t height, std::int64_t width, int radius, const void* src,
                           const void* dst) noexcept {
  // The band and segment arithmetic runs in int: room for a band's and a
  // segment's rounding past the extents (segments are clamped to the height).
  constexpr std::int64_t kMost = std::numeric_limits<int>::max() / 2;
  return radius >= 0 && radius <= blur_detail::kBandMaxRadius && width > 0 && width % 16 == 0 &&
         width <= kMost && height <= kMost && aligned16(src) && aligned16(dst);
}

int box_blur_banded_segment_rows(std::int64_t planes, std::int64_t height, std::int64_t width,
                                 int radius, int sm_count) noexcept {
  if (radius < 0 || radius > blur_detail::kBandMaxRadius || planes <= 0 || height <= 0 ||
      width <= 0) {
    return 0;
  }
  return blur_detail::band_segment_rows(planes, static_cast<int>(height), static_cast<int>(width),
                                        radius, sm_count);
}

void box_blur_banded(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                     std::int64_t height, std::int64_t width, int radius, StreamView stream,
                     int segment_rows) {
  if (planes == 0 || height == 0 || width == 0) return;
  if (!box_blur_banded_takes(height, width, radius, src, dst)) {
    throw InvalidArgument(
        "box_blur: the banded kernel takes radius 0..127, widths that are a multiple of 16, "
        "extents up to 2^30 and 16-byte aligned images; got radius " +
        std::to_string(radius) + " over " + std::to_string(height) + " x " + std::to_string(width));
  }
  const auto p = static_cast<int>(planes);
  const auto h = static_cast<int>(height);
  const auto w = static_cast<int>(width);
  if (segment_rows <= 0) {
    segment_rows = blur_detail::band_segment_rows(p, h, w, radius, device_multiprocessors());
  }
  segment_rows = std::min(segment_rows, h);  // a longer segment is the whole image
  const long long tasks = blur_detail::band_tasks(p, h, w, radius, segment_rows);
  const auto blocks = static_cast<unsigned>(std::min<long long>(tasks, 0x7FFFFFFF));
  const auto which = static_cast<std::size_t>(radius % 4);
  opt_in_shared_memory(kKernels[which], blur_detail::kBandSharedBytes, opted_in[which]);
  loom::detail::launch_on_stream(stream, kKernels[which], dim3(blocks),
                                 dim3(blur_detail::kBandThreads), blur_detail::kBandSharedBytes,
                                 src, dst, p, h, w, radius, segment_rows);
  LOOM_KERNEL_CHECK_LAUNCH("box_blur banded kernel launch");
}

}  // namespace loom::kernels
