#pragma once
// What the elementwise tests share: host arrays of f32, f16 or bf16 as raw
// bytes, random fill, and the comparison with its tolerance by map and dtype.

#include <loom/dtype.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/tensor.hpp>

#include "common/convert.hpp"
#include "elementwise/maps.hpp"
#include "support/seed.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace loom::test {

/// n elements of one float dtype, stored as the device stores them.
struct HostArray {
  DType dtype = DType::f32;
  std::vector<unsigned char> bytes;

  HostArray() = default;
  HostArray(DType d, std::size_t n) : dtype(d), bytes(n * bytes_for(d, 1)) {}

  std::size_t size() const { return bytes.size() / bytes_for(dtype, 1); }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }

  float get(std::size_t i) const {
    if (dtype == DType::f32) {
      float v = 0;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      return v;
    }
    std::uint16_t b = 0;
    std::memcpy(&b, bytes.data() + i * 2, 2);
    return dtype == DType::f16 ? kernels::f16_bits_to_f32(b) : kernels::bf16_bits_to_f32(b);
  }
  void set(std::size_t i, float v) {
    if (dtype == DType::f32) {
      std::memcpy(bytes.data() + i * 4, &v, 4);
      return;
    }
    const std::uint16_t b =
        dtype == DType::f16 ? kernels::f32_to_f16_bits(v) : kernels::f32_to_bf16_bits(v);
    std::memcpy(bytes.data() + i * 2, &b, 2);
  }
  /// Every byte 0xFF: NaN in each of the three formats.
  void poison() { std::fill(bytes.begin(), bytes.end(), static_cast<unsigned char>(0xFF)); }
};

/// A fresh engine; its seed is printed (support/seed.hpp).
inline std::mt19937_64 seeded_engine() { return std::mt19937_64(fresh_seed()); }

/// Uniform in [lo, hi] (never exactly zero in practice), rounded to the dtype.
inline HostArray random_array(DType d, std::size_t n, std::mt19937_64& rng, float lo = -2.0F,
                              float hi = 2.0F) {
  std::uniform_real_distribution<float> dist(lo, hi);
  HostArray a(d, n);
  for (std::size_t i = 0; i < n; ++i) a.set(i, dist(rng));
  return a;
}

/// Maps whose result is one correctly rounded operation (or a selection)
/// are exact on both sides; axpby (both sides round each product and the sum
/// alike, but it keeps the tolerance it was first given) and the maps built
/// on CUDA's math functions (exp, log, tanh, pow, rsqrt, ...: a
/// few ulp of f32) get a tolerance of about two units in the last place of a
/// 16-bit output dtype, and 1e-5 relative for f32.
inline bool exact(kernels::MapKind k) {
  using K = kernels::MapKind;
  switch (k) {
    case K::axpby:
    case K::gelu_tanh:
    case K::exp:
    case K::log:
    case K::rsqrt:
    case K::tanh:
    case K::sigmoid:
    case K::pow:
    case K::gelu_tanh_backward: return false;
    default: return true;
  }
}

/// The op of one map over x (and y, z where it reads them): a test's way to
/// reach every map by its kind, in any of its variants.
inline OpPtr make_map_op(kernels::MapKind kind, const Tensor& x, const Tensor& y, const Tensor& z,
                         const Tensor& out, kernels::MapScalars s = {1.25F, -0.5F},
                         ops::MapVariant v = ops::MapVariant::automatic) {
  using K = kernels::MapKind;
  switch (kind) {
    case K::add: return ops::add(x, y, out, v);
    case K::mul: return ops::mul(x, y, out, v);
    case K::axpby: return ops::axpby(s.alpha, x, s.beta, y, out, v);
    case K::relu: return ops::relu(x, out, v);
    case K::gelu_tanh: return ops::gelu_tanh(x, out, v);
    case K::cast: return ops::cast(x, out, v);
    case K::where: return ops::where(x, y, z, out, v);
#define LOOM_TEST_UNARY(name) \
  case K::name: return ops::name(x, out, v);
      LOOM_UNARY_MATH_MAPS(LOOM_TEST_UNARY)
#undef LOOM_TEST_UNARY
#define LOOM_TEST_BINARY(name) \
  case K::name: return ops::name(x, y, out, v);
      LOOM_BINARY_MATH_MAPS(LOOM_TEST_BINARY)
#undef LOOM_TEST_BINARY
  }
  return nullptr;
}

/// The inputs of one map (z for where only), n elements each, drawn where
/// the map is interesting: positive for log, sqrt, rsqrt and pow's base; a
/// 0/1 mask for where; for the comparisons, every seventh b equal to a.
struct MapInputs {
  HostArray x, y, z;
};
inline MapInputs map_inputs(kernels::MapKind k, DType d, std::size_t n, std::mt19937_64& rng) {
  using K = kernels::MapKind;
  const bool positive = k == K::log || k == K::sqrt || k == K::rsqrt || k == K::pow;
  MapInputs in{random_array(d, n, rng, positive ? 0.05F : -2.0F, positive ? 4.0F : 2.0F),
               random_array(d, n, rng), random_array(d, n, rng)};
  if (k == K::where) {
    for (std::size_t i = 0; i < n; ++i) in.x.set(i, in.x.get(i) < 0.0F ? 0.0F : 1.0F);
  }
  for (std::size_t i = 0; i < n; i += 7) in.y.set(i, in.x.get(i));
  return in;
}

inline bool close(float got, float want, DType out, bool exact_match) {
  if (std::isnan(want)) return std::isnan(got);
  if (exact_match || got == want) return got == want;  // equal infinities too
  const float rtol = out == DType::f32 ? 1e-5F : out == DType::f16 ? 2e-3F : 1.6e-2F;
  const float atol = out == DType::f32 ? 1e-6F : 1e-5F;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

/// Compares all elements; returns "" or a description of the first few mismatches.
inline std::string compare(const HostArray& got, const HostArray& want, bool exact_match) {
  std::ostringstream s;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float g = got.get(i);
    const float w = want.get(i);
    if (!close(g, w, want.dtype, exact_match)) {
      if (bad < 5) s << " [" << i << "] got " << g << " want " << w << ";";
      ++bad;
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(want.size()) + " differ:" + s.str();
}

}  // namespace loom::test
