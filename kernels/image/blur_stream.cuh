#pragma once
// The streaming box blur, what "tiled" runs when the image takes 16-byte
// accesses (blur.hpp describes it); launched from blur.cu. A header so that
// the CPU test can run it under an emulation of a warp (test_blur_emulated.cpp).
//
// A block is one warp; lane l owns a 16-column strip of the image and walks
// down a segment of kSegmentRows output rows. Each row costs one 16-byte
// load and one 16-byte store a lane: the vertical window slides in registers
// (a ring of the last rows read, loaded kAhead rows ahead of their use), the
// column sums of the strip are packed two 16-bit sums to a word, and the
// horizontal window takes the R columns either side from the neighbouring
// lanes by shuffles. Lanes 0 and 31 only lend their column sums: a warp
// writes 30 strips, so no lane needs a neighbour outside its warp.
#include <cstdint>

namespace loom::kernels::blur_detail {
namespace {

constexpr int kStripBytes = 16;
constexpr int kWarpLanes = 32;
constexpr int kStripsPerWarp = kWarpLanes - 2;
// Rows a warp writes where the tests name none; box_blur() takes
// stream_segment_rows().
constexpr int kSegmentRows = 32;

// The rows a warp writes, for `planes` planes of `height` rows and `groups`
// groups of kStripsPerWarp strips, on a device that holds `slots` of the
// kernel's one-warp blocks at once. Its registers (116 a thread at R = 1,
// 223 at R = 7) leave few warps an SM, too few for DRAM's latency, and a
// block that finds no room waits for one to end: the time is about the
// waves of blocks times the rows each warp walks (its segment and the 2R
// halo rows above and below), which this takes least of, over 4, 8, ..., 32
// rows (the shorter on a tie). On 4096 x 4096 (H100, 2026-12-07) it picks
// what the sweeps found best: 20 rows at R = 1 (0.76 of the floor; 16 rows,
// just past one wave, 0.67), 24 at R = 2 and 3 (0.73, 0.69; 20 rows, two
// waves, 0.60 and 0.56), 20 at R = 4..7 (0.55 to 0.50; 16 rows 0.49 to
// 0.45, 32 rows 0.39 at R = 7).
__host__ __device__ constexpr int stream_segment_rows(std::int64_t planes, std::int64_t height,
                                                      std::int64_t groups, std::int64_t slots,
                                                      int r) {
  if (slots <= 0 || planes <= 0 || height <= 0 || groups <= 0) return kSegmentRows;
  int best = 4;
  std::int64_t best_cost = -1;
  for (int rows = 4; rows <= 32; rows += 4) {
    const std::int64_t blocks = (height + rows - 1) / rows * planes * groups;
    const std::int64_t waves = (blocks + slots - 1) / slots;
    const std::int64_t walked = (height < rows ? height : rows) + 2 * r;
    const std::int64_t cost = waves * walked;
    if (best_cost < 0 || cost < best_cost) {
      best = rows;
      best_cost = cost;
    }
  }
  return best;
}
// Rows loaded ahead of their use: with ~9 warps an SM, ~40 KB in flight.
constexpr int kAhead = 8;
constexpr unsigned kFullMask = 0xFFFFFFFFU;

constexpr int imin(int a, int b) { return a < b ? a : b; }
constexpr int imax(int a, int b) { return a > b ? a : b; }

template <int R>
struct StreamShape {
  static_assert(R >= 1 && R <= 7, "16-bit packed window sums need R <= 7");
  static constexpr int kWindow = 2 * R + 1;
  static constexpr unsigned kArea = kWindow * kWindow;
  // Ring slots: the window's rows, the row leaving it and kAhead - 1 in flight.
  static constexpr int kRing = kWindow + kAhead;
  // Packed column-sum words lent by each neighbour: the R columns nearest it.
  static constexpr int kHaloWords = (R + 1) / 2;
  static constexpr int kExtWords = 8 + 2 * kHaloWords;
};

/// floor(n / c) for 2 <= c and n < 2^16 as floor(n * m / 2^32): with
/// m = floor((2^32 - 1) / c) + 1 the error m * c - 2^32 is at most c, so the
/// product stays below the next multiple (test_blur_emulated.cpp checks
/// every n and c the kernel takes).
__host__ __device__ constexpr std::uint32_t blur_magic(unsigned c) { return 0xFFFFFFFFU / c + 1U; }

__host__ __device__ inline unsigned divide_by_magic(unsigned n, std::uint32_t magic) {
  return static_cast<unsigned>((static_cast<std::uint64_t>(n) * magic) >> 32);
}

/// The divisors of one output row: interior columns divide by K cy (K the
/// window's side, cy the rows of the window inside the image), the outer
/// columns of the edge strips first by cy, then by their own column count.
struct RowDivisors {
  unsigned half;          // (K cy) / 2, added to every sum for the rounding
  std::uint32_t magic;    // of K cy
  std::uint32_t magic_y;  // of cy
};

/// A pixel of an edge strip whose window has cx columns in the image: the
/// count is cx cy, and floor(n / (cx cy)) = floor(floor(n / cy) / cx).
/// `sum` holds the window sum plus d.half, as the packed sums do.
__host__ __device__ inline unsigned edge_quotient(unsigned sum, unsigned cx, unsigned cy,
                                                  const RowDivisors& d) {
  const unsigned n = sum - d.half + cx * cy / 2;
  return divide_by_magic(divide_by_magic(n, d.magic_y), blur_magic(cx));
}

// Pixels of the window around p inside [0, extent); at least 1, so that
// strips past the image's edge (computed, never stored) divide safely.
__host__ __device__ inline unsigned stream_window_count(int p, int r, int extent) {
  return static_cast<unsigned>(imax(imin(p + r, extent - 1) - imax(p - r, 0) + 1, 1));
}

// Adds the row entering the window and drops the one leaving it, as 16-bit
// column sums two to a word (word m: columns 2m, 2m + 1). Every lane ends in
// [0, 65535], so the 32-bit arithmetic, wrapping or not, is exact lane by lane.
__device__ __forceinline__ void slide_columns(unsigned (&cs)[8], uint4 in, uint4 out) {
  const unsigned a[4] = {in.x, in.y, in.z, in.w};
  const unsigned b[4] = {out.x, out.y, out.z, out.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    cs[2 * w] += __byte_perm(a[w], 0, 0x4140) - __byte_perm(b[w], 0, 0x4140);
    cs[2 * w + 1] += __byte_perm(a[w], 0, 0x4342) - __byte_perm(b[w], 0, 0x4342);
  }
}

// Columns u and u + 1 of the extended row (the strip and its neighbours'
// columns), packed: word-aligned pairs are words, the others straddle two.
__device__ __forceinline__ unsigned column_pair(const unsigned* ext, int u) {
  return (u % 2 == 0) ? ext[u / 2] : __byte_perm(ext[u / 2], ext[u / 2 + 1], 0x5432);
}

// The window sum of strip column j from the packed sums.
__device__ __forceinline__ unsigned lane_sum(const unsigned (&sums)[8], int j) {
  return (j % 2 == 0) ? (sums[j / 2] & 0xFFFFU) : (sums[j / 2] >> 16);
}

__device__ __forceinline__ unsigned pack_bytes(unsigned a, unsigned b, unsigned c, unsigned d) {
  return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}

// One output row of the strip from its column sums (every lane calls it:
// the shuffles need the whole warp); lanes with `store` write it.
template <int R>
__device__ __forceinline__ void emit_row(const unsigned (&cs)[8], std::uint8_t* gRow, int x,
                                         int width, unsigned count_y, const RowDivisors& d,
                                         bool store) {
  using S = StreamShape<R>;
  constexpr int kH = S::kHaloWords;
  unsigned ext[S::kExtWords];  // extended column u is strip column u - 2 kH
#pragma unroll
  for (int h = 0; h < kH; ++h) ext[h] = __shfl_up_sync(kFullMask, cs[8 - kH + h], 1);
#pragma unroll
  for (int m = 0; m < 8; ++m) ext[kH + m] = cs[m];
#pragma unroll
  for (int h = 0; h < kH; ++h) ext[kH + 8 + h] = __shfl_down_sync(kFullMask, cs[h], 1);

  // Window sums of columns 2m and 2m + 1, packed, with half the interior
  // columns' count added for the rounding (below 2^16 a lane).
  unsigned sums[8];
  unsigned s = d.half | (d.half << 16);
#pragma unroll
  for (int dc = -R; dc <= R; ++dc) s += column_pair(ext, dc + 2 * kH);
  sums[0] = s;
#pragma unroll
  for (int m = 0; m < 7; ++m) {
    const int u = 2 * m + 2 * kH;
    s += column_pair(ext, u + R + 1) + column_pair(ext, u + R + 2) - column_pair(ext, u - R) -
         column_pair(ext, u - R + 1);
    sums[m + 1] = s;
  }

  unsigned q[16];
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    q[2 * m] = divide_by_magic(sums[m] & 0xFFFFU, d.magic);
    q[2 * m + 1] = divide_by_magic(sums[m] >> 16, d.magic);
  }
  // The strips at the image's left and right edges redo their outer R
  // columns, whose windows have (j + R + 1) and (16 - j + R) columns in the
  // image (the width is at least 16 > 2R, so no window passes both edges).
  if (x == 0) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      q[j] = edge_quotient(lane_sum(sums, j), static_cast<unsigned>(j + R + 1), count_y, d);
    }
  }
  if (x + kStripBytes == width) {
#pragma unroll
    for (int j = kStripBytes - R; j < kStripBytes; ++j) {
      q[j] =
          edge_quotient(lane_sum(sums, j), static_cast<unsigned>(kStripBytes - j + R), count_y, d);
    }
  }
  unsigned words[4];
#pragma unroll
  for (int w = 0; w < 4; ++w)
    words[w] = pack_bytes(q[4 * w], q[4 * w + 1], q[4 * w + 2], q[4 * w + 3]);
  if (store) {
    *reinterpret_cast<uint4*>(gRow + x) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// Grid: x over groups of kStripsPerWarp strips, y over segments of
// `segment_rows` rows (>= 1), z over planes (y and z stride when they pass
// the grid's limits). Needs width % 16 == 0, height >= 2 (so that cy >= 2:
// the reciprocals need a divisor of at least 2) and 16-byte aligned pointers.
template <int R>
__global__ void __launch_bounds__(kWarpLanes)
    blur_stream(const std::uint8_t* __restrict__ gSrc, std::uint8_t* __restrict__ gDst, int planes,
                int height, int width, int segment_rows) {
  using S = StreamShape<R>;
  constexpr int kN = S::kRing;
  const int lane = static_cast<int>(threadIdx.x);
  const int strips = width / kStripBytes;
  const int strip = static_cast<int>(blockIdx.x) * kStripsPerWarp + lane - 1;
  const bool in_image = strip >= 0 && strip < strips;
  const bool owner = lane >= 1 && lane <= kStripsPerWarp && strip < strips;
  const int x = strip * kStripBytes;
  const int segments = (height + segment_rows - 1) / segment_rows;
  const std::size_t plane_size = static_cast<std::size_t>(height) * width;

  for (int plane = static_cast<int>(blockIdx.z); plane < planes;
       plane += static_cast<int>(gridDim.z)) {
    const std::uint8_t* gIn = gSrc + plane * plane_size;
    std::uint8_t* gOut = gDst + plane * plane_size;
    for (int segment = static_cast<int>(blockIdx.y); segment < segments;
         segment += static_cast<int>(gridDim.y)) {
      const int y0 = segment * segment_rows;
      const int rows_out = imin(segment_rows, height - y0);
      const int rows_in = rows_out + 2 * R;
      // Input row i of the segment is image row y0 - R + i; outside the
      // image (or past what the segment needs) it reads as zeros.
      const auto load = [&](int i) {
        const int y = y0 - R + i;
        if (in_image && i < rows_in && y >= 0 && y < height) {
          return *reinterpret_cast<const uint4*>(gIn + static_cast<std::size_t>(y) * width + x);
        }
        return make_uint4(0, 0, 0, 0);
      };
      // Slot s holds the input row i with i % kN == s; slot kN - 1 starts as
      // row -1, all zeros, which the first step drops.
      uint4 ring[kN];
#pragma unroll
      for (int k = 0; k < kN - 1; ++k) ring[k] = load(k);
      ring[kN - 1] = make_uint4(0, 0, 0, 0);
      unsigned cs[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
      for (int k = 0; k < 2 * R; ++k) slide_columns(cs, ring[k], make_uint4(0, 0, 0, 0));

      for (int base = 0; base < rows_out; base += kN) {
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          const int t = base + k;  // output row y0 + t; the same on every lane
          if (t >= rows_out) break;
          // Enter input row t + 2R, leave row t - 1, and refill the slot.
          slide_columns(cs, ring[(k + 2 * R) % kN], ring[(k + kN - 1) % kN]);
          ring[(k + kN - 1) % kN] = load(t + kN - 1);
          const int y = y0 + t;
          // The same on every lane; all constants but in the R rows at the
          // top and bottom.
          const unsigned count_y = stream_window_count(y, R, height);
          RowDivisors d{S::kArea / 2, blur_magic(S::kArea), blur_magic(S::kWindow)};
          if (y - R < 0 || y + R >= height) {
            d = RowDivisors{S::kWindow * count_y / 2, blur_magic(S::kWindow * count_y),
                            blur_magic(count_y)};
          }
          emit_row<R>(cs, gOut + static_cast<std::size_t>(y) * width, x, width, count_y, d, owner);
        }
      }
    }
  }
}

}  // namespace
}  // namespace loom::kernels::blur_detail
