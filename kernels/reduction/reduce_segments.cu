// Segmented reductions: the rows or columns of a 2-D view, any strides (see
// reduce.hpp). Two shapes of kernel:
//   rows     a warp per segment, or per chunk of a long segment; contiguous
//            elements are read as 16-byte vectors once the segment reaches a
//            16-byte boundary. Few long segments are cut into chunks so the
//            machine fills; a second launch folds each segment's chunks.
//   columns  a thread per segment and eight threads down each one, so a warp
//            reads 32 neighbouring segments at once (coalesced when the
//            segments are the contiguous direction, e.g. the column sums of a
//            row-major matrix). Long segments are cut likewise. Where the
//            neighbouring segments are contiguous and start on 16-byte
//            boundaries, each thread takes 4 (f32) or 8 (f16, bf16) of them
//            with one 16-byte load.
// The cut depends on the shape (and, for columns, on whether the 16-byte
// loads apply), never on the machine: deterministic.
#include "common/check.hpp"
#include "common/launch.hpp"
#include "reduction/reduce.hpp"
#include "reduction/reduce_device.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace loom::kernels {
namespace {

using reduce_detail::align_up;
using reduce_detail::Fold;
using reduce_detail::kWarp;
using reduce_detail::to_f32;

constexpr int kRowBlock = 256;
constexpr int kRowWarps = kRowBlock / kWarp;
constexpr int kRowUnroll = 4;
constexpr std::int64_t kTargetWarps = 8192;  // rows: enough warps to fill any GPU
constexpr std::int64_t kMinRowChunk = 1024;  // rows: the shortest chunk worth a warp
constexpr std::int64_t kChunkAlignment = 8;  // keeps chunks on 16-byte boundaries
constexpr int kColumnsX = 32;                // columns: segments a block
constexpr int kColumnsY = 8;                 // columns: threads down each segment
constexpr std::int64_t kTargetColumnBlocks = 1024;
constexpr std::int64_t kMinColumnChunk = 64;
constexpr std::int64_t kMaxGridY = 65535;

// One warp folds len contiguous elements from p: a scalar head up to the
// first 16-byte boundary, vectors with kRowUnroll loads in flight, a scalar
// tail. Each lane's value; the caller combines the lanes.
template <class T, ReduceOp kOp>
__device__ float warp_fold_contiguous(const T* __restrict__ p, std::int64_t len, int lane) {
  using F = Fold<kOp>;
  constexpr int kPer = reduce_detail::kPerVector<T>;
  const auto head =
      static_cast<std::int64_t>(reduce_detail::head_elements(p, static_cast<std::size_t>(len)));
  float acc = F::identity();
  if (lane < head) acc = F::apply(acc, to_f32(p[lane]));
  const std::int64_t vectors = (len - head) / kPer;
  const auto* gV = reinterpret_cast<const uint4*>(p + head);
  std::int64_t v = lane;
  for (; v + (kRowUnroll - 1) * kWarp < vectors; v += kRowUnroll * kWarp) {
    uint4 rV[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) rV[u] = reduce_detail::load_vector(gV + v + u * kWarp);
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) acc = reduce_detail::fold_vector<T, kOp>(acc, rV[u]);
  }
  for (; v < vectors; v += kWarp) {
    acc = reduce_detail::fold_vector<T, kOp>(acc, reduce_detail::load_vector(gV + v));
  }
  for (std::int64_t i = head + vectors * kPer + lane; i < len; i += kWarp) {
    acc = F::apply(acc, to_f32(p[i]));
  }
  return acc;
}

template <class T, ReduceOp kOp>
__device__ float warp_fold_strided(const T* __restrict__ p, std::int64_t len, std::int64_t stride,
                                   int lane) {
  using F = Fold<kOp>;
  float acc = F::identity();
#pragma unroll 4
  for (std::int64_t i = lane; i < len; i += kWarp) acc = F::apply(acc, to_f32(p[i * stride]));
  return acc;
}

// Warp w folds chunk (w % splits) of segment (w / splits). With one split it
// stores the result; otherwise it leaves a partial at gPartials[w].
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kRowBlock)
    reduce_rows_kernel(const T* __restrict__ gX, Segments s, std::int64_t splits,
                       std::int64_t chunk, void* out, DType out_dtype, std::int64_t out_stride,
                       float* __restrict__ gPartials) {
  const std::int64_t w =
      static_cast<std::int64_t>(blockIdx.x) * kRowWarps + static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  if (w >= s.batch * s.count * splits) return;  // whole warps leave together
  const std::int64_t segment = w / splits;      // across batches
  const std::int64_t batch = segment / s.count;
  const std::int64_t in_batch = segment - batch * s.count;
  const std::int64_t begin = (w - segment * splits) * chunk;
  const std::int64_t len = std::min(chunk, s.length - begin);
  const T* p = gX + batch * s.batch_stride + in_batch * s.segment_stride + begin * s.element_stride;
  float acc = s.element_stride == 1 ? warp_fold_contiguous<T, kOp>(p, len, lane)
                                    : warp_fold_strided<T, kOp>(p, len, s.element_stride, lane);
  acc = reduce_detail::warp_reduce<kOp>(acc);
  if (lane != 0) return;
  if (gPartials == nullptr) {
    reduce_detail::store(out, out_dtype, batch * s.out_batch_stride + in_batch * out_stride, acc);
  } else {
    gPartials[w] = acc;
  }
}

// Thread (x, y) of block (bx, split) folds every kColumnsY-th element of its
// chunk of segment bx * kColumnsX + x; the kColumnsY values of a segment are
// then folded in order of y.
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kColumnsX* kColumnsY)
    reduce_columns_kernel(const T* __restrict__ gX, Segments s, std::int64_t chunk, void* out,
                          DType out_dtype, std::int64_t out_stride, float* __restrict__ gPartials) {
  using F = Fold<kOp>;
  __shared__ float sAcc[kColumnsY][kColumnsX + 1];
  const std::int64_t blocks_a_batch = (s.count + kColumnsX - 1) / kColumnsX;
  const std::int64_t batch = static_cast<std::int64_t>(blockIdx.x) / blocks_a_batch;
  const std::int64_t segment =
      (static_cast<std::int64_t>(blockIdx.x) - batch * blocks_a_batch) * kColumnsX + threadIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * chunk;
  float acc = F::identity();
  if (segment < s.count) {
    const std::int64_t end = std::min(begin + chunk, s.length);
    const T* p = gX + batch * s.batch_stride + segment * s.segment_stride;
#pragma unroll 4
    for (std::int64_t k = begin + threadIdx.y; k < end; k += kColumnsY) {
      acc = F::apply(acc, to_f32(p[k * s.element_stride]));
    }
  }
  sAcc[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || segment >= s.count) return;
#pragma unroll
  for (int y = 1; y < kColumnsY; ++y) acc = F::apply(acc, sAcc[y][threadIdx.x]);
  if (gPartials == nullptr) {
    reduce_detail::store(out, out_dtype, batch * s.out_batch_stride + segment * out_stride, acc);
  } else {
    const std::int64_t all = s.batch * s.count;
    gPartials[static_cast<std::int64_t>(blockIdx.y) * all + batch * s.count + segment] = acc;
  }
}

// The columns kernel with 16-byte loads: where neighbouring segments are
// neighbouring elements and every run of kPer of them starts on a 16-byte
// boundary, thread x reads segments kPer x, ..., kPer x + kPer - 1 at once.
// Each segment is folded in the same order as by reduce_columns_kernel.
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kColumnsX* kColumnsY)
    reduce_columns_vector_kernel(const T* __restrict__ gX, Segments s, std::int64_t chunk,
                                 void* out, DType out_dtype, std::int64_t out_stride,
                                 float* __restrict__ gPartials) {
  using F = Fold<kOp>;
  constexpr int kPer = reduce_detail::kPerVector<T>;
  __shared__ float sAcc[kColumnsY][kColumnsX * kPer + 1];
  const std::int64_t groups = s.count / kPer;
  const std::int64_t blocks_a_batch = (groups + kColumnsX - 1) / kColumnsX;
  const std::int64_t batch = static_cast<std::int64_t>(blockIdx.x) / blocks_a_batch;
  const std::int64_t group =
      (static_cast<std::int64_t>(blockIdx.x) - batch * blocks_a_batch) * kColumnsX + threadIdx.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * chunk;
  float acc[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) acc[e] = F::identity();
  if (group < groups) {
    const std::int64_t end = std::min(begin + chunk, s.length);
    const T* p = gX + batch * s.batch_stride + group * kPer;
#pragma unroll 4
    for (std::int64_t k = begin + threadIdx.y; k < end; k += kColumnsY) {
      const uint4 raw =
          reduce_detail::load_vector(reinterpret_cast<const uint4*>(p + k * s.element_stride));
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        acc[e] = F::apply(acc[e], reduce_detail::vector_element<T>(raw, e));
      }
    }
  }
#pragma unroll
  for (int e = 0; e < kPer; ++e) sAcc[threadIdx.y][threadIdx.x * kPer + e] = acc[e];
  __syncthreads();
  if (threadIdx.y != 0 || group >= groups) return;
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    float v = acc[e];
#pragma unroll
    for (int y = 1; y < kColumnsY; ++y) v = F::apply(v, sAcc[y][threadIdx.x * kPer + e]);
    const std::int64_t segment = group * kPer + e;
    if (gPartials == nullptr) {
      reduce_detail::store(out, out_dtype, batch * s.out_batch_stride + segment * out_stride, v);
    } else {
      const std::int64_t all = s.batch * s.count;
      gPartials[static_cast<std::int64_t>(blockIdx.y) * all + batch * s.count + segment] = v;
    }
  }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A warp a segment where elements are at least as close as segments (rows);
// a thread a segment otherwise (columns), and for rows too short for a warp.
bool warp_per_segment(const Segments& s) {
  if (s.length < kWarp / 2) return false;
  if (s.count * s.batch == 1) return true;
  const std::int64_t neighbour = s.count > 1 ? s.segment_stride : s.batch_stride;
  return std::llabs(s.element_stride) <= std::llabs(neighbour);
}

struct Cut {
  std::int64_t splits = 1;
  std::int64_t chunk = 0;
};

Cut row_cut(const Segments& s) {
  Cut c{1, s.length};
  const std::int64_t segments = s.batch * s.count;
  if (segments >= kTargetWarps || s.length <= 2 * kMinRowChunk) return c;
  const std::int64_t wanted =
      std::min(ceil_div(kTargetWarps, segments), ceil_div(s.length, kMinRowChunk));
  c.chunk = ceil_div(ceil_div(s.length, wanted), kChunkAlignment) * kChunkAlignment;
  c.splits = ceil_div(s.length, c.chunk);
  return c;
}

// `per`: segments a thread (kPerVector for the vector kernel, else 1).
Cut column_cut(const Segments& s, std::int64_t per) {
  Cut c{1, s.length};
  const std::int64_t blocks = ceil_div(s.count, kColumnsX * per) * s.batch;
  if (blocks >= kTargetColumnBlocks || s.length <= 2 * kMinColumnChunk) return c;
  const std::int64_t wanted = std::min(
      {ceil_div(kTargetColumnBlocks, blocks), ceil_div(s.length, kMinColumnChunk), kMaxGridY});
  c.chunk = ceil_div(s.length, wanted);
  c.splits = ceil_div(s.length, c.chunk);
  return c;
}

bool vector_columns(const Segments& s, const void* x, std::int64_t per) {
  return per > 1 && s.segment_stride == 1 && s.count % per == 0 && s.element_stride % per == 0 &&
         s.batch_stride % per == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
}

template <class T, ReduceOp kOp>
void launch_columns_vector(const T* x, const Segments& s, Cut c, void* out, DType out_dtype,
                           std::int64_t out_stride, float* partials, StreamView stream) {
  constexpr int kPer = reduce_detail::kPerVector<T>;
  const dim3 grid(static_cast<unsigned>(ceil_div(s.count / kPer, kColumnsX) * s.batch),
                  static_cast<unsigned>(c.splits));
  loom::detail::launch_on_stream(stream, reduce_columns_vector_kernel<T, kOp>, grid,
                                 dim3(kColumnsX, kColumnsY), 0, x, s, c.chunk, out, out_dtype,
                                 out_stride, partials);
  LOOM_KERNEL_CHECK_LAUNCH("reduce_segments: vector columns kernel launch");
}

template <class T, ReduceOp kOp>
void launch_rows(const T* x, const Segments& s, Cut c, void* out, DType out_dtype,
                 std::int64_t out_stride, float* partials, StreamView stream) {
  const auto blocks = static_cast<unsigned>(ceil_div(s.batch * s.count * c.splits, kRowWarps));
  loom::detail::launch_on_stream(stream, reduce_rows_kernel<T, kOp>, blocks, kRowBlock, 0, x, s,
                                 c.splits, c.chunk, out, out_dtype, out_stride, partials);
  LOOM_KERNEL_CHECK_LAUNCH("reduce_segments: rows kernel launch");
}

template <class T, ReduceOp kOp>
void launch_columns(const T* x, const Segments& s, Cut c, void* out, DType out_dtype,
                    std::int64_t out_stride, float* partials, StreamView stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(s.count, kColumnsX) * s.batch),
                  static_cast<unsigned>(c.splits));
  loom::detail::launch_on_stream(stream, reduce_columns_kernel<T, kOp>, grid,
                                 dim3(kColumnsX, kColumnsY), 0, x, s, c.chunk, out, out_dtype,
                                 out_stride, partials);
  LOOM_KERNEL_CHECK_LAUNCH("reduce_segments: columns kernel launch");
}

}  // namespace

std::size_t reduce_segments_workspace_bytes(const Segments& segments) {
  const std::int64_t all = segments.batch * segments.count;
  if (all <= 0) return 0;
  // The columns kernels cut by how many segments a thread takes (1, or 4 or
  // 8 with 16-byte loads): room for the largest of those cuts.
  std::int64_t splits = 1;
  if (warp_per_segment(segments)) {
    splits = row_cut(segments).splits;
  } else {
    for (std::int64_t per : {1, 4, 8}) splits = std::max(splits, column_cut(segments, per).splits);
  }
  if (splits == 1) return 0;
  return align_up(static_cast<std::size_t>(all * splits) * sizeof(float));
}

void reduce_segments(ReduceOp op, const void* x, DType dtype, const Segments& segments, void* out,
                     DType out_dtype, std::int64_t out_stride, void* workspace, StreamView stream) {
  reduce_detail::require_output_dtype(out_dtype);
  if (segments.count <= 0 || segments.batch <= 0) return;
  reduce_detail::dispatch(dtype, op, [&](auto type, auto op_tag) {
    using T = typename decltype(type)::type;
    constexpr ReduceOp kOp = decltype(op_tag)::value;
    const auto* gX = static_cast<const T*>(x);
    if (warp_per_segment(segments)) {
      const Cut c = row_cut(segments);
      auto* partials = c.splits > 1 ? static_cast<float*>(workspace) : nullptr;
      launch_rows<T, kOp>(gX, segments, c, out, out_dtype, out_stride, partials, stream);
      if (partials == nullptr) return;
      // Each segment's chunks, contiguous: [batch, count, splits].
      const Segments chunks{segments.count,
                            c.splits,
                            c.splits,
                            1,
                            segments.batch,
                            segments.count * c.splits,
                            segments.out_batch_stride};
      launch_rows<float, kOp>(partials, chunks, Cut{1, c.splits}, out, out_dtype, out_stride,
                              nullptr, stream);
      return;
    }
    constexpr std::int64_t kPer = reduce_detail::kPerVector<T>;
    const bool vector = vector_columns(segments, x, kPer);
    const Cut c = column_cut(segments, vector ? kPer : 1);
    auto* partials = c.splits > 1 ? static_cast<float*>(workspace) : nullptr;
    if (vector) {
      launch_columns_vector<T, kOp>(gX, segments, c, out, out_dtype, out_stride, partials, stream);
    } else {
      launch_columns<T, kOp>(gX, segments, c, out, out_dtype, out_stride, partials, stream);
    }
    if (partials == nullptr) return;
    // The chunks' partials, [splits, batch, count]: fold down each column.
    const Segments chunks{segments.count,
                          c.splits,
                          1,
                          segments.batch * segments.count,
                          segments.batch,
                          segments.count,
                          segments.out_batch_stride};
    launch_columns<float, kOp>(partials, chunks, Cut{1, c.splits}, out, out_dtype, out_stride,
                               nullptr, stream);
  });
}

}  // namespace loom::kernels
