#pragma once
// The separable box blur, what "separable" runs (blur.hpp describes it): two
// passes of running sums whose cost does not depend on the radius.
//  1. Row sums: a thread slides the horizontal window along a run of
//     kRowRun pixels of one row (one add and one subtract a pixel, after
//     the window's first sum), writing 16-bit sums (255 x 255 at most).
//  2. Column sums: a thread slides the vertical window down a run of kColRun
//     rows of one column (adjacent threads take adjacent columns, so every
//     load and store is coalesced), and divides each sum by its window's
//     in-image pixel count.
// Kept in a header so that a CPU test can run the kernels' own code
// (test_blur_emulated.cpp).

#include <cstdint>

namespace loom::kernels::blur_detail {

inline constexpr int kRowRun = 64;  // pixels a thread slides over in pass 1
inline constexpr int kColRun = 64;  // rows a thread slides down in pass 2
inline constexpr int kSeparableThreads = 256;

/// rows[i] = the sum of the row's pixels within `radius` of pixel i (inside
/// the image). One thread a run of kRowRun pixels of a row. 64-bit index
/// arithmetic: an extent may be close to 2^31.
static __global__ void __launch_bounds__(kSeparableThreads)
    blur_row_sums(const std::uint8_t* __restrict__ gSrc, std::uint16_t* __restrict__ gRows,
                  std::int64_t rows, std::int64_t width, std::int64_t radius) {
  const std::int64_t runs = (width + kRowRun - 1) / kRowRun;
  const std::int64_t id =
      static_cast<std::int64_t>(blockIdx.x) * blockDim.x + static_cast<std::int64_t>(threadIdx.x);
  if (id >= rows * runs) return;
  const std::int64_t row = id / runs;
  const std::int64_t x0 = id % runs * kRowRun;
  const std::int64_t x1 = x0 + kRowRun < width ? x0 + kRowRun : width;
  const std::uint8_t* in = gSrc + row * width;
  std::uint16_t* out = gRows + row * width;
  unsigned sum = 0;
  const std::int64_t first = x0 - radius > 0 ? x0 - radius : 0;
  const std::int64_t last = x0 + radius < width - 1 ? x0 + radius : width - 1;
  for (std::int64_t x = first; x <= last; ++x) sum += in[x];
  out[x0] = static_cast<std::uint16_t>(sum);
  for (std::int64_t x = x0 + 1; x < x1; ++x) {
    if (x + radius < width) sum += in[x + radius];
    if (x - radius - 1 >= 0) sum -= in[x - radius - 1];
    out[x] = static_cast<std::uint16_t>(sum);
  }
}

/// dst = the window's sum of row sums, divided by its in-image pixel count
/// and rounded half up. One thread a run of kColRun rows of one column.
static __global__ void __launch_bounds__(kSeparableThreads)
    blur_column_sums(const std::uint16_t* __restrict__ gRows, std::uint8_t* __restrict__ gDst,
                     std::int64_t planes, std::int64_t height, std::int64_t width,
                     std::int64_t radius) {
  const std::int64_t runs = (height + kColRun - 1) / kColRun;
  const std::int64_t id =
      static_cast<std::int64_t>(blockIdx.x) * blockDim.x + static_cast<std::int64_t>(threadIdx.x);
  if (id >= planes * runs * width) return;
  const std::int64_t x = id % width;
  const std::int64_t rest = id / width;
  const std::int64_t y0 = rest % runs * kColRun;
  const std::int64_t plane = rest / runs;
  const std::int64_t y1 = y0 + kColRun < height ? y0 + kColRun : height;
  const std::int64_t base = plane * height * width + x;
  const std::uint16_t* col = gRows + base;
  std::uint8_t* out = gDst + base;
  const std::int64_t left = x - radius > 0 ? x - radius : 0;
  const std::int64_t right = x + radius < width - 1 ? x + radius : width - 1;
  const auto count_x = static_cast<unsigned>(right - left + 1);
  unsigned sum = 0;
  const std::int64_t first = y0 - radius > 0 ? y0 - radius : 0;
  const std::int64_t last = y0 + radius < height - 1 ? y0 + radius : height - 1;
  for (std::int64_t y = first; y <= last; ++y) sum += col[y * width];
  for (std::int64_t y = y0; y < y1; ++y) {
    if (y > y0) {
      if (y + radius < height) sum += col[(y + radius) * width];
      if (y - radius - 1 >= 0) sum -= col[(y - radius - 1) * width];
    }
    const std::int64_t top = y - radius > 0 ? y - radius : 0;
    const std::int64_t bottom = y + radius < height - 1 ? y + radius : height - 1;
    const unsigned count = count_x * static_cast<unsigned>(bottom - top + 1);
    out[y * width] = static_cast<std::uint8_t>((sum + count / 2) / count);
  }
}

}  // namespace loom::kernels::blur_detail
