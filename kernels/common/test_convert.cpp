// common/convert.hpp on the host: every special value of each of the four
// conversions (zeros, the smallest and largest subnormals, the smallest
// normal, the largest finite, what rounds up to infinity, ties both ways,
// infinities, quiet, signalling and negative NaNs), every 16-bit pattern
// through f32 and back, the rounding midpoints of every binade, and the
// agreement with NVIDIA's own host models of the GPU's conversion
// instructions (cuda_fp16.h, cuda_bf16.h) that lets kernels use those.
#include "common/convert.hpp"

#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

namespace {

using loom::kernels::bf16_bits_to_f32;
using loom::kernels::f16_bits_to_f32;
using loom::kernels::f32_to_bf16_bits;
using loom::kernels::f32_to_f16_bits;

constexpr std::uint16_t kNaN16 = 0x7FFF;
constexpr std::uint32_t kNaN32 = 0x7FFFFFFF;

float f(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// f32 NaNs: quiet, signalling (payload high, and only in the lowest bit,
// which a narrowing that merely truncated would turn into infinity), the
// largest payload (which round-half-up would carry into the sign), negative.
constexpr std::uint32_t kNaNs[] = {0x7FC00000, 0x7FA00000, 0x7F800001, 0x7FFFFFFF,
                                   0xFFC00000, 0xFF800001, 0xFFFFFFFF, 0x7FC0DEAD};

// ---- f32 -> f16 -----------------------------------------------------------

TEST(ConvertF32ToF16, Zeros) {
  EXPECT_EQ(f32_to_f16_bits(0.0F), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-0.0F), 0x8000);
  // f32 subnormals and everything up to 2^-25 are zeros of their sign.
  EXPECT_EQ(f32_to_f16_bits(f(0x00000001)), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(f(0x807FFFFF)), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(0x1p-26F), 0x0000);
}

TEST(ConvertF32ToF16, Subnormals) {
  EXPECT_EQ(f32_to_f16_bits(0x1p-24F), 0x0001);             // smallest
  EXPECT_EQ(f32_to_f16_bits(-0x1p-24F), 0x8001);            // smallest, negative
  EXPECT_EQ(f32_to_f16_bits(1023 * 0x1p-24F), 0x03FF);      // largest
  EXPECT_EQ(f32_to_f16_bits(-1023 * 0x1p-24F), 0x83FF);     // largest, negative
  EXPECT_EQ(f32_to_f16_bits(f(0x33000001)), 0x0001);        // just above 2^-25: up
  EXPECT_EQ(f32_to_f16_bits(0x1p-24F * 0.75F), 0x0001);     // 3/4 unit: up
  EXPECT_EQ(f32_to_f16_bits(0x1p-24F * 1.25F), 0x0001);     // 1 1/4 units: down
  EXPECT_EQ(f32_to_f16_bits(0x1p-14F - 0x1p-26F), 0x0400);  // 1023.75 units: up into the normals
}

TEST(ConvertF32ToF16, NormalsAndTheLargestFinite) {
  EXPECT_EQ(f32_to_f16_bits(0x1p-14F), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16_bits(-0x1p-14F), 0x8400);
  EXPECT_EQ(f32_to_f16_bits(1.0F), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(-2.0F), 0xC000);
  EXPECT_EQ(f32_to_f16_bits(65504.0F), 0x7BFF);  // largest finite
  EXPECT_EQ(f32_to_f16_bits(-65504.0F), 0xFBFF);
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(65520.0F, 0.0F)), 0x7BFF);  // below the tie: down
  EXPECT_EQ(f32_to_f16_bits(-std::nextafter(65520.0F, 0.0F)), 0xFBFF);
}

TEST(ConvertF32ToF16, OverflowRoundsToInfinity) {
  // 65520 is halfway between 65504 (odd) and 2^16: the even side is infinity.
  EXPECT_EQ(f32_to_f16_bits(65520.0F), 0x7C00);
  EXPECT_EQ(f32_to_f16_bits(-65520.0F), 0xFC00);
  EXPECT_EQ(f32_to_f16_bits(65536.0F), 0x7C00);
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::max()), 0x7C00);
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::lowest()), 0xFC00);
}

TEST(ConvertF32ToF16, TiesGoToEvenBothWays) {
  EXPECT_EQ(f32_to_f16_bits(1.0F + 0x1p-11F), 0x3C00);             // down to even
  EXPECT_EQ(f32_to_f16_bits(1.0F + 3 * 0x1p-11F), 0x3C02);         // up to even
  EXPECT_EQ(f32_to_f16_bits(-(1.0F + 0x1p-11F)), 0xBC00);          // negative, down
  EXPECT_EQ(f32_to_f16_bits(-(1.0F + 3 * 0x1p-11F)), 0xBC02);      // negative, up
  EXPECT_EQ(f32_to_f16_bits(1.0F + 0x1p-11F + 0x1p-20F), 0x3C01);  // above a tie: up
  EXPECT_EQ(f32_to_f16_bits(0x1p-25F), 0x0000);                    // subnormal tie, down to 0
  EXPECT_EQ(f32_to_f16_bits(3 * 0x1p-25F), 0x0002);                // subnormal tie, up to 2
  EXPECT_EQ(f32_to_f16_bits(-0x1p-25F), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(0x1p-14F - 0x1p-25F), 0x0400);  // 1023.5 units: up to the normal
  EXPECT_EQ(f32_to_f16_bits(2045 * 0x1p-25F), 0x03FE);      // 1022.5 units: down to even
}

TEST(ConvertF32ToF16, Infinities) {
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_to_f16_bits(-std::numeric_limits<float>::infinity()), 0xFC00);
}

TEST(ConvertF32ToF16, EveryNaNIsTheCanonicalNaN) {
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::quiet_NaN()), kNaN16);
  EXPECT_EQ(f32_to_f16_bits(std::numeric_limits<float>::signaling_NaN()), kNaN16);
  for (std::uint32_t n : kNaNs) EXPECT_EQ(f32_to_f16_bits(f(n)), kNaN16) << std::hex << n;
}

// ---- f16 -> f32 -----------------------------------------------------------

TEST(ConvertF16ToF32, SpecialValues) {
  EXPECT_EQ(bits(f16_bits_to_f32(0x0000)), 0x00000000U);
  EXPECT_EQ(bits(f16_bits_to_f32(0x8000)), 0x80000000U);
  EXPECT_EQ(f16_bits_to_f32(0x0001), 0x1p-24F);  // smallest subnormal
  EXPECT_EQ(f16_bits_to_f32(0x8001), -0x1p-24F);
  EXPECT_EQ(f16_bits_to_f32(0x03FF), 1023 * 0x1p-24F);  // largest subnormal
  EXPECT_EQ(f16_bits_to_f32(0x0200), 0x1p-15F);
  EXPECT_EQ(f16_bits_to_f32(0x0400), 0x1p-14F);  // smallest normal
  EXPECT_EQ(f16_bits_to_f32(0x3C00), 1.0F);
  EXPECT_EQ(f16_bits_to_f32(0x7BFF), 65504.0F);  // largest finite
  EXPECT_EQ(f16_bits_to_f32(0xFBFF), -65504.0F);
  EXPECT_EQ(bits(f16_bits_to_f32(0x7C00)), 0x7F800000U);
  EXPECT_EQ(bits(f16_bits_to_f32(0xFC00)), 0xFF800000U);
}

TEST(ConvertF16ToF32, EveryNaNIsTheCanonicalNaN) {
  // quiet, signalling (two payloads), largest payload; then negative ones
  constexpr std::uint16_t kF16NaNs[] = {0x7E00, 0x7C01, 0x7D00, 0x7FFF, 0xFE00, 0xFC01, 0xFFFF};
  for (std::uint16_t n : kF16NaNs) {
    EXPECT_EQ(bits(f16_bits_to_f32(n)), kNaN32) << std::hex << n;
  }
}

// ---- f32 -> bf16 ----------------------------------------------------------

TEST(ConvertF32ToBf16, Zeros) {
  EXPECT_EQ(f32_to_bf16_bits(0.0F), 0x0000);
  EXPECT_EQ(f32_to_bf16_bits(-0.0F), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(f(0x00000001)), 0x0000);  // an f32 subnormal too small
  EXPECT_EQ(f32_to_bf16_bits(f(0x80007FFF)), 0x8000);
}

TEST(ConvertF32ToBf16, Subnormals) {
  EXPECT_EQ(f32_to_bf16_bits(f(0x00010000)), 0x0001);  // smallest (2^-133)
  EXPECT_EQ(f32_to_bf16_bits(f(0x80010000)), 0x8001);
  EXPECT_EQ(f32_to_bf16_bits(f(0x007F0000)), 0x007F);  // largest
  EXPECT_EQ(f32_to_bf16_bits(f(0x807F0000)), 0x807F);
  EXPECT_EQ(f32_to_bf16_bits(f(0x00008001)), 0x0001);  // just above half a unit: up
  EXPECT_EQ(f32_to_bf16_bits(f(0x007F8000)), 0x0080);  // a tie, up to the smallest normal
}

TEST(ConvertF32ToBf16, NormalsAndTheLargestFinite) {
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::min()), 0x0080);  // smallest normal
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::min()), 0x8080);
  EXPECT_EQ(f32_to_bf16_bits(1.0F), 0x3F80);
  EXPECT_EQ(f32_to_bf16_bits(-3.0F), 0xC040);
  EXPECT_EQ(f32_to_bf16_bits(f(0x7F7F0000)), 0x7F7F);  // largest finite
  EXPECT_EQ(f32_to_bf16_bits(f(0xFF7F0000)), 0xFF7F);
  EXPECT_EQ(f32_to_bf16_bits(f(0x7F7F7FFF)), 0x7F7F);  // below the tie: down
}

TEST(ConvertF32ToBf16, OverflowRoundsToInfinity) {
  EXPECT_EQ(f32_to_bf16_bits(f(0x7F7F8000)), 0x7F80);  // the tie: 0x7F7F is odd, up
  EXPECT_EQ(f32_to_bf16_bits(f(0xFF7F8000)), 0xFF80);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::lowest()), 0xFF80);
}

TEST(ConvertF32ToBf16, TiesGoToEvenBothWays) {
  EXPECT_EQ(f32_to_bf16_bits(1.0F + 0x1p-8F), 0x3F80);             // down to even
  EXPECT_EQ(f32_to_bf16_bits(1.0F + 3 * 0x1p-8F), 0x3F82);         // up to even
  EXPECT_EQ(f32_to_bf16_bits(-(1.0F + 0x1p-8F)), 0xBF80);          // negative, down
  EXPECT_EQ(f32_to_bf16_bits(-(1.0F + 3 * 0x1p-8F)), 0xBF82);      // negative, up
  EXPECT_EQ(f32_to_bf16_bits(1.0F + 0x1p-8F + 0x1p-23F), 0x3F81);  // above a tie: up
  EXPECT_EQ(f32_to_bf16_bits(f(0x00008000)), 0x0000);              // subnormal tie, down to 0
  EXPECT_EQ(f32_to_bf16_bits(f(0x00018000)), 0x0002);              // subnormal tie, up to 2
}

TEST(ConvertF32ToBf16, Infinities) {
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xFF80);
}

TEST(ConvertF32ToBf16, EveryNaNIsTheCanonicalNaN) {
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()), kNaN16);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::signaling_NaN()), kNaN16);
  for (std::uint32_t n : kNaNs) EXPECT_EQ(f32_to_bf16_bits(f(n)), kNaN16) << std::hex << n;
}

// ---- bf16 -> f32 ----------------------------------------------------------

TEST(ConvertBf16ToF32, SpecialValues) {
  EXPECT_EQ(bits(bf16_bits_to_f32(0x0000)), 0x00000000U);
  EXPECT_EQ(bits(bf16_bits_to_f32(0x8000)), 0x80000000U);
  EXPECT_EQ(bits(bf16_bits_to_f32(0x0001)), 0x00010000U);                  // smallest subnormal
  EXPECT_EQ(bits(bf16_bits_to_f32(0x007F)), 0x007F0000U);                  // largest subnormal
  EXPECT_EQ(bf16_bits_to_f32(0x0080), std::numeric_limits<float>::min());  // smallest normal
  EXPECT_EQ(bf16_bits_to_f32(0x3F80), 1.0F);
  EXPECT_EQ(bf16_bits_to_f32(0xC040), -3.0F);
  EXPECT_EQ(bits(bf16_bits_to_f32(0x7F7F)), 0x7F7F0000U);  // largest finite
  EXPECT_EQ(bits(bf16_bits_to_f32(0x7F80)), 0x7F800000U);
  EXPECT_EQ(bits(bf16_bits_to_f32(0xFF80)), 0xFF800000U);
}

TEST(ConvertBf16ToF32, EveryNaNIsTheCanonicalNaN) {
  constexpr std::uint16_t kBf16NaNs[] = {0x7FC0, 0x7F81, 0x7FA0, 0x7FFF, 0xFFC0, 0xFF81, 0xFFFF};
  for (std::uint16_t n : kBf16NaNs) {
    EXPECT_EQ(bits(bf16_bits_to_f32(n)), kNaN32) << std::hex << n;
  }
}

// ---- every pattern ----------------------------------------------------------

// Every f16 pattern widens to its exact value (computed here in double, apart
// from the code under test) and narrows back to itself; a NaN to 0x7FFF.
TEST(ConvertRoundTrip, EveryF16Pattern) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float v = f16_bits_to_f32(h);
    const std::uint32_t exponent = (b >> 10) & 0x1F;
    const std::uint32_t mantissa = b & 0x3FF;
    if (exponent == 0x1F && mantissa != 0) {
      ASSERT_EQ(bits(v), kNaN32) << std::hex << b;
      ASSERT_EQ(f32_to_f16_bits(v), kNaN16) << std::hex << b;
      continue;
    }
    double want = exponent == 0x1F ? std::numeric_limits<double>::infinity()
                  : exponent == 0  ? std::ldexp(static_cast<double>(mantissa), -24)
                                   : std::ldexp(static_cast<double>(1024 + mantissa),
                                                static_cast<int>(exponent) - 25);
    if ((b & 0x8000) != 0) want = -want;
    ASSERT_EQ(bits(v), bits(static_cast<float>(want))) << std::hex << b;
    ASSERT_EQ(f32_to_f16_bits(v), h) << std::hex << b;
  }
}

TEST(ConvertRoundTrip, EveryBf16Pattern) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float v = bf16_bits_to_f32(h);
    if ((b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0) {
      ASSERT_EQ(bits(v), kNaN32) << std::hex << b;
      ASSERT_EQ(f32_to_bf16_bits(v), kNaN16) << std::hex << b;
      continue;
    }
    ASSERT_EQ(bits(v), b << 16) << std::hex << b;  // bf16 is the upper half of an f32
    ASSERT_EQ(f32_to_bf16_bits(v), h) << std::hex << b;
  }
}

// Between every two neighbouring finite values of a format (subnormals
// included): the midpoint goes to the even one, a hair above it up, a hair
// below it down; and the same mirrored for negative values.
template <class Widen, class Narrow>
void expect_midpoints_round_to_even(Widen widen, Narrow narrow, std::uint32_t largest_finite) {
  for (std::uint32_t b = 0; b < largest_finite; ++b) {
    const float lo = widen(static_cast<std::uint16_t>(b));
    const float hi = widen(static_cast<std::uint16_t>(b + 1));
    const float mid = lo + 0.5F * (hi - lo);  // exact in f32 (lo + hi may overflow)
    const auto even = static_cast<std::uint16_t>(b % 2 == 0 ? b : b + 1);
    ASSERT_EQ(narrow(mid), even) << std::hex << b;
    ASSERT_EQ(narrow(std::nextafter(mid, hi)), b + 1) << std::hex << b;
    ASSERT_EQ(narrow(std::nextafter(mid, lo)), b) << std::hex << b;
    ASSERT_EQ(narrow(-mid), even | 0x8000) << std::hex << b;
    ASSERT_EQ(narrow(-std::nextafter(mid, hi)), (b + 1) | 0x8000) << std::hex << b;
    ASSERT_EQ(narrow(-std::nextafter(mid, lo)), b | 0x8000) << std::hex << b;
  }
}

TEST(ConvertRoundTrip, F16MidpointsInEveryBinade) {
  expect_midpoints_round_to_even(f16_bits_to_f32, f32_to_f16_bits, 0x7BFF);
}

TEST(ConvertRoundTrip, Bf16MidpointsInEveryBinade) {
  expect_midpoints_round_to_even(bf16_bits_to_f32, f32_to_bf16_bits, 0x7F7F);
}

// ---- what the GPU does ------------------------------------------------------

// NVIDIA's host models of the conversion instructions, compiled here by the
// host compiler: __float2half_rn (cvt.rn.f16.f32), __float2bfloat16_rn
// (cvt.rn.bf16.f32), __half2float (cvt.f32.f16). The kernels use those
// instructions where convert.hpp says they give its bits; this holds the
// header to that.
std::uint16_t cuda_f16(float v) { return __half_raw(__float2half_rn(v)).x; }
std::uint16_t cuda_bf16(float v) { return __nv_bfloat16_raw(__float2bfloat16_rn(v)).x; }
float cuda_widen_f16(std::uint16_t b) {
  __half_raw raw;
  raw.x = b;
  return __half2float(__half(raw));
}

// Every f32 whose upper 16 bits are any pattern and whose lower 16 bits sit
// on or next to a rounding boundary of either format (bf16: bit 15; f16
// normals: bit 12), or are the extremes; then every f16 midpoint and its
// neighbours, both signs (f16 subnormals round at higher bits).
std::vector<float> boundary_inputs() {
  constexpr std::uint32_t kLows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x2FFF, 0x3000,
                                     0x3001, 0x5555, 0x7FFF, 0x8000, 0x8001, 0x9000, 0xAAAA,
                                     0xEFFF, 0xF000, 0xF001, 0xFFFE, 0xFFFF};
  std::vector<float> in;
  in.reserve(0x10000 * (std::size(kLows) + 6));
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (std::uint32_t lo : kLows) in.push_back(f((hi << 16) | lo));
  }
  for (std::uint32_t b = 0; b < 0x7BFF; ++b) {
    const float lo = f16_bits_to_f32(static_cast<std::uint16_t>(b));
    const float hi = f16_bits_to_f32(static_cast<std::uint16_t>(b + 1));
    const float mid = 0.5F * (lo + hi);
    for (float v : {mid, std::nextafter(mid, hi), std::nextafter(mid, lo)}) {
      in.push_back(v);
      in.push_back(-v);
    }
  }
  return in;
}

TEST(ConvertMatchesTheGpu, NarrowingAsCudasModelsOfTheInstructions) {
  for (const float v : boundary_inputs()) {
    ASSERT_EQ(f32_to_f16_bits(v), cuda_f16(v)) << std::hex << bits(v);
    ASSERT_EQ(f32_to_bf16_bits(v), cuda_bf16(v)) << std::hex << bits(v);
  }
}

TEST(ConvertMatchesTheGpu, WideningF16AsCudasModelOfTheInstruction) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    ASSERT_EQ(bits(f16_bits_to_f32(h)), bits(cuda_widen_f16(h))) << std::hex << b;
  }
}

}  // namespace
