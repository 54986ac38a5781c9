#pragma once
// Conversions between f32 and the 16-bit float formats (f16: IEEE binary16;
// bf16: the upper half of an f32), the one implementation that the kernels,
// their CPU references and the tests share. Integer arithmetic only, no
// floating-point operation and no CUDA intrinsic: nvcc compiles the same code
// for the device (__host__ __device__), so host and device give the same bits
// whatever the floating-point environment (rounding mode, -ftz, fast math).
//
// Rounding (f32 -> 16 bits): to nearest, ties to even, as the GPU's
// cvt.rn.f16.f32 / cvt.rn.bf16.f32 (__float2half_rn, __float2bfloat16_rn).
// Subnormals are kept on both sides (no flush to zero); a magnitude at or
// above the halfway point past the largest finite value becomes infinity of
// its sign (f16: 65520 and up; bf16: 0x7F7F8000 and up).
// f16/bf16 -> f32 is exact for every value that is not a NaN.
//
// The NaN rule, one for both formats and both directions: a NaN of any sign,
// quiet or signalling, whatever its payload, becomes the destination's
// canonical NaN, positive with every significand bit set:
//     f16 0x7FFF, bf16 0x7FFF, f32 0x7FFFFFFF.
// That is what the GPU's conversions do. cuda_fp16.hpp and cuda_bf16.hpp
// (CUDA 13) model the instructions on the host, and return exactly these:
// __internal_float2half and __internal_float2bfloat16 give 0x7fff for any
// NaN (__float2half_rn, __float2bfloat16_rn), and __internal_half2float
// "discard[s] the sign of a NaN" and sets all 23 mantissa bits
// (__half2float). (The old host bf16 rule, sign and payload kept, and
// softmax's 0x7FC0 agreed with neither the GPU nor each other.)
//
// Intrinsics a kernel may use in place of these functions, one instruction
// each, because they give the same bits for every input, NaN included
// (common/test_convert.cpp checks NVIDIA's host models of them against these
// functions over every 16-bit pattern and the rounding boundaries of every
// f32 binade; common/test_convert_gpu.cu checks the instructions themselves
// over all 2^32 f32 patterns on the device):
//     __float2half_rn, __floats2half2_rn           (cvt.rn.f16.f32, .f16x2)
//     __float2bfloat16_rn, __floats2bfloat162_rn   (cvt.rn.bf16.f32, .bf16x2;
//                                                   before sm_80 the model)
//     __half2float                                 (cvt.f32.f16)
// Not __bfloat162float: before sm_90 it is a 16-bit shift that keeps a NaN's
// sign and payload (from sm_90, cvt.f32.bf16), as is any hand-written
// "bits << 16"; widen bf16 with bf16_bits_to_f32. The one exception is a
// kernel whose widened values reach no output but through the canonical
// narrowing (softmax's rows: a NaN anywhere makes the row all NaN), which
// says so where it shifts.
//
// Round trips: for every 16-bit pattern b that is not a NaN,
// f32_to_*_bits(*_bits_to_f32(b)) == b; a NaN comes back as 0x7FFF.

#include <loom/dtype.hpp>

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_CONVERT_FN __host__ __device__ __forceinline__
#else
#define LOOM_CONVERT_FN inline
#endif

namespace loom::kernels {

/// The canonical NaNs (see the NaN rule above).
inline constexpr std::uint16_t kF16CanonicalNaN = 0x7FFFU;
inline constexpr std::uint16_t kBf16CanonicalNaN = 0x7FFFU;
inline constexpr std::uint32_t kF32CanonicalNaN = 0x7FFFFFFFU;

namespace convert_detail {

LOOM_CONVERT_FN std::uint32_t bits_of(float f) noexcept {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}

LOOM_CONVERT_FN float float_of(std::uint32_t u) noexcept {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

}  // namespace convert_detail

/// f32 -> f16 bits, round to nearest even; NaN -> 0x7FFF.
LOOM_CONVERT_FN std::uint16_t f32_to_f16_bits(float f) noexcept {
  const std::uint32_t x = convert_detail::bits_of(f);
  const std::uint32_t sign = (x >> 16) & 0x8000U;
  const std::uint32_t a = x & 0x7FFFFFFFU;
  if (a > 0x7F800000U) return kF16CanonicalNaN;
  // 65520 is halfway between 65504 (odd significand) and 2^16: ties go to
  // even, which is infinity; so does everything above, infinity included.
  if (a >= 0x477FF000U) return static_cast<std::uint16_t>(sign | 0x7C00U);
  if (a >= 0x38800000U) {
    // Normal (at least 2^-14): drop 13 significand bits rounding half to
    // even (a carry into the exponent is the right result, up to 0x7BFF),
    // then rebias the exponent from 127 to 15.
    const std::uint32_t rounded = (a + 0x0FFFU + ((a >> 13) & 1U)) >> 13;
    return static_cast<std::uint16_t>(sign | (rounded - (112U << 10)));
  }
  // At most 2^-25 (half the smallest subnormal; f32 subnormals included):
  // rounds to a zero of the same sign (2^-25 itself is a tie, zero is even).
  if (a <= 0x33000000U) return static_cast<std::uint16_t>(sign);
  // A subnormal result, units of 2^-24: the value is m * 2^(e - 150) with m
  // the 24-bit significand, so the units are m >> (126 - e), shift 14 to 24.
  // Rounding up from 1023 gives 0x400, the smallest normal, as it should.
  const std::uint32_t shift = 126U - (a >> 23);
  const std::uint32_t m = (a & 0x007FFFFFU) | 0x00800000U;
  const std::uint32_t units = m >> shift;
  const std::uint32_t rest = m & ((1U << shift) - 1U);
  const std::uint32_t half = 1U << (shift - 1U);
  const std::uint32_t up = (rest > half || (rest == half && (units & 1U) != 0U)) ? 1U : 0U;
  return static_cast<std::uint16_t>(sign | (units + up));
}

/// f16 bits -> f32, exact; NaN -> 0x7FFFFFFF.
LOOM_CONVERT_FN float f16_bits_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1FU;
  std::uint32_t mantissa = h & 0x3FFU;
  if (exponent == 0x1FU) {
    return convert_detail::float_of(mantissa != 0U ? kF32CanonicalNaN : (sign | 0x7F800000U));
  }
  if (exponent != 0U) {
    return convert_detail::float_of(sign | ((exponent + 112U) << 23) | (mantissa << 13));
  }
  if (mantissa == 0U) return convert_detail::float_of(sign);  // a zero
  // A subnormal, mantissa * 2^-24: normalize (at most 10 shifts), an f32 normal.
  std::uint32_t e = 113U;  // 2^-14, the exponent the implicit bit 0x400 would have
  while ((mantissa & 0x400U) == 0U) {
    mantissa <<= 1;
    --e;
  }
  return convert_detail::float_of(sign | (e << 23) | ((mantissa & 0x3FFU) << 13));
}

/// f32 -> bf16 bits, round to nearest even; NaN -> 0x7FFF.
LOOM_CONVERT_FN std::uint16_t f32_to_bf16_bits(float f) noexcept {
  const std::uint32_t x = convert_detail::bits_of(f);
  if ((x & 0x7FFFFFFFU) > 0x7F800000U) return kBf16CanonicalNaN;
  // Adding 0x7FFF plus the kept lowest bit rounds half to even; a carry into
  // the exponent is right, and the largest finite values carry to infinity.
  return static_cast<std::uint16_t>((x + 0x7FFFU + ((x >> 16) & 1U)) >> 16);
}

/// bf16 bits -> f32, exact; NaN -> 0x7FFFFFFF.
LOOM_CONVERT_FN float bf16_bits_to_f32(std::uint16_t b) noexcept {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  return convert_detail::float_of((u & 0x7FFFFFFFU) > 0x7F800000U ? kF32CanonicalNaN : u);
}

/// Element i of an f32, bf16 or f16 array, as f32 (any other dtype reads as f16).
LOOM_CONVERT_FN float load_as_f32(const void* data, DType dtype, std::int64_t i) noexcept {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    default: return f16_bits_to_f32(static_cast<const std::uint16_t*>(data)[i]);
  }
}

/// Element i of an f32, bf16 or f16 array = v, rounded once to its dtype.
LOOM_CONVERT_FN void store_from_f32(void* data, DType dtype, std::int64_t i, float v) noexcept {
  switch (dtype) {
    case DType::f32: static_cast<float*>(data)[i] = v; break;
    case DType::bf16: static_cast<std::uint16_t*>(data)[i] = f32_to_bf16_bits(v); break;
    default: static_cast<std::uint16_t*>(data)[i] = f32_to_f16_bits(v); break;
  }
}

}  // namespace loom::kernels

#undef LOOM_CONVERT_FN
