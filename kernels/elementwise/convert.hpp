#pragma once
// Host conversions between f32 and the 16-bit float formats, rounding to
// nearest even as the GPU's __float2half_rn, __float2bfloat16_rn and
// cvt.rn.* do: the CPU references of the casts and of every map that stores
// f16 or bf16 use these, so that a rounding mode mismatch shows up as a test
// failure rather than hiding behind a tolerance.
//
// NaN stays NaN (quiet, sign kept); the payload is not preserved bit for bit
// (the GPU returns a canonical NaN), so compare NaNs as values.

#include <bit>
#include <cmath>
#include <cstdint>

namespace loom::kernels {

inline std::uint16_t f32_to_f16_bits(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000U;
  const std::uint32_t magnitude = x & 0x7FFFFFFFU;
  if (magnitude > 0x7F800000U) return static_cast<std::uint16_t>(sign | 0x7E00U);  // NaN
  // 65520 is halfway between 65504 (odd mantissa) and 65536: ties go to even, infinity.
  if (magnitude >= 0x477FF000U) return static_cast<std::uint16_t>(sign | 0x7C00U);
  if (magnitude < 0x38800000U) {
    // Below the smallest normal half (2^-14): a subnormal m * 2^-24. Scaling by
    // 2^24 is exact, and nearbyint rounds half to even in the default mode;
    // m == 1024 is the encoding of the smallest normal, as it should be.
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0F;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  // Normal: drop 13 mantissa bits rounding half to even (a carry may bump the
  // exponent, which is right), then rebias the exponent from 127 to 15.
  const std::uint32_t lsb = (magnitude >> 13) & 1U;
  const std::uint32_t rounded = (magnitude + 0xFFFU + lsb) >> 13;
  return static_cast<std::uint16_t>(sign | (rounded - (112U << 10)));
}

inline float f16_bits_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1FU;
  const std::uint32_t mantissa = h & 0x3FFU;
  if (exponent == 0) {
    const float value = static_cast<float>(mantissa) * 5.9604644775390625e-8F;  // 2^-24
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(value) | sign);
  }
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000U | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112U) << 23) | (mantissa << 13));
}

inline std::uint16_t f32_to_bf16_bits(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFU) > 0x7F800000U) return static_cast<std::uint16_t>((x >> 16) | 0x40U);
  const std::uint32_t lsb = (x >> 16) & 1U;
  return static_cast<std::uint16_t>((x + 0x7FFFU + lsb) >> 16);
}

inline float bf16_bits_to_f32(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace loom::kernels
