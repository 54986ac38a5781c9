#pragma once
// The streaming box blur, what "tiled" runs when the image takes 16-byte
// accesses (blur.hpp describes it); launched from blur.cu. A header so that
// the CPU test can run it under an emulation of a warp (test_blur_emulated.cpp).
//
// A block is one warp; lane l owns a 16-column strip of the image and walks
// down a segment of output rows. Each row costs one 16-byte load and one
// 16-byte store a lane: the vertical window slides over a ring of the last
// rows read, kept in shared memory and filled by cp.async kAhead rows ahead
// of their use (loads in flight hold no registers, so 11 to 32 warps fit an
// SM), the column sums of the strip are packed two 16-bit sums to a word,
// and the horizontal window takes the R columns either side from the
// neighbouring lanes by shuffles. Lanes 0 and 31 only lend their column
// sums: a warp writes 30 strips, so no lane needs a neighbour outside its
// warp.
#include <cstdint>

namespace loom::kernels::blur_detail {
namespace {

constexpr int kStripBytes = 16;
constexpr int kWarpLanes = 32;
constexpr int kStripsPerWarp = kWarpLanes - 2;
// Rows a warp writes where no device figure is known.
constexpr int kSegmentRows = 24;

// The rows a warp writes, for `planes` planes of `height` rows and `groups`
// groups of kStripsPerWarp strips, on a device that holds `slots` of the
// kernel's one-warp blocks at once, over 4, 8, ..., 32 rows:
//  - where even kSegmentRows-row segments would fill under a quarter of the
//    slots, the device is latency-bound: the fewest waves of blocks times
//    the rows each warp walks (its segment and the 2R halo rows), the
//    shorter on a tie;
//  - else the fewest waves (a block that finds no room waits for a whole
//    one to end), and among those the length nearest kSegmentRows (the
//    longer on a tie): longer segments walk fewer halo rows in all, shorter
//    ones keep more warps in flight.
// On an H100 at 4096 x 4096 (2026-12-07) each pick was the best of the
// sweep: 24 rows at R = 1..11 (0.82 of the floor at R = 1, 0.73 at R = 3,
// 0.59 at R = 7; 16 rows: 0.74 / 0.65 / 0.54, 32 rows: 0.70 / 0.60 / 0.50),
// and 28 at R = 15, where 24 rows would take two waves.
__host__ __device__ constexpr int stream_segment_rows(std::int64_t planes, std::int64_t height,
                                                      std::int64_t groups, std::int64_t slots,
                                                      int r) {
  if (slots <= 0 || planes <= 0 || height <= 0 || groups <= 0) return kSegmentRows;
  const auto blocks = [&](int rows) { return (height + rows - 1) / rows * planes * groups; };
  const bool latency_bound = 4 * blocks(kSegmentRows) < slots;
  int best = 4;
  std::int64_t best_waves = -1;
  std::int64_t best_cost = -1;
  for (int rows = 4; rows <= 32; rows += 4) {
    const std::int64_t waves = (blocks(rows) + slots - 1) / slots;
    const std::int64_t walked = (height < rows ? height : rows) + 2 * r;
    const int off = rows > kSegmentRows ? rows - kSegmentRows : kSegmentRows - rows;
    const int best_off = best > kSegmentRows ? best - kSegmentRows : kSegmentRows - best;
    bool better = best_cost < 0;
    if (!better && latency_bound) better = waves * walked < best_cost;
    if (!better && !latency_bound) {
      better = waves < best_waves || (waves == best_waves && off <= best_off);
    }
    if (better) {
      best = rows;
      best_waves = waves;
      best_cost = waves * walked;
    }
  }
  return best;
}
// Rows whose copies are in flight ahead of their use (cp.async groups).
constexpr int kAhead = 6;
constexpr unsigned kFullMask = 0xFFFFFFFFU;

// The radii the streaming kernels take: the R columns either side of a
// strip lie in the neighbouring lanes' strips.
constexpr int kStreamMaxRadius = 15;
constexpr int kPackedMaxRadius = 7;

constexpr int imin(int a, int b) { return a < b ? a : b; }
constexpr int imax(int a, int b) { return a > b ? a : b; }

template <int R>
struct StreamShape {
  static_assert(R >= 1 && R <= kStreamMaxRadius,
                "the halo comes from one neighbouring lane's 16 columns");
  // Window sums two to a word while (2R + 1)^2 255 fits 16 bits; 32-bit
  // sums a column past that.
  static constexpr bool kPacked = R <= kPackedMaxRadius;
  static constexpr int kWindow = 2 * R + 1;
  static constexpr unsigned kArea = kWindow * kWindow;
  // Ring rows: the window's, the row leaving it, and kAhead - 1 in flight.
  static constexpr int kRing = kWindow + kAhead;
  // Packed column-sum words lent by each neighbour: the R columns nearest it.
  static constexpr int kHaloWords = (R + 1) / 2;
  static constexpr int kExtWords = 8 + 2 * kHaloWords;
};

/// floor(n / c) for 2 <= c and n c < 2^32 as floor(n * m / 2^32): with
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

__device__ __forceinline__ unsigned pack_bytes(unsigned a, unsigned b, unsigned c, unsigned d) {
  return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}

// The window sums of the strip's 16 columns plus `half` (the rounding),
// from the extended row `ext` (column u is strip column u - 2 kHaloWords):
// two columns a word while they fit 16 bits, unpacked at the end.
template <int R>
__device__ __forceinline__ void packed_window_sums(const unsigned* ext, unsigned half,
                                                   unsigned (&sums)[kStripBytes]) {
  constexpr int kOrigin = 2 * StreamShape<R>::kHaloWords;
  unsigned s = half | (half << 16);
#pragma unroll
  for (int dc = -R; dc <= R; ++dc) s += column_pair(ext, kOrigin + dc);
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    if (m > 0) {
      const int u = 2 * (m - 1) + kOrigin;
      s += column_pair(ext, u + R + 1) + column_pair(ext, u + R + 2) - column_pair(ext, u - R) -
           column_pair(ext, u - R + 1);
    }
    sums[2 * m] = s & 0xFFFFU;
    sums[2 * m + 1] = s >> 16;
  }
}

// The same past kPackedMaxRadius, 32 bits a column: at most 31^2 255 plus
// the half, so the reciprocals stay exact (n e < 2^32 for every divisor's
// error e, see blur_magic).
template <int R>
__device__ __forceinline__ void wide_window_sums(const unsigned* ext, unsigned half,
                                                 unsigned (&sums)[kStripBytes]) {
  constexpr int kOrigin = 2 * StreamShape<R>::kHaloWords;
  const auto column = [&](int u) {
    return (u % 2 == 0) ? (ext[u / 2] & 0xFFFFU) : (ext[u / 2] >> 16);
  };
  unsigned s = half;
#pragma unroll
  for (int dc = -R; dc <= R; ++dc) s += column(kOrigin + dc);
  sums[0] = s;
#pragma unroll
  for (int j = 1; j < kStripBytes; ++j) {
    s += column(kOrigin + j + R) - column(kOrigin + j - 1 - R);
    sums[j] = s;
  }
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

  unsigned sums[kStripBytes];
  if constexpr (S::kPacked) {
    packed_window_sums<R>(ext, d.half, sums);
  } else {
    wide_window_sums<R>(ext, d.half, sums);
  }
  unsigned q[kStripBytes];
#pragma unroll
  for (int j = 0; j < kStripBytes; ++j) q[j] = divide_by_magic(sums[j], d.magic);
  // The strips at the image's left and right edges redo their outer R
  // columns, whose windows have (j + R + 1) and (16 - j + R) columns in the
  // image (no window passes both edges: the image is wider than 2R, see
  // box_blur_stream_takes).
  if (x == 0) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      q[j] = edge_quotient(sums[j], static_cast<unsigned>(j + R + 1), count_y, d);
    }
  }
  if (x + kStripBytes == width) {
#pragma unroll
    for (int j = kStripBytes - R; j < kStripBytes; ++j) {
      q[j] = edge_quotient(sums[j], static_cast<unsigned>(kStripBytes - j + R), count_y, d);
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

__device__ __forceinline__ void copy_strip_async(uint4* slot, const std::uint8_t* src) {
#if defined(__CUDA_ARCH__)
  const auto to = static_cast<unsigned>(__cvta_generic_to_shared(slot));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(src) : "memory");
#else
  *slot = *reinterpret_cast<const uint4*>(src);
#endif
}

__device__ __forceinline__ void commit_rows() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `Pending` of this lane's committed rows are in flight.
template <int Pending>
__device__ __forceinline__ void wait_rows() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

// Grid: x over groups of kStripsPerWarp strips, y over segments of
// `segment_rows` rows (>= 1), z over planes (y and z stride when they pass
// the grid's limits). Needs width % 16 == 0 and more than 2R, height >= 2
// (so that cy >= 2: the reciprocals need a divisor of at least 2) and
// 16-byte aligned pointers. Each lane reads back only the 16 bytes it
// copied, so its own cp.async.wait_group is the only ordering needed.
template <int R>
__global__ void __launch_bounds__(kWarpLanes)
    blur_stream(const std::uint8_t* __restrict__ gSrc, std::uint8_t* __restrict__ gDst, int planes,
                int height, int width, int segment_rows) {
  using S = StreamShape<R>;
  constexpr int kN = S::kRing;
  __shared__ uint4 ring[kN][kWarpLanes];
  const int lane = static_cast<int>(threadIdx.x);
  const int strips = width / kStripBytes;
  const int strip = static_cast<int>(blockIdx.x) * kStripsPerWarp + lane - 1;
  const bool in_image = strip >= 0 && strip < strips;
  const bool owner = lane >= 1 && lane <= kStripsPerWarp && strip < strips;
  const int x = strip * kStripBytes;
  const int segments = (height + segment_rows - 1) / segment_rows;
  const std::size_t plane_size = static_cast<std::size_t>(height) * width;
  const uint4 zero = make_uint4(0, 0, 0, 0);

  for (int plane = static_cast<int>(blockIdx.z); plane < planes;
       plane += static_cast<int>(gridDim.z)) {
    const std::uint8_t* gIn = gSrc + plane * plane_size;
    std::uint8_t* gOut = gDst + plane * plane_size;
    for (int segment = static_cast<int>(blockIdx.y); segment < segments;
         segment += static_cast<int>(gridDim.y)) {
      const int y0 = segment * segment_rows;
      const int rows_out = imin(segment_rows, height - y0);
      const int rows_in = rows_out + 2 * R;
      // Input row i (image row y0 - R + i) goes to slot (i + 1) % kN, as
      // its own group; rows outside the image read as zeros, and rows past
      // the segment's needs are never read (an empty group keeps the count).
      const auto fetch = [&](int i) {
        const int y = y0 - R + i;
        if (i < rows_in) {
          uint4* slot = &ring[(i + 1) % kN][lane];
          if (in_image && y >= 0 && y < height) {
            copy_strip_async(slot, gIn + static_cast<std::size_t>(y) * width + x);
          } else {
            *slot = zero;
          }
        }
        commit_rows();
      };
      ring[0][lane] = zero;  // input row -1, which the first step drops
#pragma unroll
      for (int i = 0; i < 2 * R + kAhead; ++i) fetch(i);
      wait_rows<kAhead>();
      unsigned cs[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
      for (int i = 0; i < 2 * R; ++i) slide_columns(cs, ring[i + 1][lane], zero);

      int enter = (2 * R + 1) % kN;  // slot of input row t + 2R
      int leave = 0;                 // slot of input row t - 1
      for (int t = 0; t < rows_out; ++t) {
        wait_rows<kAhead - 1>();
        slide_columns(cs, ring[enter][lane], ring[leave][lane]);
        // The leaving slot's values are in registers (the slide used them):
        // it takes input row t + 2R + kAhead.
        fetch(t + 2 * R + kAhead);
        enter = enter + 1 == kN ? 0 : enter + 1;
        leave = leave + 1 == kN ? 0 : leave + 1;
        const int y = y0 + t;
        const unsigned count_y = stream_window_count(y, R, height);
        RowDivisors d{S::kArea / 2, blur_magic(S::kArea), blur_magic(S::kWindow)};
        if (y - R < 0 || y + R >= height) {
          d = RowDivisors{S::kWindow * count_y / 2, blur_magic(S::kWindow * count_y),
                          blur_magic(count_y)};
        }
        emit_row<R>(cs, gOut + static_cast<std::size_t>(y) * width, x, width, count_y, d, owner);
      }
      // The next segment reuses the slots: no copy may still be landing.
      wait_rows<0>();
    }
  }
}

}  // namespace
}  // namespace loom::kernels::blur_detail
