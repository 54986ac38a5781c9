#pragma once
// The separable box blur, what "separable" runs (blur.hpp describes it): two
// passes whose cost does not depend on the radius.
//  1. Row sums: a block takes kRowChunk pixels of one row and the window's
//     reach either side, loads them into shared memory with consecutive
//     threads on consecutive bytes (coalesced), takes their inclusive
//     prefix sums (each thread 5 consecutive values, then a scan across the
//     block), and writes each pixel's window sum as P[x + r] - P[x - r - 1],
//     16 bits (255 x 255 at most), consecutive threads on consecutive pixels.
//  2. Column sums: a thread slides the vertical window down a run of kColRun
//     rows of one column (adjacent threads take adjacent columns, so every
//     load and store is coalesced), and divides each sum by its window's
//     in-image pixel count.
// Kept in a header so that a CPU test can run the kernels' own code
// (test_blur_emulated.cpp).

#include <cstdint>

namespace loom::kernels::blur_detail {

inline constexpr int kRowChunk = 1024;  // output pixels of a row a block of pass 1 takes
inline constexpr int kColRun = 64;      // rows a thread slides down in pass 2
inline constexpr int kSeparableThreads = 256;
// Pass 1's span: the chunk and up to 127 pixels either side, 5 a thread.
inline constexpr int kRowSpanPerThread = 5;
inline constexpr int kRowSpan = kRowSpanPerThread * kSeparableThreads;
static_assert(kRowSpan >= kRowChunk + 2 * 127, "the span holds the chunk and the window's reach");

/// rows[i] = the sum of the row's pixels within `radius` (<= 127) of pixel i
/// (inside the image). A block a chunk of kRowChunk pixels of a row: blocks
/// cover (row, chunk) pairs, row-major, striding by the grid. 64-bit index
/// arithmetic: an extent may be close to 2^31.
static __global__ void __launch_bounds__(kSeparableThreads)
    blur_row_sums(const std::uint8_t* __restrict__ gSrc, std::uint16_t* __restrict__ gRows,
                  std::int64_t rows, std::int64_t width, std::int64_t radius) {
  __shared__ std::uint32_t sPrefix[kRowSpan];  // inclusive prefix sums of the span
  __shared__ std::uint32_t sWarp[kSeparableThreads / 32];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const std::int64_t chunks = (width + kRowChunk - 1) / kRowChunk;
  for (std::int64_t block = blockIdx.x; block < rows * chunks; block += gridDim.x) {
    const std::int64_t row = block / chunks;
    const std::int64_t x0 = block % chunks * kRowChunk;
    const std::int64_t x1 = x0 + kRowChunk < width ? x0 + kRowChunk : width;
    // The span: pixels first .. end - 1 of the row (every window of x0..x1-1).
    const std::int64_t first = x0 - radius > 0 ? x0 - radius : 0;
    const std::int64_t end = x1 + radius < width ? x1 + radius : width;
    const std::uint8_t* in = gSrc + row * width;
    __syncthreads();  // the previous chunk's readers are done with sPrefix
    // Coalesced: byte k of the span by thread k % 256.
    for (int k = tid; k < kRowSpan; k += kSeparableThreads) {
      sPrefix[k] = first + k < end ? in[first + k] : 0U;
    }
    __syncthreads();
    // Each thread's 5 consecutive values (a stride of 5 words: no bank
    // conflicts), then the thread totals scanned across the block.
    std::uint32_t local[kRowSpanPerThread];
    std::uint32_t total = 0;
#pragma unroll
    for (int k = 0; k < kRowSpanPerThread; ++k) {
      total += sPrefix[tid * kRowSpanPerThread + k];
      local[k] = total;
    }
    std::uint32_t scan = total;
#pragma unroll
    for (int delta = 1; delta < 32; delta *= 2) {
      const std::uint32_t t = __shfl_up_sync(0xFFFFFFFFU, scan, delta);
      if (lane >= delta) scan += t;
    }
    if (lane == 31) sWarp[warp] = scan;
    __syncthreads();
    std::uint32_t before = scan - total;
    for (int w = 0; w < warp; ++w) before += sWarp[w];
#pragma unroll
    for (int k = 0; k < kRowSpanPerThread; ++k) {
      sPrefix[tid * kRowSpanPerThread + k] = before + local[k];
    }
    __syncthreads();
    std::uint16_t* out = gRows + row * width;
    for (std::int64_t x = x0 + tid; x < x1; x += kSeparableThreads) {
      const std::int64_t lo = (x - radius > 0 ? x - radius : 0) - first;  // >= 0
      const std::int64_t hi = (x + radius < width - 1 ? x + radius : width - 1) - first;
      const std::uint32_t sum = sPrefix[hi] - (lo > 0 ? sPrefix[lo - 1] : 0U);
      out[x] = static_cast<std::uint16_t>(sum);
    }
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
