// gather (and index_select), scatter_add and one_hot on the GPU: a thread an
// element, grid-stride loops, 64-bit offsets throughout; 16 bytes a thread
// where rows allow (index_select, one_hot); a block a row through shared
// memory for gather and scatter_add along a short last dimension.
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

// gather and scatter_add along the last dimension, a block a row at a time
// with the row of x (or the sums into dst) in shared memory. Random reads of
// a row from global memory fetch a 32-byte sector for each 2- or 4-byte
// element (gather f32 [8192, 4096] picking 4096 a row ran at 0.71 of a copy,
// scatter_add at 0.44, bound by L2's sectors): here each row crosses the
// memory system once, coalesced. RowWalk's extent[0] is the rows,
// extent[1] the picks; the indexed operand's stride[.][1] is 0.
template <class Unit, class Index>
__global__ void gather_rows_kernel(const Unit* __restrict__ x, const Index* __restrict__ index,
                                   Unit* __restrict__ out, std::uint32_t nan_word, IndexedWalk w) {
  extern __shared__ unsigned char shared_bytes[];
  auto* row = reinterpret_cast<Unit*>(shared_bytes);
  const std::int64_t rows = w.walk.extent[0];
  const std::int64_t picks = w.walk.extent[1];
  const std::int64_t columns = w.indexed_extent;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Unit* xr = x + r * w.walk.stride[kGatherX][0];
    for (std::int64_t c = threadIdx.x; c < columns; c += blockDim.x) row[c] = xr[c];
    __syncthreads();
    const Index* ir = index + r * w.walk.stride[kGatherIndex][0];
    Unit* orow = out + r * w.walk.stride[kGatherOut][0];
    for (std::int64_t k = threadIdx.x; k < picks; k += blockDim.x) {
      const auto j = static_cast<std::int64_t>(ir[k * w.walk.stride[kGatherIndex][1]]);
      orow[k * w.walk.stride[kGatherOut][1]] =
          j >= 0 && j < columns ? row[j] : static_cast<Unit>(nan_word);
    }
    __syncthreads();  // the row is read before the next one overwrites it
  }
}

// The sums start at -0.0, the identity of IEEE addition (+0.0 would turn a
// -0.0 in dst into +0.0), so every element of dst's row takes one add.
template <class Index>
__global__ void scatter_add_rows_kernel(float* dst, const Index* __restrict__ index,
                                        const float* __restrict__ src, IndexedWalk w) {
  extern __shared__ unsigned char shared_bytes[];
  auto* sums = reinterpret_cast<float*>(shared_bytes);
  const std::int64_t rows = w.walk.extent[0];
  const std::int64_t adds = w.walk.extent[1];
  const std::int64_t columns = w.indexed_extent;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    for (std::int64_t c = threadIdx.x; c < columns; c += blockDim.x) sums[c] = -0.0F;
    __syncthreads();
    const Index* ir = index + r * w.walk.stride[kScatterIndex][0];
    const float* sr = src + r * w.walk.stride[kScatterSrc][0];
    for (std::int64_t k = threadIdx.x; k < adds; k += blockDim.x) {
      const auto j = static_cast<std::int64_t>(ir[k * w.walk.stride[kScatterIndex][1]]);
      if (j >= 0 && j < columns) atomicAdd(sums + j, sr[k * w.walk.stride[kScatterSrc][1]]);
    }
    __syncthreads();
    float* dr = dst + r * w.walk.stride[kScatterDst][0];
    for (std::int64_t c = threadIdx.x; c < columns; c += blockDim.x) dr[c] += sums[c];
    __syncthreads();
  }
}

// Whether a walk indexes the last dimension of rows short enough for a row
// in shared memory, picking enough of each that loading all of it costs at
// most 4x the elements used.
constexpr std::int64_t kRowBytesInShared = 32 * 1024;
bool by_rows(const IndexedWalk& w, int indexed_operand, int element_bytes) {
  return w.walk.rank == 2 && w.walk.stride[indexed_operand][1] == 0 && w.indexed_stride == 1 &&
         w.indexed_extent > 0 && w.indexed_extent * element_bytes <= kRowBytesInShared &&
         4 * w.walk.extent[1] >= w.indexed_extent;
}

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(std::min(kMaxBlocks, rows)); }

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

// one_hot 16 bytes a thread (4 f32 or 8 16-bit elements of one row), where
// every row is whole vectors and out is 16-byte aligned: a quarter to an
// eighth of the divisions and label loads of the element form, and stores
// of 16 bytes (the element form reached 0.54 of a memset at [65536, 1000] f32).
template <class Index, int kPer>
__global__ void one_hot_vector_kernel(const Index* __restrict__ labels, uint4* __restrict__ out,
                                      OneHotShape s) {
  const std::int64_t per_row = s.classes / kPer;
  const std::int64_t count = s.rows * per_row;
  for (std::int64_t v = first_thread(); v < count; v += thread_count()) {
    std::int64_t row = 0, chunk = 0;
    index_detail::divide(v, per_row, row, chunk);
    const auto label = static_cast<std::int64_t>(labels[row * s.label_stride]);
    const bool valid = label >= 0 && label < s.classes;
    const std::int64_t first = chunk * kPer;
    std::uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if constexpr (kPer == 4) {
        w[q] = !valid ? s.nan_bits : first + q == label ? s.one_bits : 0U;
      } else {
        const std::int64_t c = first + 2 * q;
        const std::uint32_t lo = !valid ? s.nan_bits : c == label ? s.one_bits : 0U;
        const std::uint32_t hi = !valid ? s.nan_bits : c + 1 == label ? s.one_bits : 0U;
        w[q] = (lo & 0xFFFFU) | (hi << 16);
      }
    }
    out[v] = uint4{w[0], w[1], w[2], w[3]};
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
  const bool rows = !wide && by_rows(w, kGatherX, element_bytes);
  with_index_type("gather", index_dtype, [&](auto* typed) {
    using Index = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
    if (rows) {
      const auto shared = static_cast<std::size_t>(w.indexed_extent * element_bytes);
      const auto* i = static_cast<const Index*>(index);
      if (element_bytes == 4) {
        detail::launch_on_stream(stream.native(), gather_rows_kernel<std::uint32_t, Index>,
                                 dim3(row_blocks(w.walk.extent[0])), dim3(kThreads), shared,
                                 static_cast<const std::uint32_t*>(x), i,
                                 static_cast<std::uint32_t*>(out), nan_word, w);
      } else {
        detail::launch_on_stream(stream.native(), gather_rows_kernel<std::uint16_t, Index>,
                                 dim3(row_blocks(w.walk.extent[0])), dim3(kThreads), shared,
                                 static_cast<const std::uint16_t*>(x), i,
                                 static_cast<std::uint16_t*>(out), nan_word, w);
      }
    } else if (wide) {
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
  const bool rows = by_rows(walk, kScatterDst, 4);
  with_index_type("scatter_add", index_dtype, [&](auto* typed) {
    using Index = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
    if (rows) {
      detail::launch_on_stream(stream.native(), scatter_add_rows_kernel<Index>,
                               dim3(row_blocks(walk.walk.extent[0])), dim3(kThreads),
                               static_cast<std::size_t>(walk.indexed_extent) * sizeof(float), dst,
                               static_cast<const Index*>(index), src, walk);
      return;
    }
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
  const int per = 16 / shape.element_bytes;
  const bool vectors = index_detail::aligned16(out) && shape.classes % per == 0;
  with_index_type("one_hot", label_dtype, [&](auto* typed) {
    using Index = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
    const auto* l = static_cast<const Index*>(labels);
    if (vectors) {
      const std::int64_t units = count / per;
      const auto kernel = shape.element_bytes == 4 ? one_hot_vector_kernel<Index, 4>
                                                   : one_hot_vector_kernel<Index, 8>;
      detail::launch_on_stream(stream.native(), kernel, dim3(blocks_for(units)), dim3(kThreads), 0,
                               l, static_cast<uint4*>(out), shape);
    } else if (shape.element_bytes == 4) {
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
