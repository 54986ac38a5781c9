#pragma once
// What the loss family's tests share: random logits and labels, and the
// comparison with a tolerance by dtype.

#include <loom/dtype.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace loom::test::loss {

/// rows x cols logits uniform in [-8, 8]: wide enough that subtracting the
/// maximum matters.
inline std::vector<float> random_logits(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-8.0F, 8.0F);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// A label a row in [0, cols); where `ignore` is set, every 5th row takes it.
template <class Label>
std::vector<Label> random_labels(std::int64_t rows, std::int64_t cols, std::mt19937_64& rng,
                                 std::int64_t ignore = 0, bool with_ignored = false) {
  std::uniform_int_distribution<std::int64_t> dist(0, cols - 1);
  std::vector<Label> v(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < v.size(); ++r) {
    v[r] = static_cast<Label>(with_ignored && r % 5 == 3 ? ignore : dist(rng));
  }
  return v;
}

/// Relative and absolute tolerance for values of `dtype` computed in f32 with
/// the device's expf and logf (a few ulp) against a double reference.
inline bool close(float got, float want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (got == want) return true;
  const float rtol = dtype == DType::f32 ? 2e-5F : dtype == DType::f16 ? 2e-3F : 1.6e-2F;
  const float atol = dtype == DType::f32 ? 4e-6F : 2e-5F;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

/// "" when every element is close, else the first few differences.
inline std::string compare(const std::vector<float>& got, const std::vector<float>& want,
                           DType dtype) {
  std::ostringstream s;
  std::size_t bad = 0;
  if (got.size() != want.size()) return "sizes differ";
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!close(got[i], want[i], dtype)) {
      if (bad < 5) s << " [" << i << "] got " << got[i] << " want " << want[i] << ";";
      ++bad;
    }
  }
  return bad == 0
             ? ""
             : std::to_string(bad) + " of " + std::to_string(want.size()) + " differ:" + s.str();
}

}  // namespace loom::test::loss
