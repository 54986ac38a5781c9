#pragma once
// What the elementwise tests share: host arrays of f32, f16 or bf16 as raw
// bytes, random fill, and the comparison with its tolerance by map and dtype.

#include <loom/dtype.hpp>

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

/// Maps whose result is one correctly rounded operation are exact on both
/// sides; axpby (a fused multiply-add on the GPU) and gelu_tanh (the GPU's
/// exp2f and fast division, a few ulp of f32) get a tolerance of about two
/// units in the last place of a 16-bit output dtype, and 1e-5 relative for f32.
inline bool exact(kernels::MapKind k) {
  return k != kernels::MapKind::axpby && k != kernels::MapKind::gelu_tanh;
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
