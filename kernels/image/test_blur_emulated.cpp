// The streaming blur kernel's own code (blur_stream.cuh), the separable
// running sums' (blur_separable.cuh), the sliding kernel's
// (blur_sliding.cuh) and the banded kernel's (blur_banded.cuh), run on the CPU under the emulation
// of CUDA threads (support/emulated_cuda.hpp): every thread of a block is a fiber, blocks run
// one after another, and a shuffle is a write to a double-buffered exchange slot and a barrier. It
// checks what a GPU run would (the strip and segment arithmetic, the ring of rows, the shuffles,
// the running windows, the border counts, the divisions) against the CPU reference at small shapes;
// timing and memory-model effects are not emulated (the GPU tests cover those). The divisions are
// also checked for every sum they can meet.
#include "image/blur.hpp"  // first: CUDA's headers define the qualifiers redefined below

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "support/seed.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/emulated_cuda.hpp"

namespace loom::kernels::blur_detail {
using namespace loom::emulated;  // NOLINT: the kernel's code reads CUDA's names unqualified
}  // namespace loom::kernels::blur_detail

#include "image/blur_banded.cuh"
#include "image/blur_separable.cuh"
#include "image/blur_sliding.cuh"
#include "image/blur_stream.cuh"

namespace {

namespace emu = loom::kernels::blur_detail;
using Bytes = std::vector<std::uint8_t>;

// kernel() on the 32 lanes (one warp) of every block of `grid`.
void run_grid(dim3 grid, const std::function<void()>& kernel) {
  loom::emulated::run_grid(grid, dim3(32), kernel);
}

template <int R>
void launch(const std::uint8_t* src, std::uint8_t* dst, int planes, int h, int w, unsigned max_y,
            unsigned max_z, int segment_rows) {
  const int strips = w / emu::kStripBytes;
  const dim3 grid(static_cast<unsigned>((strips + emu::kStripsPerWarp - 1) / emu::kStripsPerWarp),
                  std::min(static_cast<unsigned>((h + segment_rows - 1) / segment_rows), max_y),
                  std::min(static_cast<unsigned>(planes), max_z));
  run_grid(grid, [&] { emu::blur_stream<R>(src, dst, planes, h, w, segment_rows); });
}

void launch(int r, const std::uint8_t* src, std::uint8_t* dst, int planes, int h, int w,
            unsigned max_y, unsigned max_z, int segment_rows = emu::kSegmentRows) {
  switch (r) {
    case 1: launch<1>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 2: launch<2>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 3: launch<3>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 4: launch<4>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 5: launch<5>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 6: launch<6>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 7: launch<7>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 8: launch<8>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 9: launch<9>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 10: launch<10>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 11: launch<11>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 12: launch<12>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 13: launch<13>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    case 14: launch<14>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
    default: launch<15>(src, dst, planes, h, w, max_y, max_z, segment_rows); break;
  }
}

struct Case {
  int planes, h, w;
  unsigned max_y = 65535;  // smaller: blocks stride over segments and planes
  unsigned max_z = 65535;
  int segment_rows = emu::kSegmentRows;
};

void check(const Case& c, int r, std::mt19937_64& rng) {
  const auto n = static_cast<std::size_t>(c.planes) * static_cast<std::size_t>(c.h) *
                 static_cast<std::size_t>(c.w);
  std::uniform_int_distribution<int> dist(0, 255);
  Bytes src(n);
  for (auto& b : src) b = static_cast<std::uint8_t>(dist(rng));
  // Saturated patches reach the largest sums the 16-bit lanes hold.
  for (std::size_t i = 0; i < n / 4; ++i) src[i] = 255;
  Bytes want(n);
  loom::kernels::box_blur_reference(src.data(), want.data(), c.planes, c.h, c.w, r);
  // 16 bytes of poison past the end: a store past the image would show.
  Bytes got(n + 16, 0xA5);
  launch(r, src.data(), got.data(), c.planes, c.h, c.w, c.max_y, c.max_z, c.segment_rows);
  std::size_t bad = 0;
  std::size_t first = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      ++bad;
      first = std::min(first, i);
    }
  }
  for (std::size_t i = n; i < got.size(); ++i) bad += got[i] != 0xA5 ? 1 : 0;
  EXPECT_EQ(bad, 0U) << "r=" << r << " planes=" << c.planes << " " << c.h << "x" << c.w
                     << " segments of " << c.segment_rows << " first mismatch at " << first;
}

TEST(BlurStreamEmulated, MatchesTheReferenceAtEveryRadius) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  // One strip (narrower than the widest window: past radius 7, with 32-bit
  // window sums, the narrowest image taken is two strips), one full warp of
  // strips and one strip more, single rows, segments exact and not, shorter
  // than the halo, and a grid that strides over segments and planes.
  const Case cases[] = {{1, 5, 16},
                        {1, 2, 32},
                        {1, 33, 48},
                        {1, 40, 496},
                        {1, 3, 496},
                        {2, 70, 64, 2, 1},
                        {1, 64, 512, 65535, 65535, 7}};
  for (int r = 1; r <= emu::kStreamMaxRadius; ++r) {
    for (const Case& c : cases) {
      if (c.w > 2 * r) check(c, r, rng);
    }
  }
}

TEST(BlurStreamEmulated, WholeSegmentsAcrossAWideImage) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  check({1, 64, 512}, 3, rng);
}

// Segments of any length: one row, shorter than the window, than the ring of
// rows in flight, and not dividing the height; with a grid that strides.
TEST(BlurStreamEmulated, SegmentsOfAnyLength) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  for (int rows : {1, 2, 5, 8, 13, 16, 24, 64}) {
    for (int r : {1, 3, 7}) {
      check({1, 37, 48, 65535, 65535, rows}, r, rng);
      check({2, 30, 64, 3, 1, rows}, r, rng);
    }
  }
}

// The segment rule. 4096 x 4096 is 9 groups of strips; the slots are an
// H100's (its occupancy at each radius: shared memory decides past R = 3).
// Where the blocks fill the device: the fewest waves, then the nearest to 24
// rows (24 through R = 11; at R = 15 24 rows take two waves of 11 blocks an
// SM, 28 one).
TEST(BlurStreamSegments, FewestWavesThenNearestTheDefault) {
  const int radii[] = {1, 2, 3, 4, 5, 6, 7, 8, 11, 15};
  const int per_sm[] = {32, 32, 32, 26, 23, 21, 19, 18, 14, 11};
  const int want[] = {24, 24, 24, 24, 24, 24, 24, 24, 24, 28};
  for (std::size_t i = 0; i < std::size(radii); ++i) {
    EXPECT_EQ(emu::stream_segment_rows(1, 4096, 9, 132 * per_sm[i], radii[i]), want[i])
        << "r=" << radii[i];
  }
  // Many planes: the fewest waves alone decide (32 rows: 73 waves, 28: 84).
  // A small image, far from filling the device: the fewest rows a warp
  // walks, the shortest segments, all in one wave.
  EXPECT_EQ(emu::stream_segment_rows(1, 40, 1, 2244, 3), 4);
  EXPECT_EQ(emu::stream_segment_rows(100, 4096, 9, 1584, 3), 32);
  EXPECT_EQ(emu::stream_segment_rows(1, 4096, 9, 0, 3), emu::kSegmentRows);  // no device figure
}

TEST(BlurStreamDivision, TheReciprocalIsExactForEveryWindowSum) {
  // Interior pixels: the area's reciprocal, for each streaming radius.
  for (int r = 1; r <= emu::kStreamMaxRadius; ++r) {
    const auto area = static_cast<unsigned>((2 * r + 1) * (2 * r + 1));
    const std::uint32_t magic = emu::blur_magic(area);
    for (unsigned s = 0; s <= 255 * area; ++s) {
      const unsigned n = s + area / 2;
      ASSERT_EQ(emu::divide_by_magic(n, magic), n / area) << "sum " << s << " area " << area;
    }
  }
  // And every count up to the largest area, for the claim in its comment.
  for (unsigned c = 2; c <= 961; ++c) {
    const std::uint32_t magic = emu::blur_magic(c);
    for (unsigned n = 0; n < (1U << 16); ++n) {
      ASSERT_EQ(emu::divide_by_magic(n, magic), n / c) << "n " << n << " count " << c;
    }
  }
}

TEST(BlurStreamDivision, EdgeColumnsDivideExactlyInEveryRow) {
  // Every count an edge strip's outer column meets (cx in R + 1..K, cy in
  // 2..K: heights of 1 run tiled_v1), every sum, against the plain formula.
  for (unsigned r = 1; r <= emu::kStreamMaxRadius; ++r) {
    const unsigned k = 2 * r + 1;
    for (unsigned cy = 2; cy <= k; ++cy) {
      const emu::RowDivisors d{k * cy / 2, emu::blur_magic(k * cy), emu::blur_magic(cy)};
      for (unsigned cx = r + 1; cx <= k; ++cx) {
        const unsigned c = cx * cy;
        for (unsigned s = 0; s <= 255 * c; ++s) {
          ASSERT_EQ(emu::edge_quotient(s + d.half, cx, cy, d), (s + c / 2) / c)
              << "r " << r << " cx " << cx << " cy " << cy << " sum " << s;
        }
      }
      // And the interior columns of the same row, by the reciprocal of K cy.
      for (unsigned s = 0; s <= 255 * k * cy; ++s) {
        ASSERT_EQ(emu::divide_by_magic(s + d.half, d.magic), (s + k * cy / 2) / (k * cy));
      }
    }
  }
}

// The separable variant's two passes, as blur.cu launches them.
void run_separable(const Bytes& src, Bytes& dst, int planes, int h, int w, int r) {
  std::vector<std::uint16_t> rows(src.size(), 0xBEEF);  // poisoned: every sum must be written
  const auto blocks = [](std::int64_t threads) {
    return dim3(
        static_cast<unsigned>((threads + emu::kSeparableThreads - 1) / emu::kSeparableThreads));
  };
  const std::int64_t all_rows = std::int64_t{planes} * h;
  const std::int64_t row_chunks = (w + emu::kRowChunk - 1) / emu::kRowChunk;
  const std::int64_t col_runs = (h + emu::kColRun - 1) / emu::kColRun;
  // Fewer blocks than chunks: each strides over several, as past 2^31 - 1.
  const auto row_blocks = static_cast<unsigned>(std::min<std::int64_t>(all_rows * row_chunks, 7));
  loom::emulated::run_grid(dim3(row_blocks), dim3(emu::kSeparableThreads),
                           [&] { emu::blur_row_sums(src.data(), rows.data(), all_rows, w, r); });
  loom::emulated::run_grid(
      blocks(std::int64_t{planes} * col_runs * w), dim3(emu::kSeparableThreads),
      [&] { emu::blur_column_sums(rows.data(), dst.data(), planes, h, w, r); });
}

TEST(BlurSeparableEmulated, MatchesTheReferenceAtRadiiAcrossTheRange) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  std::uniform_int_distribution<int> byte(0, 255);
  struct Shape {
    int planes, h, w;
  };
  // Runs exact and not (64 rows), images narrower and shorter than the
  // window, one pixel, rows of several chunks (1024 pixels).
  const Shape shapes[] = {{1, 1, 1},    {1, 37, 300}, {2, 20, 129},
                          {1, 130, 64}, {3, 5, 200},  {1, 3, 2100}};
  for (const Shape& s : shapes) {
    for (int r : {0, 1, 2, 7, 8, 9, 31, 64, 100, 127}) {
      for (bool saturated : {false, true}) {
        // Saturated rows reach the 16-bit row sums' largest at r = 127.
        if (saturated && r != 8 && r != 127) continue;
        const auto n = static_cast<std::size_t>(s.planes * s.h * s.w);
        Bytes src(n);
        for (auto& b : src) b = saturated ? 255 : static_cast<std::uint8_t>(byte(rng));
        Bytes want(n);
        loom::kernels::box_blur_reference(src.data(), want.data(), s.planes, s.h, s.w, r);
        Bytes got(n, 0xA5);
        run_separable(src, got, s.planes, s.h, s.w, r);
        ASSERT_EQ(got, want) << s.planes << " x " << s.h << " x " << s.w << " r=" << r
                             << (saturated ? " saturated" : "");
      }
    }
  }
}

// --- sliding -------------------------------------------------------------------

TEST(BlurSlidingDivision, TheAreaDivisorIsExactForEveryCountAndSum) {
  // Every divisor up to 255^2 (the kernel meets (2r + 1)^2), at both ends of
  // every quotient's run of sums: the multiply-high is monotone in the sum,
  // so agreeing there is agreeing everywhere.
  for (std::uint32_t d = 1; d <= 255U * 255U; ++d) {
    const emu::SlideDivisor div = emu::slide_divisor(d);
    for (std::uint32_t q = 0; q <= 255; ++q) {
      // The sums whose rounded average is q: (sum + d / 2) / d == q.
      const std::uint64_t lo64 = q * std::uint64_t{d} >= d / 2 ? q * std::uint64_t{d} - d / 2 : 0;
      const std::uint64_t hi64 =
          std::min<std::uint64_t>(q * std::uint64_t{d} + d - 1 - d / 2, 255 * std::uint64_t{d});
      if (lo64 > hi64) continue;
      for (const std::uint64_t sum : {lo64, hi64}) {
        const auto s32 = static_cast<unsigned>(sum);
        ASSERT_EQ(emu::slide_average(s32, div), (s32 + d / 2) / d) << "d " << d << " sum " << sum;
      }
    }
  }
}

TEST(BlurSlidingDivision, BorderPixelsDivideExactlyInTwoSteps) {
  // Every column count 2..255 (the kernel sends 1-pixel widths elsewhere)
  // with every row count 1..255, both ends of every quotient's run of sums.
  for (unsigned cy = 1; cy <= 255; ++cy) {
    const std::uint32_t magic_cy = emu::slide_small_magic(cy);
    const unsigned bias = cy == 1 ? 1 : 0;
    for (unsigned cx = 2; cx <= 255; ++cx) {
      const std::uint32_t magic_cx = emu::slide_small_magic(cx);
      const unsigned c = cx * cy;
      for (unsigned q = 0; q <= 255; ++q) {
        const unsigned lo = q * c >= c / 2 ? q * c - c / 2 : 0;
        const unsigned hi = std::min(q * c + c - 1 - c / 2, 255 * c);
        if (lo > hi) continue;
        for (const unsigned sum : {lo, hi}) {
          ASSERT_EQ(emu::slide_edge_divide(sum + c / 2 + bias, magic_cy, magic_cx),
                    (sum + c / 2) / c)
              << "cx " << cx << " cy " << cy << " sum " << sum;
        }
      }
    }
  }
}

using SlideKernel = void (*)(const std::uint8_t*, std::uint8_t*, int, int, int, int, int);

template <int... S>
constexpr std::array<SlideKernel, sizeof...(S)> slide_kernels(std::integer_sequence<int, S...>) {
  return {&emu::blur_sliding<S>...};
}

// blur_sliding<r % 16>, then blur_sliding<kSlideGeneric>, as blur_sliding.cu has them.
const auto kSlideKernels = slide_kernels(std::make_integer_sequence<int, emu::kSlideGeneric + 1>{});

struct SlideLaunch {
  int segment_rows = 0;     // 0: the kernel's own choice for 132 SMs
  int warps = 1;            // a block
  unsigned max_blocks = 0;  // 0: a warp for every task; else fewer (warps stride over tasks)
  bool generic = false;     // the byte-access instantiation even where 16-byte accesses fit
};

// The sliding kernel as blur_sliding.cu launches it: 16-byte accesses where
// the width and the pointers allow them.
void run_sliding(const std::uint8_t* src, std::uint8_t* dst, int planes, int h, int w, int r,
                 const SlideLaunch& how) {
  const int rows =
      how.segment_rows > 0 ? how.segment_rows : emu::slide_segment_rows(planes, h, w, r, 132);
  const bool vectorized = !how.generic && w % 16 == 0 &&
                          reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                          reinterpret_cast<std::uintptr_t>(dst) % 16 == 0;
  const long long tasks = emu::slide_tasks(planes, h, w, r, rows);
  long long blocks = (tasks + how.warps - 1) / how.warps;
  if (how.max_blocks > 0) blocks = std::min<long long>(blocks, how.max_blocks);
  const SlideKernel kernel =
      kSlideKernels[static_cast<std::size_t>(vectorized ? r % 16 : emu::kSlideGeneric)];
  loom::emulated::run_grid(dim3(static_cast<unsigned>(blocks)),
                           dim3(static_cast<unsigned>(32 * how.warps)),
                           [&] { kernel(src, dst, planes, h, w, r, rows); });
}

enum class Fill { random, saturated, quarter_saturated };

using Runner = std::function<void(const std::uint8_t* src, std::uint8_t* dst)>;

// A kernel (`run`) against the reference, bit for bit; `offset` shifts
// both images off 16-byte alignment; 16 poisoned bytes either side.
void check_kernel(const Runner& run, int planes, int h, int w, int r, Fill fill,
                  std::mt19937_64& rng, std::size_t offset, const std::string& how) {
  const auto n =
      static_cast<std::size_t>(planes) * static_cast<std::size_t>(h) * static_cast<std::size_t>(w);
  std::uniform_int_distribution<int> dist(0, 255);
  Bytes src(n + offset);
  for (auto& b : src) b = fill == Fill::saturated ? 255 : static_cast<std::uint8_t>(dist(rng));
  if (fill == Fill::quarter_saturated) std::fill(src.begin(), src.begin() + n / 4 + offset, 255);
  Bytes want(n);
  loom::kernels::box_blur_reference(src.data() + offset, want.data(), planes, h, w, r);
  Bytes got(n + offset + 32, 0xA5);
  run(src.data() + offset, got.data() + offset + 16);
  std::size_t bad = 0;
  std::size_t first = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (got[offset + 16 + i] != want[i]) {
      ++bad;
      first = std::min(first, i);
    }
  }
  std::size_t outside = 0;
  for (std::size_t i = 0; i < offset + 16; ++i) outside += got[i] != 0xA5 ? 1 : 0;
  for (std::size_t i = offset + 16 + n; i < got.size(); ++i) outside += got[i] != 0xA5 ? 1 : 0;
  EXPECT_EQ(bad, 0U) << "r=" << r << " planes=" << planes << " " << h << "x" << w
                     << " offset=" << offset << " " << how << " first mismatch at " << first
                     << " (row " << first / w % h << ", column " << first % w << ")";
  EXPECT_EQ(outside, 0U) << "r=" << r << ": bytes written outside the image";
}

void check_sliding(int planes, int h, int w, int r, Fill fill, std::mt19937_64& rng,
                   const SlideLaunch& how = {}, std::size_t offset = 0) {
  check_kernel([&](const std::uint8_t* src,
                   std::uint8_t* dst) { run_sliding(src, dst, planes, h, w, r, how); },
               planes, h, w, r, fill, rng, offset,
               "sliding segment_rows=" + std::to_string(how.segment_rows) +
                   " warps=" + std::to_string(how.warps) + (how.generic ? " generic" : ""));
}

TEST(BlurSlidingEmulated, EveryRadiusOnASmallImage) {
  // 0..127: every r % 16 with every lane offset q; the windows pass the
  // whole image past r = 20, so every pixel is a border pixel there; a
  // width of 5 strips (16-byte accesses) and a width of 37 (bytes).
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  for (int r = 0; r <= loom::kernels::kBlurMaxRadius; ++r) {
    check_sliding(1, 21, 80, r, Fill::quarter_saturated, rng);
    check_sliding(1, 9, 37, r, Fill::random, rng);
  }
}

TEST(BlurSlidingEmulated, InteriorAndBorderPixelsAcrossStripGroups) {
  // Images wide and tall enough for interior pixels, with two or three
  // groups of strips (warps side by side, the last one partly outside the
  // image), segments exact and not.
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  for (int r : {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 127}) {
    const int outputs = emu::slide_outputs(r);
    const int w = 16 * (outputs + 3);
    const int h = 2 * r + 19;
    check_sliding(1, h, w, r, Fill::quarter_saturated, rng, {.segment_rows = 32});
  }
}

TEST(BlurSlidingEmulated, SaturatedWindowsReachTheLargestSums) {
  // All 255: 16-bit column sums of (2r + 1) 255 (65025 at r = 127), window
  // sums of 255 (2r + 1)^2, every divisor's largest quotient.
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  for (int r : {7, 8, 64, 126, 127}) {
    check_sliding(1, 2 * r + 5, 16 * (emu::slide_outputs(r) + 2), r, Fill::saturated, rng);
  }
}

TEST(BlurSlidingEmulated, PlanesSegmentsAndWarpsThatStrideOverTasks) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  // Several planes, short segments (many per plane, the last partial), four
  // warps a block, and a grid smaller than the tasks.
  check_sliding(3, 70, 96, 5, Fill::random, rng, {.segment_rows = 32, .warps = 4});
  check_sliding(2, 45, 512, 20, Fill::random, rng,
                {.segment_rows = 8, .warps = 4, .max_blocks = 3});
  check_sliding(3, 33, 48, 40, Fill::quarter_saturated, rng, {.segment_rows = 16, .warps = 2});
  check_sliding(2, 100, 64, 1, Fill::random, rng, {.segment_rows = 64, .max_blocks = 1});
  // The heuristic's own segments (for 132 SMs) on a taller image.
  check_sliding(1, 300, 32, 64, Fill::random, rng);
}

TEST(BlurSlidingEmulated, ImagesSmallerThanTheWindow) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  struct Shape {
    int h, w;
  };
  for (const Shape s :
       {Shape{2, 16}, Shape{2, 2}, Shape{3, 5}, Shape{1, 16}, Shape{1, 37}, Shape{7, 1}}) {
    for (int r : {0, 1, 2, 9, 127}) {
      // Past radius 0 the kernel takes widths of at least 2
      // (box_blur_sliding_takes); radius 0 takes any.
      if (r > 0 && s.w < 2) continue;
      check_sliding(2, s.h, s.w, r, Fill::random, rng);
    }
  }
}

TEST(BlurSlidingEmulated, ByteAccessesForOddWidthsAndUnalignedPointers) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  // Widths that are not a multiple of 16 (a last strip cut short), pointers
  // off 16-byte alignment, and the byte instantiation where vectors fit.
  for (int r : {0, 1, 4, 8, 16, 23, 64, 127}) {
    check_sliding(1, 19, 53, r, Fill::random, rng);
    check_sliding(2, 12, 64, r, Fill::random, rng, {}, 3);
    check_sliding(1, 17, 48, r, Fill::quarter_saturated, rng, {.generic = true});
  }
  check_sliding(1, 40, 16 * (emu::slide_outputs(33) + 2) + 7, 33, Fill::random, rng);
}

// --- banded --------------------------------------------------------------------

// The banded kernel as blur_banded.cu launches it (segments of `segment_rows`
// rows, 0: its own choice for 132 SMs), on at most `max_blocks` blocks
// (0: a block a task; else blocks stride over tasks), shared memory a static
// buffer that each block in turn uses.
void run_banded(const std::uint8_t* src, std::uint8_t* dst, int planes, int h, int w, int r,
                int segment_rows, unsigned max_blocks) {
  static std::vector<std::uint32_t> shared(emu::kBandSharedBytes / sizeof(std::uint32_t));
  std::fill(shared.begin(), shared.end(), 0xDEADBEEFU);  // poisoned: every read must be written
  const int rows = segment_rows > 0 ? segment_rows : emu::band_segment_rows(planes, h, w, r, 132);
  long long blocks = emu::band_tasks(planes, h, w, r, rows);
  if (max_blocks > 0) blocks = std::min<long long>(blocks, max_blocks);
  const auto body = [&] {
    switch (r % 4) {
      case 0: emu::blur_banded_body<0>(src, dst, planes, h, w, r, rows, shared.data()); break;
      case 1: emu::blur_banded_body<1>(src, dst, planes, h, w, r, rows, shared.data()); break;
      case 2: emu::blur_banded_body<2>(src, dst, planes, h, w, r, rows, shared.data()); break;
      default: emu::blur_banded_body<3>(src, dst, planes, h, w, r, rows, shared.data()); break;
    }
  };
  loom::emulated::run_grid(dim3(static_cast<unsigned>(blocks)), dim3(emu::kBandThreads), body);
}

void check_banded(int planes, int h, int w, int r, Fill fill, std::mt19937_64& rng,
                  int segment_rows = 0, unsigned max_blocks = 0) {
  check_kernel(
      [&](const std::uint8_t* src, std::uint8_t* dst) {
        run_banded(src, dst, planes, h, w, r, segment_rows, max_blocks);
      },
      planes, h, w, r, fill, rng, 0,
      "banded segment_rows=" + std::to_string(segment_rows) +
          " max_blocks=" + std::to_string(max_blocks));
}

TEST(BlurBandedEmulated, RadiiOfEveryAlignmentAndHaloOnANarrowImage) {
  // Every r % 4 (the 16-byte reads' alignment), radii at and past each
  // multiple of 32 (the halo's lanes), r = 0 and the largest; windows wider
  // than the image, so that most pixels are border pixels.
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  for (int r : {0, 1, 2, 3, 4, 5, 31, 32, 33, 63, 64, 66, 95, 96, 127}) {
    check_banded(1, 23, 80, r, Fill::random, rng);
  }
}

TEST(BlurBandedEmulated, BandsAcrossAWideImageMeetAtTheirHalos) {
  // Widths of several bands (1024 - 64 ceil(r / 32) columns each), the last
  // cut short at a multiple of 16 but not of 32; interior pixels in bulk.
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  check_banded(1, 40, 2000, 7, Fill::random, rng);
  check_banded(1, 70, 1040, 33, Fill::quarter_saturated, rng, 32);
  check_banded(1, 300, 2576, 127, Fill::random, rng, 64);
}

TEST(BlurBandedEmulated, SaturatedWindowsReachTheLargestSums) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  for (int r : {8, 64, 127}) check_banded(1, 2 * r + 5, 1024, r, Fill::saturated, rng);
}

TEST(BlurBandedEmulated, PlanesSegmentsAndBlocksThatStrideOverTasks) {
  // Segments cut mid-batch (rows not a multiple of 8), planes, and fewer
  // blocks than tasks (the buffers passed from one task to the next).
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  check_banded(3, 37, 96, 5, Fill::random, rng, 12);
  check_banded(2, 45, 512, 20, Fill::random, rng, 16, 3);
  check_banded(2, 100, 64, 1, Fill::random, rng, 64, 1);
  check_banded(1, 1, 32, 3, Fill::random, rng);
  check_banded(2, 2, 16, 64, Fill::random, rng);
}

}  // namespace
