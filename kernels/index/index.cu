// gather (and index_select), scatter_add and one_hot on the GPU: a thread an
// element, grid-stride loops, 64-bit offsets throughout.
#include "common/check.hpp"
#include "common/launch.hpp"
#include "index/index.hpp"
#include "index/walk.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

namespace loom::kernels {
namespace {

using index_detail::walk_offsets;

constexpr unsigned kThreads = 256;
// Enough blocks to fill an H200 many times over; past that, threads loop.
constexpr std::int64_t kMaxBlocks = 16384;

unsigned blocks_for(std::int64_t count) {
  return static_cast<unsigned>(std::min(kMaxBlocks, (count + kThreads - 1) / kThreads));
}

__device__ __forceinline__ std::int64_t first_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// A unit filled with the NaN word (each 2- or 4-byte lane a canonical NaN).
template <class Unit>
__device__ __forceinline__ Unit nan_unit(std::uint32_t word) {
  if constexpr (sizeof(Unit) == 16) {
    return Unit{word, word, word, word};
  } else {
    return static_cast<Unit>(word);
  }
}

template <class Unit, class Index>
__global__ void gather_kernel(const Unit* __restrict__ x, const Index* __restrict__ index,
                              Unit* __restrict__ out, std::uint32_t nan_word, IndexedWalk w) {
  for (std::int64_t i = first_thread(); i < w.walk.count; i += thread_count()) {
    std::int64_t off[kWalkOperands];
    walk_offsets(w.walk, i, off);
    const auto j = static_cast<std::int64_t>(index[off[kGatherIndex]]);
    out[off[kGatherOut]] = j >= 0 && j < w.indexed_extent ? x[off[kGatherX] + j * w.indexed_stride]
                                                          : nan_unit<Unit>(nan_word);
  }
}

template <class Index>
__global__ void scatter_add_kernel(float* dst, const Index* __restrict__ index,
                                   const float* __restrict__ src, IndexedWalk w) {
  for (std::int64_t i = first_thread(); i < w.walk.count; i += thread_count()) {
    std::int64_t off[kWalkOperands];
    walk_offsets(w.walk, i, off);
    const auto j = static_cast<std::int64_t>(index[off[kScatterIndex]]);
    if (j < 0 || j >= w.indexed_extent) continue;
    atomicAdd(dst + off[kScatterDst] + j * w.indexed_stride, src[off[kScatterSrc]]);
  }
}

template <class Element, class Index>
__global__ void one_hot_kernel(const Index* __restrict__ labels, Element* __restrict__ out,
                               OneHotShape s) {
  const std::int64_t count = s.rows * s.classes;
  for (std::int64_t i = first_thread(); i < count; i += thread_count()) {
    std::int64_t row = 0, column = 0;
    index_detail::divide(i, s.classes, row, column);
    const auto label = static_cast<std::int64_t>(labels[row * s.label_stride]);
    const bool valid = label >= 0 && label < s.classes;
    out[i] = static_cast<Element>(!valid ? s.nan_bits : column == label ? s.one_bits : 0U);
  }
}

[[noreturn]] void reject_index_dtype(const char* op, DType dtype) {
  throw InvalidArgument(std::string(op) + ": index dtype must be i32 or i64, got " +
                        std::string(to_string(dtype)));
}

// Calls f with a null pointer of the index's C++ type.
template <class F>
void with_index_type(const char* op, DType dtype, F&& f) {
  if (dtype == DType::i32) {
    f(static_cast<const std::int32_t*>(nullptr));
  } else if (dtype == DType::i64) {
    f(static_cast<const std::int64_t*>(nullptr));
  } else {
    reject_index_dtype(op, dtype);
  }
}

template <class Unit, class Index>
void launch_gather(const void* x, const void* index, void* out, std::uint32_t nan_word,
                   const IndexedWalk& w, StreamView stream) {
  detail::launch_on_stream(stream.native(), gather_kernel<Unit, Index>,
                           dim3(blocks_for(w.walk.count)), dim3(kThreads), 0,
                           static_cast<const Unit*>(x), static_cast<const Index*>(index),
                           static_cast<Unit*>(out), nan_word, w);
}

}  // namespace

void gather(const void* x, const void* index, DType index_dtype, void* out, int element_bytes,
            std::uint32_t nan_word, const IndexedWalk& walk, StreamView stream) {
  if (walk.walk.count == 0) return;
  IndexedWalk w = walk;
  const bool wide = index_detail::widen_to_16_bytes(x, out, element_bytes, w);
  with_index_type("gather", index_dtype, [&](auto* typed) {
    using Index = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
    if (wide) {
      launch_gather<uint4, Index>(x, index, out, nan_word, w, stream);
    } else if (element_bytes == 4) {
      launch_gather<std::uint32_t, Index>(x, index, out, nan_word, w, stream);
    } else {
      launch_gather<std::uint16_t, Index>(x, index, out, nan_word, w, stream);
    }
  });
  LOOM_KERNEL_CHECK_LAUNCH("gather");
}

void scatter_add(float* dst, const void* index, DType index_dtype, const float* src,
                 const IndexedWalk& walk, StreamView stream) {
  if (walk.walk.count == 0) return;
  with_index_type("scatter_add", index_dtype, [&](auto* typed) {
    using Index = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
    detail::launch_on_stream(stream.native(), scatter_add_kernel<Index>,
                             dim3(blocks_for(walk.walk.count)), dim3(kThreads), 0, dst,
                             static_cast<const Index*>(index), src, walk);
  });
  LOOM_KERNEL_CHECK_LAUNCH("scatter_add");
}

void one_hot(const void* labels, DType label_dtype, void* out, const OneHotShape& shape,
             StreamView stream) {
  const std::int64_t count = shape.rows * shape.classes;
  if (count == 0) return;
  with_index_type("one_hot", label_dtype, [&](auto* typed) {
    using Index = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
    const auto* l = static_cast<const Index*>(labels);
    if (shape.element_bytes == 4) {
      detail::launch_on_stream(stream.native(), one_hot_kernel<std::uint32_t, Index>,
                               dim3(blocks_for(count)), dim3(kThreads), 0, l,
                               static_cast<std::uint32_t*>(out), shape);
    } else {
      detail::launch_on_stream(stream.native(), one_hot_kernel<std::uint16_t, Index>,
                               dim3(blocks_for(count)), dim3(kThreads), 0, l,
                               static_cast<std::uint16_t*>(out), shape);
    }
  });
  LOOM_KERNEL_CHECK_LAUNCH("one_hot");
}

}  // namespace loom::kernels
