#pragma once
// The banded box blur, what "banded" runs (blur.hpp describes it); launched
// from blur_banded.cu. A header so that the CPU test can run its own code
// under an emulation of blocks and warps (test_blur_emulated.cpp).
//
// The sliding kernel gives each warp its own walk down 512 columns, so its
// parallelism is (strips x segments) lanes, each a long chain of dependent
// steps, and its horizontal step costs two shuffles a pixel: Nsight Compute
// found it latency-bound at 10% occupancy. Here a block of 256 threads
// walks a band of 1024 columns down a segment of rows, and the two
// directions are split between the block's threads:
//  - vertical: thread t owns the band's columns 4t .. 4t + 3, whose column
//    sums (16-bit, two to a word) gain the row entering the window and lose
//    the row leaving it (one 4-byte load each: a warp reads 128 contiguous
//    bytes), and writes them, one 32-bit sum a column, to a batch of 8 rows
//    in shared memory. A segment starts with the 2r rows that fill its first
//    window.
//  - horizontal: warp w takes row w of the batch, lane l the band's columns
//    32 l .. 32 l + 31: it turns the row's column sums into exclusive prefix
//    sums E (its own 32, then a 5-step shuffle scan of the lanes' totals),
//    writes them back in place, and reads the window sums as
//    E[c + r + 1] - E[c - r], 16-byte reads whose alignment is r % 4 (a
//    template parameter: 4 instantiations). Lanes whose windows reach past
//    the band only lend: a band writes 32 - 2 ceil(r / 32) lanes' columns,
//    and bands overlap by their halos.
//  - shared memory: two batches (the vertical step fills one while the
//    horizontal step reads the other: one __syncthreads a batch), each row
//    1024 sums with 4 words of padding after every 32, so that a warp's
//    16-byte accesses (vertical: 4 columns a thread; horizontal: 32 columns a
//    lane, at any offset) meet no bank conflicts, plus E's last entry, the
//    band's total. 72 KiB: two blocks a multiprocessor (128 registers a
//    thread; at three blocks' 80, ptxas spills).
//  - the next batch's loads are issued before the horizontal step of this
//    one, so a batch's memory latency hides behind the other's arithmetic.
//  - division as the sliding kernel's: interior pixels by one multiply-high,
//    border pixels by their in-image count cx cy in two steps.
// Widths a multiple of 16 and 16-byte aligned pointers only (blur.cu sends
// others to the sliding kernel); r <= 127, and width >= 2 past r = 0.
#include "image/blur_sliding.cuh"

#include <cstddef>
#include <cstdint>

namespace loom::kernels::blur_detail {
namespace {

constexpr int kBandThreads = 256;
constexpr int kBandWarps = kBandThreads / 32;
constexpr int kBandColumns = 1024;      // a band: 4 columns a thread, 32 a lane
constexpr int kBandLaneColumns = 32;    // a lane's in the horizontal step
constexpr int kBandBatch = kBandWarps;  // rows a batch: one a warp
constexpr int kBandMaxRadius = 127;
/// A row of a batch in shared memory, in words: column c at band_slot(c)
/// (4 words of padding after every 32), E's entry 1024 (the band's total)
/// included, and room for the 16-byte reads that run past it.
constexpr int kBandRowWords = kBandColumns + kBandColumns / 8 + 4;
constexpr std::size_t kBandSharedBytes = 2U * kBandBatch * kBandRowWords * sizeof(std::uint32_t);

__host__ __device__ constexpr int band_slot(int column) { return column + 4 * (column / 32); }

/// Lanes at each edge of a band that only lend: ceil(r / 32).
__host__ __device__ constexpr int band_halo_lanes(int r) {
  return (r + kBandLaneColumns - 1) / kBandLaneColumns;
}

/// Columns a band writes: the lanes whose windows stay inside the band.
__host__ __device__ constexpr int band_outputs(int r) {
  return kBandLaneColumns * (32 - 2 * band_halo_lanes(r));
}

__host__ __device__ inline long long band_count(int width, int r) {
  return (width + band_outputs(r) - 1) / band_outputs(r);
}

/// The kernel's tasks (a band of a segment of a plane).
inline long long band_tasks(long long planes, int height, int width, int r, int segment_rows) {
  return planes * ((height + segment_rows - 1) / segment_rows) * band_count(width, r);
}

/// Rows a block walks: the longest segment (a multiple of the batch, 32 to
/// 256 rows, and at least the window's 2r fill rows where it can be) that
/// still gives every multiprocessor `per_sm` tasks.
inline int band_segment_rows(long long planes, int height, int width, int r, int sm_count,
                             int per_sm = 4) {
  const long long sms = sm_count > 0 ? sm_count : 1;
  int rows = 256;
  while (rows > 32 && band_tasks(planes, height, width, r, rows) < per_sm * sms) rows /= 2;
  return rows;
}

// The band's word of 4 columns at `at` (bytes from the plane's start); 0
// where not `valid` (the row or the columns lie outside the image).
__device__ __forceinline__ std::uint32_t band_load(const std::uint8_t* plane, long long at,
                                                   bool valid) {
  return valid ? *reinterpret_cast<const std::uint32_t*>(plane + at) : 0U;
}

// Column sums (two 16-bit sums a word: columns 0,1 and 2,3) gain `in` and
// lose `out`; each 16-bit lane ends in [0, 65025], so the 32-bit arithmetic
// is exact lane by lane.
__device__ __forceinline__ void band_slide(std::uint32_t (&v)[2], std::uint32_t in,
                                           std::uint32_t out) {
  v[0] += __byte_perm(in, 0, 0x4140) - __byte_perm(out, 0, 0x4140);
  v[1] += __byte_perm(in, 0, 0x4342) - __byte_perm(out, 0, 0x4342);
}

// 16 consecutive entries of a row's E, from entry `start` (start % 4 == A,
// a compile-time constant): four or five aligned 16-byte reads.
template <int A>
__device__ __forceinline__ void band_read16(const std::uint32_t* row, int start,
                                            std::uint32_t (&out)[16]) {
  constexpr int kReads = A == 0 ? 4 : 5;
  std::uint32_t w[4 * kReads];
  const int base = start - A;
#pragma unroll
  for (int i = 0; i < kReads; ++i) {
    const uint4 q = *reinterpret_cast<const uint4*>(row + band_slot(base + 4 * i));
    w[4 * i] = q.x;
    w[4 * i + 1] = q.y;
    w[4 * i + 2] = q.z;
    w[4 * i + 3] = q.w;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) out[j] = w[A + j];
}

// What the horizontal step needs of the image and radius.
struct BandShape {
  int height, width, r;
  SlideDivisor area;  // (2r + 1)^2, interior pixels
};

// The horizontal step for one row of a batch (every lane of the warp calls
// it): prefix sums in place, then owners divide and store their 32 columns.
// `x0`: the band's first column in the image (negative at the left edge);
// `y`: the image row; `out_row`: that row of the output plane.
template <int RM>
__device__ __forceinline__ void band_row(std::uint32_t* row, const BandShape& s, int x0, int y,
                                         std::uint8_t* out_row) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // Two passes over the lane's 32 column sums (registers are what limits
  // the blocks a multiprocessor): their total, then, once the scan has
  // given the lanes before this one, the exclusive prefix sums in place
  // (each lane rewrites only the slots it read).
  std::uint32_t total = 0;
#pragma unroll
  for (int i = 0; i < kBandLaneColumns / 4; ++i) {
    const uint4 q = *reinterpret_cast<const uint4*>(row + band_slot(32 * lane + 4 * i));
    total += q.x + q.y + q.z + q.w;
  }
  std::uint32_t inclusive = total;
#pragma unroll
  for (int delta = 1; delta < 32; delta *= 2) {
    const std::uint32_t t = __shfl_up_sync(kSlideMask, inclusive, delta);
    if (lane >= delta) inclusive += t;
  }
  std::uint32_t run = inclusive - total;
#pragma unroll
  for (int i = 0; i < kBandLaneColumns / 4; ++i) {
    auto* at = reinterpret_cast<uint4*>(row + band_slot(32 * lane + 4 * i));
    const uint4 q = *at;
    uint4 e;
    e.x = run;
    e.y = e.x + q.x;
    e.z = e.y + q.y;
    e.w = e.z + q.z;
    run = e.w + q.w;
    *at = e;
  }
  if (lane == 31) row[band_slot(kBandColumns)] = inclusive;
  __syncwarp();

  const int halo = band_halo_lanes(s.r);
  const int x = x0 + 32 * lane;  // the lane's first column in the image
  const bool owner = lane >= halo && lane < 32 - halo && x < s.width;
  if (owner) {
    const int r = s.r;
    // Every window of the row and of the lane's 32 columns inside the image
    // (at r = 0 every window is its pixel: the two-step division needs cx >= 2).
    const bool interior = r == 0 || (y - r >= 0 && y + r <= s.height - 1 && x - r >= 0 &&
                                     x + kBandLaneColumns - 1 + r <= s.width - 1);
    unsigned cy = 0;
    std::uint32_t magic_cy = 0;
    if (!interior) {
      cy = static_cast<unsigned>(slide_count(y, r, s.height));
      magic_cy = slide_small_magic(cy);
    }
    const unsigned pick = s.area.byte * 0x11U + 0x40U;  // the quotient's byte, in both halves
#pragma unroll 1
    for (int half = 0; half < 2; ++half) {
      const int c = 32 * lane + 16 * half;  // the band's column of element 0
      std::uint32_t hi[16];
      std::uint32_t lo[16];
      band_read16<(RM + 1) % 4>(row, c + r + 1, hi);
      band_read16<(4 - RM) % 4>(row, c - r, lo);
      std::uint32_t q[16];
      if (interior) {
#pragma unroll
        for (int j = 0; j < 16; ++j)
          q[j] = slide_mulhi(hi[j] - lo[j] + s.area.addend, s.area.magic);
      } else {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const unsigned cx = static_cast<unsigned>(slide_count(x + 16 * half + j, r, s.width));
          const unsigned n = hi[j] - lo[j] + ((cx * cy) >> 1) + (cy == 1 ? 1U : 0U);
          // The quotient in byte 0: the pick below reads byte `area.byte`.
          q[j] = slide_edge_divide(n, magic_cy, kSlideMagics.of[cx & 0xFFU]) << (8 * s.area.byte);
        }
      }
      std::uint32_t w[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        w[k] = __byte_perm(__byte_perm(q[4 * k], q[4 * k + 1], pick),
                           __byte_perm(q[4 * k + 2], q[4 * k + 3], pick), 0x5410);
      }
      // The width is a multiple of 16: a half lies wholly inside or outside.
      if (x + 16 * half < s.width) {
        *reinterpret_cast<uint4*>(out_row + x + 16 * half) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  }
}

/// The kernel's body, on `smem` (kBandSharedBytes; the __global__ below
/// passes its dynamic shared memory, the CPU emulation a static buffer).
/// Tasks: the band (fastest), the segment of rows, the plane; a block takes
/// task blockIdx.x, then strides by the grid.
template <int RM>
__device__ __forceinline__ void blur_banded_body(const std::uint8_t* __restrict__ gSrc,
                                                 std::uint8_t* __restrict__ gDst, int planes,
                                                 int height, int width, int radius,
                                                 int segment_rows, std::uint32_t* smem) {
  const int thread = static_cast<int>(threadIdx.x);
  const int warp = thread / 32;
  const int r = radius;
  const BandShape shape{height, width, r,
                        slide_divisor(static_cast<std::uint32_t>((2 * r + 1) * (2 * r + 1)))};
  const long long bands = band_count(width, r);
  const int segments = (height + segment_rows - 1) / segment_rows;
  const long long tasks = static_cast<long long>(planes) * segments * bands;
  const std::size_t plane_size = static_cast<std::size_t>(height) * width;

  for (long long task = blockIdx.x; task < tasks; task += gridDim.x) {
    const long long band = task % bands;
    const long long rest = task / bands;
    const auto segment = static_cast<int>(rest % segments);
    const auto plane = static_cast<std::size_t>(rest / segments);
    const int x0 = static_cast<int>(band) * band_outputs(r) - kBandLaneColumns * band_halo_lanes(r);
    const int xt = x0 + 4 * thread;  // this thread's 4 columns (vertical step)
    const bool in_image = xt >= 0 && xt < width;
    const std::uint8_t* gIn = gSrc + plane * plane_size;
    std::uint8_t* gOut = gDst + plane * plane_size;
    const int y0 = segment * segment_rows;
    const int rows = slide_min(segment_rows, height - y0);

    // The first window but its last row: rows y0 - r .. y0 + r - 1 in the image.
    std::uint32_t v[2] = {0, 0};
    {
      const int end = slide_min(y0 + r, height);
      int y = slide_max(y0 - r, 0);
      long long at = static_cast<long long>(y) * width + xt;
      for (; y + kSlideFill <= end;
           y += kSlideFill, at += static_cast<long long>(kSlideFill) * width) {
        std::uint32_t in[kSlideFill];
#pragma unroll
        for (int k = 0; k < kSlideFill; ++k) {
          in[k] = band_load(gIn, at + static_cast<long long>(k) * width, in_image);
        }
#pragma unroll
        for (int k = 0; k < kSlideFill; ++k) band_slide(v, in[k], 0U);
      }
      for (; y < end; ++y, at += width) band_slide(v, band_load(gIn, at, in_image), 0U);
    }

    // Output row y0 + t: row y0 + t + r enters, row y0 + t - r - 1 leaves
    // (none at t = 0: the fill above ends before it).
    std::uint32_t in[kBandBatch];
    std::uint32_t out[kBandBatch];
    const auto load_batch = [&](int first) {
#pragma unroll
      for (int k = 0; k < kBandBatch; ++k) {
        const int t = first + k;
        const int y = y0 + t;
        const bool now = in_image && t < rows;
        in[k] = band_load(gIn, static_cast<long long>(y + r) * width + xt, now && y + r < height);
        out[k] = band_load(gIn, static_cast<long long>(y - r - 1) * width + xt,
                           now && t >= 1 && y - r - 1 >= 0);
      }
    };
    load_batch(0);
    int buffer = 0;
    for (int first = 0; first < rows; first += kBandBatch, buffer ^= 1) {
      std::uint32_t* batch = smem + buffer * kBandBatch * kBandRowWords;
      // Vertical: this batch's column sums, a row of the batch at a time.
#pragma unroll
      for (int k = 0; k < kBandBatch; ++k) {
        band_slide(v, in[k], out[k]);
        *reinterpret_cast<uint4*>(batch + k * kBandRowWords + band_slot(4 * thread)) =
            make_uint4(v[0] & 0xFFFFU, v[0] >> 16, v[1] & 0xFFFFU, v[1] >> 16);
      }
      // The next batch's rows are read while this one is summed across.
      load_batch(first + kBandBatch);
      __syncthreads();
      const int t = first + warp;
      if (t < rows) {
        band_row<RM>(batch + warp * kBandRowWords, shape, x0, y0 + t,
                     gOut + static_cast<std::size_t>(y0 + t) * width);
      }
    }
    // The next task's first batch reuses the buffers this one's last read.
    __syncthreads();
  }
}

#if !defined(LOOM_EMULATED_CUDA)
/// The kernel: blocks of kBandThreads threads, kBandSharedBytes of dynamic
/// shared memory; RM = radius % 4.
template <int RM>
__global__ void __launch_bounds__(kBandThreads, 2)
    blur_banded(const std::uint8_t* __restrict__ gSrc, std::uint8_t* __restrict__ gDst, int planes,
                int height, int width, int radius, int segment_rows) {
  extern __shared__ uint4 band_shared[];
  blur_banded_body<RM>(gSrc, gDst, planes, height, width, radius, segment_rows,
                       reinterpret_cast<std::uint32_t*>(band_shared));
}
#endif

}  // namespace
}  // namespace loom::kernels::blur_detail
