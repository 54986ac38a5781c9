#pragma once
// Vector add, c = a + b over fp32: the first kernel of the catalogue.
//
// Variants, in the order the lecture teaches them:
//   naive       one thread per element; the grid covers n exactly.
//   grid_stride a grid sized to the machine; each thread strides through n,
//               so one launch shape serves every n.
//   vectorized  16-byte loads and stores (float4), one vector per thread,
//               with a scalar tail; needs 16-byte aligned pointers and is the
//               default. Misaligned pointers fall back to grid_stride.

#include <loom/cuda_interop.hpp>
#include <loom/ops/variant.hpp>

#include <array>
#include <cstddef>
#include <string_view>

namespace loom::kernels {

enum class VectorAddVariant { naive, grid_stride, vectorized };

}  // namespace loom::kernels

// Named by the table every variant family uses (loom/ops/variant.hpp).
namespace loom::ops {
template <>
struct VariantNames<kernels::VectorAddVariant> {
  static constexpr std::array<std::string_view, 3> names = {"naive", "grid_stride", "vectorized"};
};
// A value added to the enum needs its name in the table: the last one must match.
static_assert(to_string(kernels::VectorAddVariant::vectorized) == "vectorized");
}  // namespace loom::ops

namespace loom::kernels {

// So that to_string(variant) resolves here and by argument-dependent lookup.
using loom::ops::to_string;

inline constexpr VectorAddVariant kVectorAddDefault = VectorAddVariant::vectorized;

/// Enqueues c[i] = a[i] + b[i] for i < n on `stream`. Device pointers. n == 0
/// launches nothing. @throws CudaError if the launch fails.
void vector_add(const float* a, const float* b, float* c, std::size_t n, StreamView stream,
                VectorAddVariant variant = kVectorAddDefault);

/// The CPU reference: c[i] = a[i] + b[i]. Host pointers (reference.cpp).
void vector_add_reference(const float* a, const float* b, float* c, std::size_t n) noexcept;

}  // namespace loom::kernels
