// The CPU references of the reductions (sums in double, so a GPU's f32
// result can be held to a tolerance that is honest about its own rounding),
// and host conversions of the 16-bit float patterns.
#include "reduction/reduce.hpp"

#include <loom/error.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace loom::kernels {
namespace {

double identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return 0.0;
    case ReduceOp::max: return -std::numeric_limits<double>::infinity();
    case ReduceOp::min: return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

// The same NaN rule as the kernels: a NaN on either side wins.
double fold(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum: return a + b;
    case ReduceOp::max: return (a > b || std::isnan(a)) ? a : b;
    case ReduceOp::min: return (a < b || std::isnan(a)) ? a : b;
  }
  return a;
}

double element(const void* x, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(x)[i];
    case DType::f16: return to_float(static_cast<const half*>(x)[i]);
    case DType::bf16: return to_float(static_cast<const bfloat16*>(x)[i]);
    default: break;
  }
  throw InvalidArgument("reduce_reference: the input must be f32, f16 or bf16, got " +
                        std::string(to_string(dtype)));
}

}  // namespace

double reduce_reference(ReduceOp op, const void* x, DType dtype, std::size_t n) {
  double acc = identity(op);
  for (std::size_t i = 0; i < n; ++i) {
    acc = fold(op, acc, element(x, dtype, static_cast<std::int64_t>(i)));
  }
  return acc;
}

void reduce_segments_reference(ReduceOp op, const void* x, DType dtype, const Segments& segments,
                               double* out) {
  for (std::int64_t b = 0; b < segments.batch; ++b) {
    for (std::int64_t s = 0; s < segments.count; ++s) {
      const std::int64_t first = b * segments.batch_stride + s * segments.segment_stride;
      double acc = identity(op);
      for (std::int64_t k = 0; k < segments.length; ++k) {
        acc = fold(op, acc, element(x, dtype, first + k * segments.element_stride));
      }
      out[b * segments.count + s] = acc;
    }
  }
}

float to_float(half h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000U) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1FU;
  const std::uint32_t mantissa = h.bits & 0x3FFU;
  if (exponent == 0x1FU) {  // infinity or NaN
    return std::bit_cast<float>(sign | 0x7F800000U | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact in f32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112U) << 23) | (mantissa << 13));
}

float to_float(bfloat16 b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16);
}

half to_half(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000U);
  const float magnitude = std::fabs(f);
  if (std::isnan(f)) return half{static_cast<std::uint16_t>(sign | 0x7E00U)};
  if (magnitude >= 65520.0F) return half{static_cast<std::uint16_t>(sign | 0x7C00U)};
  if (magnitude < 6.103515625e-05F) {
    // Subnormal (or zero): units of 2^-24, rounded to nearest even by the
    // default floating-point rounding of nearbyint.
    const auto units = static_cast<std::uint16_t>(std::nearbyint(magnitude * 16777216.0F));
    return half{static_cast<std::uint16_t>(sign | units)};
  }
  // Normal: drop 13 mantissa bits, rounding to nearest even; a carry into
  // the exponent is the correct rounding up.
  const std::uint32_t rest = bits & 0x7FFFFFFFU;
  const std::uint32_t rounded = rest + 0x0FFFU + ((rest >> 13) & 1U);
  const std::uint32_t out = (rounded >> 13) - (112U << 10);
  return half{static_cast<std::uint16_t>(sign | out)};
}

bfloat16 to_bfloat16(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return bfloat16{static_cast<std::uint16_t>((bits >> 16) | 0x0040U)};
  const std::uint32_t rounded = bits + 0x7FFFU + ((bits >> 16) & 1U);
  return bfloat16{static_cast<std::uint16_t>(rounded >> 16)};
}

void store_host(void* out, DType dtype, std::int64_t i, double v) noexcept {
  const auto f = static_cast<float>(v);
  switch (dtype) {
    case DType::f16: static_cast<half*>(out)[i] = to_half(f); break;
    case DType::bf16: static_cast<bfloat16*>(out)[i] = to_bfloat16(f); break;
    default: static_cast<float*>(out)[i] = f; break;
  }
}

}  // namespace loom::kernels
