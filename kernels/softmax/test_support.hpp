#pragma once
// What the softmax family's tests share: the reference over f32 rows, and
// random rows.

#include "softmax/softmax.hpp"

#include <loom/dtype.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace loom::test::softmax {

/// The CPU reference over contiguous f32 rows; outputs start at -1 so that
/// an untouched one shows.
inline std::vector<float> reference(const std::vector<float>& x, std::int64_t rows,
                                    std::int64_t cols) {
  std::vector<float> y(x.size(), -1.0F);
  kernels::softmax_reference(x.data(), y.data(), DType::f32,
                             kernels::SoftmaxShape{rows, cols, cols, cols});
  return y;
}

/// Whether a kernel's output element matches the reference's, by dtype:
/// f32 to 1e-5 relative, bf16 to 1e-2 (its 8-bit mantissa), NaN to NaN,
/// down to the smallest normal floats: the absolute floor is 2^-124, so a
/// tiny output off by a factor (a scale lost in a merge) still fails. An
/// output the reference puts below the smallest normal float (the kernels'
/// exponentials flush those; their bias must keep them) is within 2 % and
/// two of the dtype's subnormal steps (2^-149 for f32, 2^-133 for bf16),
/// and not 0.
inline bool close(float got, float want, DType d) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isnan(got)) return false;
  if (want > 0.0F && want < std::numeric_limits<float>::min()) {
    const float step = std::ldexp(1.0F, d == DType::f32 ? -149 : -133);
    return got > 0.0F && std::fabs(got - want) <= 0.02F * want + 2.0F * step;
  }
  const float floor = std::ldexp(1.0F, -124);
  const float tol = (d == DType::f32 ? 1e-5F : 1e-2F) * std::fabs(want) + floor;
  return std::fabs(got - want) <= tol;
}

/// n values uniform in [-8, 8]: wide enough that the maximum's subtraction matters.
inline std::vector<float> random_row_data(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-8.0F, 8.0F);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace loom::test::softmax
