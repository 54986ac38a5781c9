#pragma once
// What the reduction tests share: typed random inputs (both signs, never all
// zero), element access by dtype, and the tolerance a reduction is held to.

#include "reduction/reduce.hpp"

#include <loom/dtype.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace loom::test {

/// n random elements of `dtype` in [-1, 1), as raw bytes.
inline std::vector<std::byte> random_elements(DType dtype, std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  const std::size_t size = dtype == DType::f32 ? 4 : 2;
  std::vector<std::byte> bytes(n * size);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    if (dtype == DType::f32) {
      std::memcpy(bytes.data() + i * size, &v, size);
    } else if (dtype == DType::f16) {
      const half h = kernels::to_half(v);
      std::memcpy(bytes.data() + i * size, &h, size);
    } else {
      const bfloat16 b = kernels::to_bfloat16(v);
      std::memcpy(bytes.data() + i * size, &b, size);
    }
  }
  return bytes;
}

inline std::size_t element_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

/// Element i of a host array of f32, f16 or bf16, as f32.
inline float element_at(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::f16: return kernels::to_float(static_cast<const half*>(data)[i]);
    case DType::bf16: return kernels::to_float(static_cast<const bfloat16*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

/// The value `v` becomes when stored as `dtype` (round to nearest even).
inline float rounded_to(DType dtype, double v) {
  const auto f = static_cast<float>(v);
  switch (dtype) {
    case DType::f16: return kernels::to_float(kernels::to_half(f));
    case DType::bf16: return kernels::to_float(kernels::to_bfloat16(f));
    default: return f;
  }
}

/// True when a reduction's result `got` (stored as out_dtype) is right for
/// the double reference `expected` over `length` elements of mean magnitude
/// `mean_abs`: max and min exactly (they round nothing but the output); sums
/// within f32 rounding, which grows like sqrt(length), plus the rounding of
/// the output's own dtype.
inline bool close_enough(kernels::ReduceOp op, float got, double expected, std::int64_t length,
                         double mean_abs, DType out_dtype) {
  if (std::isnan(expected)) return std::isnan(got);
  const float exact = rounded_to(out_dtype, expected);
  if (op != kernels::ReduceOp::sum) return got == exact;
  const double output_ulp = out_dtype == DType::f16    ? std::ldexp(std::fabs(expected), -10)
                            : out_dtype == DType::bf16 ? std::ldexp(std::fabs(expected), -7)
                                                       : 0.0;
  const double tolerance =
      1e-5 * std::sqrt(static_cast<double>(length)) * (mean_abs + 1e-3) + output_ulp + 1e-6;
  return std::fabs(static_cast<double>(got) - expected) <= tolerance;
}

}  // namespace loom::test
