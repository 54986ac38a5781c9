#pragma once
// Two elementwise maps over fp32, each with its CPU reference (reference.cpp):
//   fill        t[i] = value
//   scale_copy  dst[i] = alpha * src[i]   (dst may alias src)
// Grid-stride kernels with 16-byte accesses where the pointers allow.

#include <loom/cuda_interop.hpp>

#include <cstddef>

namespace loom::kernels {

void fill(float* t, std::size_t n, float value, StreamView stream);
void fill_reference(float* t, std::size_t n, float value) noexcept;

void scale_copy(const float* src, float* dst, std::size_t n, float alpha, StreamView stream);
void scale_copy_reference(const float* src, float* dst, std::size_t n, float alpha) noexcept;

}  // namespace loom::kernels
