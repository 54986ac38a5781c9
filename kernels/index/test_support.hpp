#pragma once
// What the index family's tests share: host arrays of f32, f16 or bf16 held
// as raw bytes (so that bits compare exactly, NaN included), their trip to
// and from a runtime's tensors, and random data that is never zero.

#include "common/convert.hpp"

#include <loom/dtype.hpp>
#include <loom/runtime.hpp>
#include <loom/tensor.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace loom::test::index {

inline constexpr DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};

/// n elements of a float dtype, as bytes.
struct HostArray {
  DType dtype = DType::f32;
  std::vector<unsigned char> bytes;

  HostArray() = default;
  HostArray(DType d, std::size_t n) : dtype(d), bytes(n * element_size()) {}
  HostArray(DType d, const std::vector<float>& values) : HostArray(d, values.size()) {
    for (std::size_t i = 0; i < values.size(); ++i) set(i, values[i]);
  }

  std::size_t element_size() const { return dtype == DType::f32 ? 4 : 2; }
  std::size_t size() const { return bytes.size() / element_size(); }

  /// The element's bits (an f16 or bf16 in the low half).
  std::uint32_t bits(std::size_t i) const {
    std::uint32_t b = 0;
    std::memcpy(&b, bytes.data() + i * element_size(), element_size());
    return b;
  }
  float get(std::size_t i) const {
    const std::uint32_t b = bits(i);
    switch (dtype) {
      case DType::f16: return kernels::f16_bits_to_f32(static_cast<std::uint16_t>(b));
      case DType::bf16: return kernels::bf16_bits_to_f32(static_cast<std::uint16_t>(b));
      default: {
        float f = 0;
        std::memcpy(&f, &b, 4);
        return f;
      }
    }
  }
  void set(std::size_t i, float v) {
    std::uint32_t b = 0;
    switch (dtype) {
      case DType::f16: b = kernels::f32_to_f16_bits(v); break;
      case DType::bf16: b = kernels::f32_to_bf16_bits(v); break;
      default: std::memcpy(&b, &v, 4); break;
    }
    std::memcpy(bytes.data() + i * element_size(), &b, element_size());
  }
};

/// A tensor of `shape` in the runtime's default memory holding `a`.
inline Tensor upload(Runtime& rt, const HostArray& a, const Shape& shape) {
  const std::size_t n = a.size();
  switch (a.dtype) {
    case DType::f16: {
      std::vector<half> v(n);
      std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
      return rt.upload(std::span<const half>(v), shape);
    }
    case DType::bf16: {
      std::vector<bfloat16> v(n);
      std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
      return rt.upload(std::span<const bfloat16>(v), shape);
    }
    default: {
      std::vector<float> v(n);
      std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
      return rt.upload(std::span<const float>(v), shape);
    }
  }
}

/// `t`'s elements, row-major.
inline HostArray download(Runtime& rt, const Tensor& t) {
  HostArray a(t.dtype(), static_cast<std::size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::f16: {
      const auto v = rt.download<half>(t);
      std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
      break;
    }
    case DType::bf16: {
      const auto v = rt.download<bfloat16>(t);
      std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
      break;
    }
    default: {
      const auto v = rt.download<float>(t);
      std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
      break;
    }
  }
  return a;
}

/// An index tensor (i32 or i64) holding `values`.
inline Tensor upload_index(Runtime& rt, DType dtype, const std::vector<std::int64_t>& values,
                           const Shape& shape) {
  if (dtype == DType::i64) return rt.upload(std::span<const std::int64_t>(values), shape);
  std::vector<std::int32_t> narrow(values.begin(), values.end());
  return rt.upload(std::span<const std::int32_t>(narrow), shape);
}

/// n values of magnitude in [0.25, 8) and either sign: never zero, and
/// distinct often enough that a wrong index shows.
inline std::vector<float> random_values(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> magnitude(0.25F, 8.0F);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return v;
}

/// n indices uniform in [0, extent).
inline std::vector<std::int64_t> random_indices(std::size_t n, std::int64_t extent,
                                                std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> pick(0, extent - 1);
  std::vector<std::int64_t> v(n);
  for (auto& i : v) i = pick(rng);
  return v;
}

inline bool is_nan(float v) { return std::isnan(v); }

}  // namespace loom::test::index
