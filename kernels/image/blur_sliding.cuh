#pragma once
// The sliding box blur, what "sliding" runs and what automatic runs outside
// the tiled radii (blur.hpp describes it); launched from blur_sliding.cu. A
// header so that the CPU test can run its own code under an emulation of
// warps (test_blur_emulated.cpp).
//
// A warp is a task: a group of strips of 16 columns (one a lane, 512
// columns a warp) over a segment of rows of one plane. Each lane walks down
// its strip, and per output row:
//  - vertical: the 16 column sums of the window, 16 bits each (at most
//    (2r + 1) 255 <= 65025), packed two to a word, gain the row entering the
//    window and lose the row leaving it: two 16-byte loads, the second of a
//    row this warp read 2r + 1 rows earlier (L1 or L2). No ring of rows in
//    registers, so any radius costs the same a row; a segment starts with
//    2r loads that fill its first window.
//  - horizontal: each lane's 16 inclusive prefix sums of the column sums, a
//    5-step shuffle scan of the lanes' totals, and the window sum of column
//    c as P[c + r] - P[c - r - 1]: with r = 16 q + S, P[c + r] is element
//    (j + S) % 16 of lane l + q or l + q + 1, and P[c - r - 1] element
//    (j + 15 - S) % 16 of lane l - q - 1 or l - q: one shuffle each with a
//    compile-time element (the kernel is a template on S = r % 16) and the
//    lanes' scanned offsets folded into four constants a row. Lanes whose
//    windows reach past the warp's 32 strips only lend: a warp writes
//    31 - 2q - (S > 0) strips (16 at r = 127).
//  - division: interior pixels (window inside the image) divide by
//    (2r + 1)^2 with one multiply-high (slide_divisor, exact for every sum);
//    pixels within r of a border, by their in-image count cx cy in two
//    steps, floor(floor(n / cy) / cx), with reciprocals of at most 255 (cx's
//    from a 1 KB table in global memory, L1-resident).
//  - memory: rows go in pairs whose steps interleave (two rows' latencies
//    overlap in one warp); a pair's loads are issued one pair ahead, and
//    entering rows are prefetched into L2 kSlidePrefetch rows ahead, so that
//    a few warps an SM keep enough DRAM reads in flight. The segment's first
//    window is filled kSlideFill rows at a time.
// Image widths that are a multiple of 16 with 16-byte aligned pointers load
// and store 16 bytes a lane; any other shape and alignment, bytes (a slower
// path with the same arithmetic). Widths of at least 2 where r >= 1 (the
// two-step division needs cx >= 2; blur.cu sends 1-pixel columns elsewhere).
#include <cstddef>
#include <cstdint>

namespace loom::kernels::blur_detail {
namespace {

constexpr int kSlideStrip = 16;  // columns a lane owns
constexpr int kSlideLanes = 32;
constexpr int kSlideWarps = 4;  // warps a block; each runs its own tasks
constexpr int kSlideThreads = kSlideLanes * kSlideWarps;
constexpr int kSlidePrefetch = 12;    // rows between an entering row's L2 prefetch and its load
constexpr int kSlideFill = 8;         // the first window's rows loaded before any is added
constexpr int kSlideMaxRadius = 127;  // 16-bit column sums; counts fit a byte
constexpr unsigned kSlideMask = 0xFFFFFFFFU;

constexpr int slide_min(int a, int b) { return a < b ? a : b; }
constexpr int slide_max(int a, int b) { return a > b ? a : b; }

__host__ __device__ inline std::uint32_t slide_mulhi(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);  // one IMAD.HI (the 64-bit product's high word costs more)
#else
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(a) * b) >> 32);
#endif
}

/// floor(n / d) for n < 256 d and 1 <= d <= 65025 (so n < 2^24) as byte
/// `byte` of mulhi(n + addend, magic):
///  - d in 2..256: magic = ceil(2^32 / d) <= 2^31, error e = magic d - 2^32
///    < d, exact while n e < 2^32 (n d < 2^24);
///  - d > 256: magic = ceil(2^40 / d) < 2^32, and the quotient is byte 1
///    (the shift by 8 is the byte's place), exact while n e < 2^40
///    (n e < 256 d^2 <= 256 * 65025^2 < 2^40);
///  - d = 1: magic = 2^32 - 1 and addend 1: mulhi(n + 1, 2^32 - 1) = n.
/// The rounding's d / 2 rides in the addend (the kernel adds it with the
/// window sum). test_blur_emulated.cpp checks both ends of every quotient
/// of every d.
struct SlideDivisor {
  std::uint32_t magic;
  std::uint32_t addend;  // d / 2 for the rounding (1 for d = 1)
  std::uint32_t byte;    // where the quotient lies in the multiply-high
};

__host__ __device__ inline SlideDivisor slide_divisor(std::uint32_t d) {
  if (d <= 1) return SlideDivisor{0xFFFFFFFFU, 1U, 0U};
  if (d <= 256) return SlideDivisor{0xFFFFFFFFU / d + 1U, d / 2, 0U};
  const std::uint64_t magic = ((std::uint64_t{1} << 40) - 1) / d + 1;
  return SlideDivisor{static_cast<std::uint32_t>(magic), d / 2, 1U};
}

/// round-half-up sum / d through the divisor, as the kernel does it.
__host__ __device__ inline unsigned slide_average(unsigned sum, const SlideDivisor& d) {
  return (slide_mulhi(sum + d.addend, d.magic) >> (8 * d.byte)) & 0xFFU;
}

/// ceil(2^32 / d) for 2 <= d <= 255: floor(n / d) = mulhi(n, magic) for
/// n < 2^24 (the error is below d, and n d < 2^32). d < 2 gets 2^32 - 1,
/// which divides by 1 when 1 is added to n (the kernel's cy = 1 rows).
__host__ __device__ constexpr std::uint32_t slide_small_magic(unsigned d) {
  return d < 2 ? 0xFFFFFFFFU : 0xFFFFFFFFU / d + 1U;
}

/// slide_small_magic(d) for d = 0..255: the border pixels' second step,
/// looked up by the column count (L1-resident).
struct SlideMagics {
  std::uint32_t of[256];
};

constexpr SlideMagics slide_magics() {
  SlideMagics t{};
  for (unsigned d = 0; d < 256; ++d) t.of[d] = slide_small_magic(d);
  return t;
}

__device__ constexpr SlideMagics kSlideMagics = slide_magics();

/// A border pixel's average: n = sum + cx cy / 2 (+ 1 where cy = 1), then
/// floor(floor(n / cy) / cx) = floor(n / (cx cy)); cx >= 2.
__host__ __device__ inline unsigned slide_edge_divide(unsigned n, std::uint32_t magic_cy,
                                                      std::uint32_t magic_cx) {
  return slide_mulhi(slide_mulhi(n, magic_cy), magic_cx);
}

/// Pixels of the window around p inside [0, extent); at least 1, so that
/// columns outside the image (computed, never stored) index the table safely.
__host__ __device__ inline int slide_count(int p, int r, int extent) {
  return slide_max(slide_min(p + r, extent - 1) - slide_max(p - r, 0) + 1, 1);
}

// Asks L2 for the line holding p (no register, no wait): DRAM reads in
// flight without warps to hold them. Nothing on the CPU emulation.
__device__ __forceinline__ void slide_prefetch(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// The strip's 16 bytes at offset `at` of the plane; zeros where not
// `valid` (the row or the strip lies outside the image). kVector: one
// 16-byte load; else bytes up to the width (`n` of them), zeros past it.
template <bool kVector>
__device__ __forceinline__ uint4 slide_load(const std::uint8_t* gIn, long long at, bool valid,
                                            int n) {
  if (!valid) return make_uint4(0, 0, 0, 0);
  if constexpr (kVector) {
    return *reinterpret_cast<const uint4*>(gIn + at);
  } else {
    unsigned w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < kSlideStrip; ++i) {
      if (i < n) w[i / 4] |= static_cast<unsigned>(gIn[at + i]) << (8 * (i % 4));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// Column sums (word m: columns 2m, 2m + 1) gain `in` and lose `out`. Every
// 16-bit lane ends in [0, 65535], so the 32-bit arithmetic, wrapping or
// not, is exact lane by lane.
__device__ __forceinline__ void slide_column_sums(unsigned (&v)[8], uint4 in, uint4 out) {
  const unsigned a[4] = {in.x, in.y, in.z, in.w};
  const unsigned b[4] = {out.x, out.y, out.z, out.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    v[2 * w] += __byte_perm(a[w], 0, 0x4140) - __byte_perm(b[w], 0, 0x4140);
    v[2 * w + 1] += __byte_perm(a[w], 0, 0x4342) - __byte_perm(b[w], 0, 0x4342);
  }
}

__device__ __forceinline__ void slide_add(unsigned (&v)[8], uint4 in) {
  const unsigned a[4] = {in.x, in.y, in.z, in.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    v[2 * w] += __byte_perm(a[w], 0, 0x4140);
    v[2 * w + 1] += __byte_perm(a[w], 0, 0x4342);
  }
}

// What a lane keeps for its whole task.
struct SlideLane {
  int lane;
  int s;  // r % 16
  int x;  // the strip's first column (negative or past the width: a lender outside the image)
  int plus0, plus1, minus0, minus1;  // lanes l + q, l + q + 1, l - q, l - q - 1 (mod 32)
  unsigned counts[4];                // cx of the strip's 16 columns, a byte each
  bool owner;                        // writes its strip
  bool interior;  // every in-image column's window lies inside the image horizontally
};

// What a row shares across the warp.
struct SlideRowDivisors {
  SlideDivisor area;       // of (2r + 1)^2, for interior pixels
  bool interior;           // the row's window lies inside the image vertically
  unsigned cy;             // rows of the window inside the image
  std::uint32_t magic_cy;  // slide_small_magic(cy)
  unsigned bias;           // (cy == 1) - area.addend: from the window sums to n
};

/// The instantiation for any r % 16 (a runtime S), with byte accesses: for
/// widths that are not a multiple of 16 and unaligned pointers.
constexpr int kSlideGeneric = kSlideStrip;

// N consecutive output rows of the strip from their column sums `v[n]`
// (every lane calls it: the shuffles need the whole warp); owners store row
// n at gRow + n * width (gRow: the strip's first pixel). The rows' steps
// interleave, so that one row's shuffles and multiply-highs fill the other's
// latencies. `d.interior`: every one of the N rows' windows lies inside the
// image vertically.
template <int S, int N>
__device__ __forceinline__ void slide_rows(const unsigned (&v)[N][8], const SlideLane& L,
                                           const SlideRowDivisors (&d)[N], std::uint8_t* gRow,
                                           int width) {
  constexpr bool kGeneric = S == kSlideGeneric;
  const int s = kGeneric ? L.s : S;
  const unsigned addend = d[0].area.addend;
  // Inclusive prefix sums of the strip's column sums (below 2^20).
  unsigned p[N][kSlideStrip];
#pragma unroll
  for (int n = 0; n < N; ++n) {
    p[n][0] = v[n][0] & 0xFFFFU;
    p[n][1] = p[n][0] + (v[n][0] >> 16);
#pragma unroll
    for (int m = 1; m < 8; ++m) {
      p[n][2 * m] = p[n][2 * m - 1] + (v[n][m] & 0xFFFFU);
      p[n][2 * m + 1] = p[n][2 * m] + (v[n][m] >> 16);
    }
  }
  // The strips left of this one: an exclusive scan of the lanes' totals.
  unsigned total[N];
#pragma unroll
  for (int n = 0; n < N; ++n) total[n] = p[n][kSlideStrip - 1];
#pragma unroll
  for (int delta = 1; delta < kSlideLanes; delta *= 2) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const unsigned t = __shfl_up_sync(kSlideMask, total[n], delta);
      if (L.lane >= delta) total[n] += t;
    }
  }
  // The offsets of the lanes each window reads from, folded into constants:
  // window(j) = p[e+] of lane l + q + A - p[e-] of lane l - q - B + c[A][B]
  // (with the area's rounding addend).
  unsigned c[N][2][2];
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const unsigned before = total[n] - p[n][kSlideStrip - 1];
    const unsigned plus0 = __shfl_sync(kSlideMask, before, L.plus0);
    unsigned plus1 = 0;
    if (kGeneric || S > 0) plus1 = __shfl_sync(kSlideMask, before, L.plus1);
    unsigned minus0 = 0;
    if (kGeneric || S < kSlideStrip - 1) minus0 = __shfl_sync(kSlideMask, before, L.minus0);
    const unsigned minus1 = __shfl_sync(kSlideMask, before, L.minus1);
    c[n][0][0] = plus0 - minus0 + addend;
    c[n][0][1] = plus0 - minus1 + addend;
    c[n][1][0] = plus1 - minus0 + addend;
    c[n][1][1] = plus1 - minus1 + addend;
  }

  // Window sums plus the addend (below 2^24 + 2^15).
  unsigned sums[N][kSlideStrip];
#pragma unroll
  for (int j = 0; j < kSlideStrip; ++j) {
    const bool a = j + s >= kSlideStrip;  // P[c + r] lies in lane l + q + 1
    const bool b = j < s + 1;             // P[c - r - 1] lies in lane l - q - 1
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const unsigned hi =
          __shfl_sync(kSlideMask, p[n][(j + s) % kSlideStrip], a ? L.plus1 : L.plus0);
      const unsigned lo = __shfl_sync(kSlideMask, p[n][(j + kSlideStrip - 1 - s) % kSlideStrip],
                                      b ? L.minus1 : L.minus0);
      sums[n][j] = hi - lo + c[n][a ? 1 : 0][b ? 1 : 0];
    }
  }

  // Lenders' results are never stored: they take the interior path, so that
  // only the warps that hold border strips diverge.
  const bool fast = d[0].interior && (L.interior || !L.owner);
  unsigned quotients[N][kSlideStrip];
  unsigned place = 0;  // the quotients' byte
  if (fast) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
      for (int j = 0; j < kSlideStrip; ++j) {
        quotients[n][j] = slide_mulhi(sums[n][j], d[0].area.magic);
      }
    }
    place = d[0].area.byte;
  } else {
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
      for (int j = 0; j < kSlideStrip; ++j) {
        const unsigned cx = (L.counts[j / 4] >> (8 * (j % 4))) & 0xFFU;
        const unsigned count = sums[n][j] + ((cx * d[n].cy) >> 1) + d[n].bias;
        quotients[n][j] = slide_edge_divide(count, d[n].magic_cy, kSlideMagics.of[cx]);
      }
    }
  }
  // Byte `place` of each quotient, four to a word.
  const unsigned pick = place * 0x11U + 0x40U;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    unsigned w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w[k] =
          __byte_perm(__byte_perm(quotients[n][4 * k], quotients[n][4 * k + 1], pick),
                      __byte_perm(quotients[n][4 * k + 2], quotients[n][4 * k + 3], pick), 0x5410);
    }
    if (!L.owner) continue;
    std::uint8_t* row = gRow + static_cast<std::ptrdiff_t>(n) * width;
    if constexpr (!kGeneric) {
      *reinterpret_cast<uint4*>(row) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      const int tail = width - L.x;
#pragma unroll
      for (int i = 0; i < kSlideStrip; ++i) {
        if (i < tail) row[i] = static_cast<std::uint8_t>(w[i / 4] >> (8 * (i % 4)));
      }
    }
  }
}

/// Strips a warp writes at radius r: the lanes whose windows stay inside the
/// warp's 32 strips.
__host__ __device__ constexpr int slide_outputs(int r) {
  return kSlideLanes - 1 - 2 * (r / kSlideStrip) - (r % kSlideStrip > 0 ? 1 : 0);
}

/// The kernel's tasks (warps' walks) for this image and segment length.
inline long long slide_tasks(long long planes, int height, int width, int r, int segment_rows) {
  const long long strips = (width + kSlideStrip - 1) / kSlideStrip;
  const long long groups = (strips + slide_outputs(r) - 1) / slide_outputs(r);
  return planes * ((height + segment_rows - 1) / segment_rows) * groups;
}

/// Rows a warp walks. Each segment first reads 2r rows to fill its window
/// (from L2 mostly), so longer segments waste less; but the kernel is
/// latency-bound (Nsight Compute on an H100 at r = 64: 10% achieved
/// occupancy, a third of the stalls on dependent latency), so more warps in
/// flight win more than the fill costs. Measured on an H100 at 4096^2 (rows
/// 16 to 256), the best was 16 rows to r = 8, 32 at r = 64 and 64 at r = 127:
/// the largest power of two below r, at least 16, at most 256, and only
/// while the tasks stay at 4 warps an SM or more.
inline int slide_segment_rows(long long planes, int height, int width, int r, int sm_count) {
  const long long sms = sm_count > 0 ? sm_count : 1;
  int rows = 16;
  while (2 * rows < r && rows < 256 && 2 * rows < height &&
         slide_tasks(planes, height, width, r, 2 * rows) >= 4 * sms) {
    rows *= 2;
  }
  return rows;
}

/// Tasks, in order: the strip group (fastest), the segment of rows, the
/// plane. Grid: any number of blocks of up to kSlideThreads threads, a
/// multiple of 32 (each warp takes task blockIdx.x * warps + warp, then
/// strides by the grid's warps). S = r % 16 with 16-byte accesses (width %
/// 16 == 0, 16-byte aligned pointers), or kSlideGeneric (any r % 16, bytes).
/// r = 16 q + (r % 16) <= kSlideMaxRadius; width >= 2 where r >= 1.
template <int S>
__global__ void __launch_bounds__(kSlideThreads)
    blur_sliding(const std::uint8_t* __restrict__ gSrc, std::uint8_t* __restrict__ gDst, int planes,
                 int height, int width, int radius, int segment_rows) {
  static_assert(S >= 0 && S <= kSlideGeneric, "S is r % 16, or kSlideGeneric");
  constexpr bool kVector = S != kSlideGeneric;
  const int lane = static_cast<int>(threadIdx.x) % kSlideLanes;
  const int warp = static_cast<int>(threadIdx.x) / kSlideLanes;
  const int warps = static_cast<int>(blockDim.x) / kSlideLanes;
  const int r = radius;
  const int q = r / kSlideStrip;
  const int first = q + 1;  // the first lane that writes
  const int outputs = slide_outputs(r);
  const int strips = (width + kSlideStrip - 1) / kSlideStrip;
  const int groups = (strips + outputs - 1) / outputs;
  const int segments = (height + segment_rows - 1) / segment_rows;
  const long long tasks = static_cast<long long>(planes) * segments * groups;
  const auto window = static_cast<unsigned>(2 * r + 1);
  const SlideDivisor area = slide_divisor(window * window);
  const std::uint32_t magic_window = slide_small_magic(window);
  const std::size_t plane_size = static_cast<std::size_t>(height) * width;
  const long long span = static_cast<long long>(window) * width;  // entering to leaving row

  SlideLane L{};
  L.lane = lane;
  L.s = r % kSlideStrip;
  L.plus0 = (lane + q) & (kSlideLanes - 1);
  L.plus1 = (lane + q + 1) & (kSlideLanes - 1);
  L.minus0 = (lane - q) & (kSlideLanes - 1);
  L.minus1 = (lane - q - 1) & (kSlideLanes - 1);

  for (long long task = static_cast<long long>(blockIdx.x) * warps + warp; task < tasks;
       task += static_cast<long long>(gridDim.x) * warps) {
    const auto group = static_cast<int>(task % groups);
    const long long rest = task / groups;
    const auto segment = static_cast<int>(rest % segments);
    const auto plane = static_cast<std::size_t>(rest / segments);
    const int strip = group * outputs + lane - first;
    const bool in_image = strip >= 0 && strip < strips;
    L.x = strip * kSlideStrip;
    L.owner = in_image && lane >= first && lane < first + outputs;
    L.interior = L.x - r >= 0 && slide_min(L.x + kSlideStrip - 1, width - 1) + r <= width - 1;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      unsigned word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        word |= static_cast<unsigned>(slide_count(L.x + 4 * w + b, r, width)) << (8 * b);
      }
      L.counts[w] = word;
    }
    const std::uint8_t* gIn = gSrc + plane * plane_size;
    std::uint8_t* gOut = gDst + plane * plane_size;
    const int y0 = segment * segment_rows;
    const int rows = slide_min(segment_rows, height - y0);
    const int tail = width - L.x;  // the strip's columns inside the image, if below 16

    // The first window but its last row: rows y0 - r .. y0 + r - 1 in the
    // image, kSlideFill loads in flight at a time, after L2 prefetches of
    // all of them and of the rows that enter first.
    unsigned v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    {
      const int end = slide_min(y0 + r, height);
      int y = slide_max(y0 - r, 0);
      long long at = static_cast<long long>(y) * width + L.x;
      if (in_image) {
        const int last = slide_min(y0 + r + kSlidePrefetch, height);
        long long ahead_at = at;
        for (int k = y; k < last; ++k, ahead_at += width) slide_prefetch(gIn + ahead_at);
      }
      for (; y + kSlideFill <= end;
           y += kSlideFill, at += static_cast<long long>(kSlideFill) * width) {
        uint4 rows_in[kSlideFill];
#pragma unroll
        for (int k = 0; k < kSlideFill; ++k) {
          rows_in[k] =
              slide_load<kVector>(gIn, at + static_cast<long long>(k) * width, in_image, tail);
        }
#pragma unroll
        for (int k = 0; k < kSlideFill; ++k) slide_add(v, rows_in[k]);
      }
      for (; y < end; ++y, at += width) slide_add(v, slide_load<kVector>(gIn, at, in_image, tail));
    }

    // Output row y0 + t: row y0 + t + r enters, row y0 + t - r - 1 leaves
    // (none for t = 0: the first window was filled above). Rows go in pairs
    // (a last one alone); a pair's loads are issued while the pair before it
    // is computed.
    long long enter_at = static_cast<long long>(y0 + r) * width + L.x;
    long long leave_at = enter_at - span;
    int ahead = 0;  // the next row whose loads are issued
    const auto load_ahead = [&](uint4& in, uint4& out) {
      const int y = y0 + ahead;
      const bool now = in_image && ahead < rows;
      in = slide_load<kVector>(gIn, enter_at, now && y + r < height, tail);
      out = slide_load<kVector>(gIn, leave_at, now && ahead >= 1 && y - r - 1 >= 0, tail);
      ++ahead;
      enter_at += width;
      leave_at += width;
    };
    // Rows y .. y + n - 1 share one divisor path: interior when all are.
    const auto divisors = [&](int y, int n, SlideRowDivisors& d) {
      d = SlideRowDivisors{area, y - r >= 0 && y + n - 1 + r <= height - 1, window, magic_window,
                           0U - area.addend};
      if (!d.interior) {
        d.cy = static_cast<unsigned>(slide_count(y, r, height));
        d.magic_cy = slide_small_magic(d.cy);
        d.bias = (d.cy == 1 ? 1U : 0U) - area.addend;
      }
    };
    uint4 in[2];
    uint4 out[2];
    load_ahead(in[0], out[0]);
    load_ahead(in[1], out[1]);
    std::uint8_t* gRow = gOut + static_cast<std::size_t>(y0) * width + L.x;
    int t = 0;
    for (; t + 2 <= rows; t += 2) {
      unsigned pair[2][8];
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        slide_column_sums(v, in[n], out[n]);
#pragma unroll
        for (int m = 0; m < 8; ++m) pair[n][m] = v[m];
      }
      load_ahead(in[0], out[0]);
      load_ahead(in[1], out[1]);
      // Rows t + kSlidePrefetch and the next enter later: to L2 now
      // (enter_at is row t + 4's).
      if (in_image && y0 + t + kSlidePrefetch + r < height) {
        slide_prefetch(gIn + (enter_at + static_cast<long long>(kSlidePrefetch - 4) * width));
      }
      if (in_image && y0 + t + kSlidePrefetch + 1 + r < height) {
        slide_prefetch(gIn + (enter_at + static_cast<long long>(kSlidePrefetch - 3) * width));
      }
      SlideRowDivisors d[2];
      divisors(y0 + t, 2, d[0]);
      divisors(y0 + t + 1, 1, d[1]);
      slide_rows<S, 2>(pair, L, d, gRow, width);
      gRow += 2LL * width;
    }
    if (t < rows) {
      unsigned last[1][8];
      slide_column_sums(v, in[0], out[0]);
#pragma unroll
      for (int m = 0; m < 8; ++m) last[0][m] = v[m];
      SlideRowDivisors d[1];
      divisors(y0 + t, 1, d[0]);
      slide_rows<S, 1>(last, L, d, gRow, width);
    }
  }
}

}  // namespace
}  // namespace loom::kernels::blur_detail
