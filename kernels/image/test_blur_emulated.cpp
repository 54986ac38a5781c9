// The streaming blur kernel's own code (blur_stream.cuh) and the separable
// running sums' (blur_separable.cuh), run on the CPU under the emulation of
// CUDA threads (support/emulated_cuda.hpp): every thread of a block is a
// std::thread, blocks run one after another, and a shuffle is a write to a
// double-buffered exchange slot and a barrier. It checks what a GPU run would
// (the strip and segment arithmetic, the ring of rows, the shuffles, the
// running windows, the border counts, the divisions) against the CPU
// reference at small shapes; timing and memory-model effects are not
// emulated (the GPU tests cover those). The divisions are also checked for
// every sum they can meet.
#include "image/blur.hpp"  // first: CUDA's headers define the qualifiers redefined below

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "support/seed.hpp"

#include <algorithm>
#include <array>
#include <barrier>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "support/emulated_cuda.hpp"

namespace loom::kernels::blur_detail {
using namespace loom::emulated;  // NOLINT: the kernel's code reads CUDA's names unqualified
}  // namespace loom::kernels::blur_detail

#include "image/blur_separable.cuh"
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
            unsigned max_z) {
  const int strips = w / emu::kStripBytes;
  const dim3 grid(
      static_cast<unsigned>((strips + emu::kStripsPerWarp - 1) / emu::kStripsPerWarp),
      std::min(static_cast<unsigned>((h + emu::kSegmentRows - 1) / emu::kSegmentRows), max_y),
      std::min(static_cast<unsigned>(planes), max_z));
  run_grid(grid, [&] { emu::blur_stream<R>(src, dst, planes, h, w); });
}

void launch(int r, const std::uint8_t* src, std::uint8_t* dst, int planes, int h, int w,
            unsigned max_y, unsigned max_z) {
  switch (r) {
    case 1: launch<1>(src, dst, planes, h, w, max_y, max_z); break;
    case 2: launch<2>(src, dst, planes, h, w, max_y, max_z); break;
    case 3: launch<3>(src, dst, planes, h, w, max_y, max_z); break;
    case 4: launch<4>(src, dst, planes, h, w, max_y, max_z); break;
    case 5: launch<5>(src, dst, planes, h, w, max_y, max_z); break;
    case 6: launch<6>(src, dst, planes, h, w, max_y, max_z); break;
    default: launch<7>(src, dst, planes, h, w, max_y, max_z); break;
  }
}

struct Case {
  int planes, h, w;
  unsigned max_y = 65535;  // smaller: blocks stride over segments and planes
  unsigned max_z = 65535;
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
  launch(r, src.data(), got.data(), c.planes, c.h, c.w, c.max_y, c.max_z);
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
                     << " first mismatch at " << first;
}

TEST(BlurStreamEmulated, MatchesTheReferenceAtEveryRadius) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  // One strip (narrower than the widest window), one full warp of strips and
  // one strip more, single rows, segments exact and not, and a grid that
  // strides over segments and planes.
  const Case cases[] = {{1, 5, 16},   {1, 2, 32},  {1, 33, 48},
                        {1, 40, 496}, {1, 3, 496}, {2, 70, 64, 2, 1}};
  for (int r = 1; r <= loom::kernels::kBlurTiledMaxRadius; ++r) {
    for (const Case& c : cases) check(c, r, rng);
  }
}

TEST(BlurStreamEmulated, WholeSegmentsAcrossAWideImage) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  check({1, 64, 512}, 3, rng);
}

TEST(BlurStreamDivision, TheReciprocalIsExactForEveryWindowSum) {
  // Interior pixels: the area's reciprocal, for each tiled radius.
  for (int r = 1; r <= loom::kernels::kBlurTiledMaxRadius; ++r) {
    const auto area = static_cast<unsigned>((2 * r + 1) * (2 * r + 1));
    const std::uint32_t magic = emu::blur_magic(area);
    for (unsigned s = 0; s <= 255 * area; ++s) {
      const unsigned n = s + area / 2;
      ASSERT_EQ(emu::divide_by_magic(n, magic), n / area) << "sum " << s << " area " << area;
    }
  }
  // And every count up to the largest area, for the claim in its comment.
  for (unsigned c = 2; c <= 225; ++c) {
    const std::uint32_t magic = emu::blur_magic(c);
    for (unsigned n = 0; n < (1U << 16); ++n) {
      ASSERT_EQ(emu::divide_by_magic(n, magic), n / c) << "n " << n << " count " << c;
    }
  }
}

TEST(BlurStreamDivision, EdgeColumnsDivideExactlyInEveryRow) {
  // Every count an edge strip's outer column meets (cx in R + 1..K, cy in
  // 2..K: heights of 1 run tiled_v1), every sum, against the plain formula.
  for (unsigned r = 1; r <= loom::kernels::kBlurTiledMaxRadius; ++r) {
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
  const std::int64_t row_runs = (w + emu::kRowRun - 1) / emu::kRowRun;
  const std::int64_t col_runs = (h + emu::kColRun - 1) / emu::kColRun;
  loom::emulated::run_grid(blocks(all_rows * row_runs), dim3(emu::kSeparableThreads),
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
  // Runs exact and not (64 pixels, 64 rows), images narrower and shorter
  // than the window, one pixel.
  const Shape shapes[] = {{1, 1, 1}, {1, 37, 300}, {2, 65, 129}, {1, 130, 64}, {3, 5, 200}};
  for (const Shape& s : shapes) {
    for (int r : {0, 1, 2, 7, 8, 9, 31, 64, 100, 127}) {
      for (bool saturated : {false, true}) {
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

}  // namespace
