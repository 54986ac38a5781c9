// The image ops on the CPU: the references against hand-checked values, both
// ops through a graph on the CPU backend (the references are what runs), and
// bad inputs rejected at submit naming the task.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "image/blur.hpp"
#include "image/gray.hpp"
#include "image/test_support.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::kernels::RgbLayout;
using loom::test::cpu;
using loom::test::image::Bytes;
using loom::test::image::random_bytes;

TEST(GrayReference, MatchesTheFixedPointWeights) {
  // R, G, B, white, black, a grey, in both layouts.
  const Bytes interleaved = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 10, 20, 30};
  Bytes planar(18);
  for (int p = 0; p < 6; ++p) {
    for (int c = 0; c < 3; ++c)
      planar[static_cast<std::size_t>(c * 6 + p)] =
          interleaved[static_cast<std::size_t>(p * 3 + c)];
  }
  // (77 R + 150 G + 29 B + 128) >> 8; 10, 20, 30: (770 + 3000 + 870 + 128) >> 8 = 18.
  const Bytes expected = {77, 149, 29, 255, 0, 18};
  Bytes gray(6, 0xA5);
  loom::kernels::rgb_to_gray_reference(interleaved.data(), gray.data(), 6, RgbLayout::interleaved);
  EXPECT_EQ(gray, expected);
  gray.assign(6, 0xA5);
  loom::kernels::rgb_to_gray_reference(planar.data(), gray.data(), 6, RgbLayout::planar);
  EXPECT_EQ(gray, expected);
}

TEST(BlurReference, AveragesTheInImagePixelsRoundedHalfUp) {
  const Bytes src = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // 3 x 3
  Bytes dst(9, 0xA5);
  loom::kernels::box_blur_reference(src.data(), dst.data(), 1, 3, 3, 1);
  // Corner (0,0): 1+2+4+5 = 12 over 4 -> 3; edge (0,1): 1+2+3+4+5+6 = 21 over 6
  // -> (21+3)/6 = 4; centre: 45 over 9 -> 5; corner (2,2): 5+6+8+9 = 28 -> 7.
  EXPECT_EQ(dst[0], 3);
  EXPECT_EQ(dst[1], 4);
  EXPECT_EQ(dst[4], 5);
  EXPECT_EQ(dst[8], 7);
  // Half rounds up: 1 and 2 average to 1.5 -> 2.
  const Bytes pair = {1, 2};
  Bytes out(2);
  loom::kernels::box_blur_reference(pair.data(), out.data(), 1, 1, 2, 1);
  EXPECT_EQ(out, (Bytes{2, 2}));
}

TEST(BlurReference, RadiusZeroCopiesAndConstantsStayConstantAtAnyRadius) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const Bytes src = random_bytes(7 * 13 * 2, rng);
  Bytes dst(src.size());
  loom::kernels::box_blur_reference(src.data(), dst.data(), 2, 7, 13, 0);
  EXPECT_EQ(dst, src);
  const Bytes flat(5 * 9, 200);
  for (int r : {1, 3, 4, 20, 127}) {
    Bytes out(flat.size());
    loom::kernels::box_blur_reference(flat.data(), out.data(), 1, 5, 9, r);
    EXPECT_EQ(out, flat) << "radius " << r;
  }
}

TEST(BlurSliding, SegmentRowsAreZeroWhereTheKernelDoesNotTakeTheRadius) {
  for (int r : {0, 1, 8, 64, 127}) {
    const int rows = loom::kernels::box_blur_sliding_segment_rows(1, 4096, 4096, r, 132);
    EXPECT_GE(rows, 16) << "radius " << r;
    EXPECT_LE(rows, 256) << "radius " << r;
  }
  // Past 127 a warp would have no outputs: a division by zero before.
  for (int r : {128, 200, 241, 255, 256, -1}) {
    EXPECT_EQ(loom::kernels::box_blur_sliding_segment_rows(1, 4096, 4096, r, 132), 0)
        << "radius " << r;
  }
  EXPECT_EQ(loom::kernels::box_blur_sliding_segment_rows(1, 64, 1, 3, 132), 0) << "width 1";
  EXPECT_EQ(loom::kernels::box_blur_sliding_segment_rows(0, 64, 64, 3, 132), 0) << "no planes";
}

// What the banded kernel takes (anything else runs sliding): widths a
// multiple of 16, extents up to 2^30 (its band and segment arithmetic is
// int), radius 0..127, 16-byte aligned images; and the segment rule.
TEST(BlurBanded, TakesAlignedWidthsOfSixteenAndExtentsUpToTwoToThe30) {
  using loom::kernels::box_blur_banded_takes;
  const auto* aligned = reinterpret_cast<const void*>(std::uintptr_t{1} << 12);
  const auto* off = reinterpret_cast<const void*>((std::uintptr_t{1} << 12) + 4);
  EXPECT_TRUE(box_blur_banded_takes(4096, 4096, 64, aligned, aligned));
  EXPECT_TRUE(box_blur_banded_takes(1, 16, 0, aligned, aligned));
  EXPECT_TRUE(box_blur_banded_takes(std::int64_t{1} << 29, 16, 127, aligned, aligned));
  EXPECT_FALSE(box_blur_banded_takes(64, 4104, 3, aligned, aligned)) << "width % 16";
  EXPECT_FALSE(box_blur_banded_takes(64, 0, 3, aligned, aligned)) << "no width";
  EXPECT_FALSE(box_blur_banded_takes(64, 64, 128, aligned, aligned)) << "radius";
  EXPECT_FALSE(box_blur_banded_takes(64, 64, -1, aligned, aligned)) << "radius";
  EXPECT_FALSE(box_blur_banded_takes(64, 64, 3, off, aligned)) << "source alignment";
  EXPECT_FALSE(box_blur_banded_takes(64, 64, 3, aligned, off)) << "destination alignment";
  EXPECT_FALSE(box_blur_banded_takes(std::int64_t{1} << 31, 16, 3, aligned, aligned)) << "height";
  EXPECT_FALSE(box_blur_banded_takes(16, std::int64_t{1} << 31, 3, aligned, aligned)) << "width";
  for (int r : {0, 1, 8, 64, 127}) {
    const int rows = loom::kernels::box_blur_banded_segment_rows(1, 4096, 4096, r, 132);
    EXPECT_GE(rows, 32) << "radius " << r;
    EXPECT_LE(rows, 256) << "radius " << r;
  }
  EXPECT_EQ(loom::kernels::box_blur_banded_segment_rows(1, 4096, 4096, 128, 132), 0);
  EXPECT_EQ(loom::kernels::box_blur_banded_segment_rows(0, 64, 64, 3, 132), 0) << "no planes";
}

TEST(ImageOpsCpu, GrayThenBlurThroughAGraphMatchTheReferences) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  const std::int64_t h = 37;
  const std::int64_t w = 53;
  for (bool planar : {false, true}) {
    const Bytes pixels = random_bytes(static_cast<std::size_t>(3 * h * w), rng);
    auto rgb = planar ? rt.tensor<std::uint8_t>({3, h, w}) : rt.tensor<std::uint8_t>({h, w, 3});
    std::memcpy(rgb.data(), pixels.data(), pixels.size());
    auto gray = rt.tensor<std::uint8_t>({h, w});
    auto blurred = rt.tensor<std::uint8_t>({h, w});
    std::memset(gray.data(), 0xA5, static_cast<std::size_t>(h * w));
    std::memset(blurred.data(), 0xA5, static_cast<std::size_t>(h * w));
    loom::Graph g;
    g.add(loom::ops::rgb_to_gray(rgb, gray));
    g.add(loom::ops::box_blur(gray, blurred, 3));  // after the gray: it reads gray
    rt.submit(g).wait();

    Bytes want_gray(static_cast<std::size_t>(h * w));
    loom::kernels::rgb_to_gray_reference(pixels.data(), want_gray.data(), want_gray.size(),
                                         planar ? RgbLayout::planar : RgbLayout::interleaved);
    Bytes want_blur(want_gray.size());
    loom::kernels::box_blur_reference(want_gray.data(), want_blur.data(), 1, h, w, 3);
    EXPECT_EQ(0, std::memcmp(gray.data(), want_gray.data(), want_gray.size())) << planar;
    EXPECT_EQ(0, std::memcmp(blurred.data(), want_blur.data(), want_blur.size())) << planar;
  }
}

TEST(ImageOpsCpu, BlurTakesPlanesAndEveryNamedVariant) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  const Bytes pixels = random_bytes(3 * 17 * 29, rng);
  auto src = rt.tensor<std::uint8_t>({3, 17, 29});
  std::memcpy(src.data(), pixels.data(), pixels.size());
  Bytes want(pixels.size());
  loom::kernels::box_blur_reference(pixels.data(), want.data(), 3, 17, 29, 2);
  using loom::ops::BlurVariant;
  for (auto variant :
       {BlurVariant::automatic, BlurVariant::naive, BlurVariant::tiled, BlurVariant::tiled_v1,
        BlurVariant::separable, BlurVariant::sliding, BlurVariant::banded}) {
    auto dst = rt.tensor<std::uint8_t>({3, 17, 29});
    loom::Graph g;
    g.add(loom::ops::box_blur(src, dst, 2, variant));
    rt.submit(g).wait();
    EXPECT_EQ(0, std::memcmp(dst.data(), want.data(), want.size()))
        << loom::ops::to_string(variant);
  }
}

using loom::test::expect_rejected;

TEST(ImageOpsCpu, BadGrayInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto gray = rt.tensor<std::uint8_t>({4, 5});
  using loom::ops::rgb_to_gray;
  using Layout = loom::ops::RgbLayout;
  expect_rejected(rt, rgb_to_gray(rt.tensor<float>({4, 5, 3}), gray), "must be u8");
  expect_rejected(rt, rgb_to_gray(rt.tensor<std::uint8_t>({4, 5, 3}), rt.tensor<float>({4, 5})),
                  "must be u8");
  expect_rejected(rt, rgb_to_gray(rt.tensor<std::uint8_t>({4, 15}), gray), "rank 3");
  expect_rejected(rt, rgb_to_gray(rt.tensor<std::uint8_t>({4, 5, 4}), gray), "3 channels");
  expect_rejected(rt, rgb_to_gray(rt.tensor<std::uint8_t>({4, 5, 3}), gray, Layout::planar),
                  "planar rgb must be [3, H, W]");
  expect_rejected(rt,
                  rgb_to_gray(rt.tensor<std::uint8_t>({3, 4, 3}), rt.tensor<std::uint8_t>({4, 3})),
                  "could be interleaved or planar");
  expect_rejected(rt, rgb_to_gray(rt.tensor<std::uint8_t>({4, 6, 3}), gray), "gray must be [4, 6]");
  expect_rejected(rt,
                  rgb_to_gray(rt.tensor<std::uint8_t>({4, 5, 3}), gray, Layout::detect,
                              static_cast<loom::ops::GrayVariant>(7)),
                  "unknown variant 7 (automatic, naive, vectorized)");
  auto wide = rt.tensor<std::uint8_t>({4, 10, 3});
  expect_rejected(rt, rgb_to_gray(wide.slice(1, 0, 10, 2), gray), "must be contiguous");
  // An explicit layout settles the ambiguous shape.
  loom::Graph g;
  g.add(rgb_to_gray(rt.tensor<std::uint8_t>({3, 4, 3}), rt.tensor<std::uint8_t>({4, 3}),
                    Layout::planar));
  EXPECT_NO_THROW(rt.submit(g).wait());
}

TEST(ImageOpsCpu, BadBlurInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto src = rt.tensor<std::uint8_t>({8, 9});
  auto dst = rt.tensor<std::uint8_t>({8, 9});
  using loom::ops::box_blur;
  expect_rejected(rt, box_blur(rt.tensor<float>({8, 9}), dst, 1), "must be u8");
  expect_rejected(rt, box_blur(rt.tensor<std::uint8_t>({72}), rt.tensor<std::uint8_t>({72}), 1),
                  "[H, W] or [C, H, W]");
  expect_rejected(rt, box_blur(src, rt.tensor<std::uint8_t>({9, 8}), 1), "one shape");
  expect_rejected(rt, box_blur(src, dst, -1), "radius must be in [0, 127]");
  expect_rejected(rt, box_blur(src, dst, 128), "radius must be in [0, 127]");
  expect_rejected(rt, box_blur(src, src, 1), "must not share storage");
  expect_rejected(
      rt, box_blur(src, dst, 1, static_cast<loom::ops::BlurVariant>(7)),
      "unknown variant 7 (automatic, naive, tiled, tiled_v1, separable, sliding, banded)");
  auto big = rt.tensor<std::uint8_t>({8, 18});
  expect_rejected(rt, box_blur(big.slice(1, 0, 9), dst, 1), "must be contiguous");
  expect_rejected(rt, box_blur(src, big.slice(1, 9, 18), 1), "must be contiguous");
}

}  // namespace
