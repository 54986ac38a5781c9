#pragma once
// Gathers a strided tensor into a contiguous one, within one device: the
// kernel behind Tensor::contiguous() and strided device-to-device copies.
// One thread an element; the element's multi-index is peeled off its linear
// (destination) index, innermost dimension first.

#include <loom/cuda_interop.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace loom::detail {

inline constexpr int kStridedCopyMaxRank = 8;

struct StridedLayout {
  int rank = 0;
  std::array<std::int64_t, kStridedCopyMaxRank> shape{};
  std::array<std::int64_t, kStridedCopyMaxRank> strides{};  // in elements
};

/// dst[i] = src[layout(i)] for i < numel, elements of `element_bytes` (1, 2, 4
/// or 8). @throws InvalidArgument for another element size; CudaError on launch failure.
void strided_copy(const void* src, const StridedLayout& src_layout, void* dst, std::int64_t numel,
                  int element_bytes, StreamView stream);

/// The CPU reference, the same contract on host pointers.
void strided_copy_reference(const void* src, const StridedLayout& src_layout, void* dst,
                            std::int64_t numel, int element_bytes);

}  // namespace loom::detail
