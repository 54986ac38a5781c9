#pragma once
// Vector add, c = a + b over fp32: the first kernel of the catalogue.
//
// Variants (MapVariant, the maps' enum), in the order the lecture teaches them:
//   naive       one thread per element; the grid covers n exactly.
//   grid_stride a grid sized to the machine; each thread strides through n,
//               so one launch shape serves every n.
//   vectorized  16-byte loads and stores (float4), one vector per thread,
//               with a scalar tail; needs 16-byte aligned pointers and is the
//               default. Misaligned pointers fall back to grid_stride.

#include <loom/cuda_interop.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/variant.hpp>

#include <array>
#include <cstddef>
#include <string_view>

namespace loom::kernels {

// The maps' variants (loom/ops/elementwise.hpp); automatic runs vectorized.
using MapVariant = loom::ops::MapVariant;
using loom::ops::to_string;

/// Enqueues c[i] = a[i] + b[i] for i < n on `stream`. Device pointers. n == 0
/// launches nothing. @throws CudaError if the launch fails.
void vector_add(const float* a, const float* b, float* c, std::size_t n, StreamView stream,
                MapVariant variant = MapVariant::automatic);

/// The CPU reference: c[i] = a[i] + b[i]. Host pointers (reference.cpp).
void vector_add_reference(const float* a, const float* b, float* c, std::size_t n) noexcept;

}  // namespace loom::kernels
