// Ring attention's merge and gradient accumulation (ring.hpp): memory-bound
// elementwise kernels, a thread four elements of a row.
#include "attention/ring.hpp"
#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <cstdint>

namespace loom::kernels {
namespace {

constexpr int kBlock = 256;
constexpr int kChunk = 4;              // elements of a row a thread
constexpr unsigned kMaxBlocks = 8192;  // a grid-stride loop past that

struct RowIndex {
  std::int64_t b, h, i, e;  // batch, head, row, first element of the chunk
};

__host__ __device__ inline RowIndex row_index(std::int64_t item, const std::int64_t heads,
                                              const std::int64_t rows, const std::int64_t chunks) {
  RowIndex r{};
  r.e = item % chunks * kChunk;
  std::int64_t rest = item / chunks;
  r.i = rest % rows;
  rest /= rows;
  r.h = rest % heads;
  r.b = rest / heads;
  return r;
}

__host__ __device__ inline std::int64_t at(const AttentionTensor& t, const RowIndex& r) {
  return r.b * t.batch_stride + r.h * t.head_stride + r.i * t.row_stride;
}

__global__ void __launch_bounds__(kBlock) merge_kernel(AttentionMergeArgs p) {
  const std::int64_t chunks = p.head_dim / kChunk;
  const std::int64_t items = p.batch * p.heads * p.rows * chunks;
  for (std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x;
       item < items; item += static_cast<std::int64_t>(gridDim.x) * kBlock) {
    const RowIndex r = row_index(item, p.heads, p.rows, chunks);
    const float lb = static_cast<const float*>(p.part_lse.data)[at(p.part_lse, r)];
    float wa = 0.0F;
    float wb = 1.0F;
    float lse = lb;
    if (!p.first) {
      const float la = static_cast<const float*>(p.acc_lse.data)[at(p.acc_lse, r)];
      const float m = fmaxf(la, lb);
      if (m == -INFINITY) {
        wb = 0.0F;  // neither kept a key: out stays 0
      } else {
        wa = __expf(la - m);
        wb = __expf(lb - m);
        const float s = wa + wb;
        lse = m + __logf(s);
        wa /= s;
        wb /= s;
      }
    }
    auto* acc = static_cast<float*>(const_cast<void*>(p.acc.data)) + at(p.acc, r) + r.e;
    const std::int64_t part_at = at(p.part, r) + r.e;
    float v[kChunk];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const float b = load_as_f32(p.part.data, p.dtype, part_at + c);
      v[c] = p.first ? b : wa * acc[c] + wb * b;
      acc[c] = v[c];
    }
    if (p.out.data != nullptr) {
      const std::int64_t out_at = at(p.out, r) + r.e;
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        store_from_f32(const_cast<void*>(p.out.data), p.dtype, out_at + c, v[c]);
      }
    }
    if (r.e == 0) {
      static_cast<float*>(const_cast<void*>(p.acc_lse.data))[at(p.acc_lse, r)] = lse;
      if (p.out_lse.data != nullptr) {
        static_cast<float*>(const_cast<void*>(p.out_lse.data))[at(p.out_lse, r)] = lse;
      }
    }
  }
}

__global__ void __launch_bounds__(kBlock) accumulate_kernel(GradientAccumulateArgs p) {
  const std::int64_t chunks = p.head_dim / kChunk;
  const std::int64_t items = p.batch * p.heads * p.rows * chunks;
  for (std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x;
       item < items; item += static_cast<std::int64_t>(gridDim.x) * kBlock) {
    const RowIndex r = row_index(item, p.heads, p.rows, chunks);
    auto* acc = static_cast<float*>(const_cast<void*>(p.acc.data)) + at(p.acc, r) + r.e;
    float v[kChunk];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) v[c] = p.first ? 0.0F : acc[c];
    if (p.part.data != nullptr) {
      const std::int64_t part_at = at(p.part, r) + r.e;
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        v[c] += load_as_f32(p.part.data, p.dtype, part_at + c);
        acc[c] = v[c];
      }
    }
    if (p.out.data != nullptr) {
      const std::int64_t out_at = at(p.out, r) + r.e;
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        store_from_f32(const_cast<void*>(p.out.data), p.dtype, out_at + c, v[c]);
      }
    }
  }
}

bool is_16bit(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

unsigned grid_for(std::int64_t items) {
  const std::int64_t blocks = (items + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::min<std::int64_t>(blocks, kMaxBlocks));
}

}  // namespace

bool attention_merge_fits(const AttentionMergeArgs& p) noexcept {
  return is_16bit(p.dtype) && p.head_dim > 0 && p.head_dim % kChunk == 0;
}

bool gradient_accumulate_fits(const GradientAccumulateArgs& p) noexcept {
  return is_16bit(p.dtype) && p.head_dim > 0 && p.head_dim % kChunk == 0;
}

void attention_merge(const AttentionMergeArgs& p, StreamView stream) {
  if (!attention_merge_fits(p)) {
    throw InvalidArgument(
        "attention merge: needs bf16 or f16 and a head dim that is a multiple of 4");
  }
  const std::int64_t items = p.batch * p.heads * p.rows * (p.head_dim / kChunk);
  if (items <= 0) return;
  loom::detail::launch_on_stream(stream, merge_kernel, grid_for(items), kBlock, 0, p);
  LOOM_KERNEL_CHECK_LAUNCH("attention merge kernel launch");
}

void gradient_accumulate(const GradientAccumulateArgs& p, StreamView stream) {
  if (!gradient_accumulate_fits(p)) {
    throw InvalidArgument(
        "gradient accumulate: needs bf16 or f16 and a head dim that is a multiple of 4");
  }
  const std::int64_t items = p.batch * p.heads * p.rows * (p.head_dim / kChunk);
  if (items <= 0) return;
  loom::detail::launch_on_stream(stream, accumulate_kernel, grid_for(items), kBlock, 0, p);
  LOOM_KERNEL_CHECK_LAUNCH("gradient accumulate kernel launch");
}

}  // namespace loom::kernels
