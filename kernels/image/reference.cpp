// The image family's CPU references: what the CPU backend runs, and what the
// GPU kernels are checked against, bit for bit.
#include "image/blur.hpp"
#include "image/gray.hpp"
#include "image/histogram.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace loom::kernels {

void rgb_to_gray_reference(const std::uint8_t* rgb, std::uint8_t* gray, std::size_t pixels,
                           RgbLayout layout) noexcept {
  for (std::size_t p = 0; p < pixels; ++p) {
    gray[p] = layout == RgbLayout::interleaved
                  ? gray_of(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2])
                  : gray_of(rgb[p], rgb[pixels + p], rgb[2 * pixels + p]);
  }
}

void box_blur_reference(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                        std::int64_t height, std::int64_t width, int radius) {
  const std::int64_t r = radius;
  std::vector<unsigned> row_sum(static_cast<std::size_t>(height * width));
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const std::uint8_t* in = src + plane * height * width;
    std::uint8_t* out = dst + plane * height * width;
    for (std::int64_t y = 0; y < height; ++y) {
      for (std::int64_t x = 0; x < width; ++x) {
        unsigned s = 0;
        for (std::int64_t xx = std::max<std::int64_t>(x - r, 0);
             xx <= std::min<std::int64_t>(x + r, width - 1); ++xx) {
          s += in[y * width + xx];
        }
        row_sum[static_cast<std::size_t>(y * width + x)] = s;
      }
    }
    for (std::int64_t y = 0; y < height; ++y) {
      const std::int64_t ya = std::max<std::int64_t>(y - r, 0);
      const std::int64_t yb = std::min<std::int64_t>(y + r, height - 1);
      for (std::int64_t x = 0; x < width; ++x) {
        unsigned s = 0;
        for (std::int64_t yy = ya; yy <= yb; ++yy)
          s += row_sum[static_cast<std::size_t>(yy * width + x)];
        const std::int64_t xa = std::max<std::int64_t>(x - r, 0);
        const std::int64_t xb = std::min<std::int64_t>(x + r, width - 1);
        const auto count = static_cast<unsigned>((xb - xa + 1) * (yb - ya + 1));
        out[y * width + x] = static_cast<std::uint8_t>(rounded_average(s, count));
      }
    }
  }
}

void histogram_reference(const std::uint8_t* image, std::size_t pixels,
                         std::int32_t* counts) noexcept {
  std::fill(counts, counts + kHistogramBins, 0);
  for (std::size_t p = 0; p < pixels; ++p) ++counts[image[p]];
}

}  // namespace loom::kernels
