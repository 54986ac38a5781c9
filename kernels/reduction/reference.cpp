// The CPU references of the reductions (sums in double, so a GPU's f32
// result can be held to a tolerance that is honest about its own rounding),
// and the typed host conversions of the 16-bit float patterns (common/convert.hpp's).
#include "common/convert.hpp"
#include "reduction/reduce.hpp"

#include <loom/error.hpp>

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

float to_float(half h) noexcept { return f16_bits_to_f32(h.bits); }

float to_float(bfloat16 b) noexcept { return bf16_bits_to_f32(b.bits); }

half to_half(float f) noexcept { return half{f32_to_f16_bits(f)}; }

bfloat16 to_bfloat16(float f) noexcept { return bfloat16{f32_to_bf16_bits(f)}; }

void store_host(void* out, DType dtype, std::int64_t i, double v) noexcept {
  const auto f = static_cast<float>(v);
  switch (dtype) {
    case DType::f16: static_cast<half*>(out)[i] = to_half(f); break;
    case DType::bf16: static_cast<bfloat16*>(out)[i] = to_bfloat16(f); break;
    default: static_cast<float*>(out)[i] = f; break;
  }
}

}  // namespace loom::kernels
