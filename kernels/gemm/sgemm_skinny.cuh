#pragma once
// The skinny SGEMM: C with at most kSkinnyMaxN columns (a classifier's
// logits, their weight gradient), where the tiled kernels' 64- or 128-wide
// tiles leave most of the GPU idle (N = 10, M = 256: 4 blocks). Here a block
// is one warp computing kSkinnyRows rows of C over one slice of K: the
// grid is (rows / kSkinnyRows) x (slices of K), hundreds of blocks.
//
// Each lane walks k = lane, lane + 32, ... of its slice, accumulating all
// N columns of its rows in registers; a butterfly of shuffles then sums the
// 32 lanes. With one slice the warp applies the epilogue and stores C; with
// several, each writes its partial sums to a workspace [slices, M, N], and
// sgemm_skinny_reduce adds the slices in a fixed order (the same bits every
// run) and applies the epilogue. C with at most kSkinnyMaxN rows takes the
// same kernels on the transposed problem (C^T = B^T A^T, by strides).
//
// Included by sgemm.cu and by the emulated tests (blocks of one warp).

#include "gemm/sgemm_common.cuh"

#include <algorithm>
#include <cstdint>

namespace loom::kernels::sgemm_detail {

inline constexpr int kSkinnyMaxN = 32;
inline constexpr int kSkinnyRows = 4;
inline constexpr int kSkinnyLanes = 32;
// Slices of K: enough warps to fill the GPU (about kSkinnyBlocks), each
// slice at least kSkinnyMinSlice long so that its lanes have work beside the
// reduction.
inline constexpr std::int64_t kSkinnyBlocks = 512;
inline constexpr std::int64_t kSkinnyMinSlice = 128;

/// C^T = B^T A^T: the same product with rows and columns swapped, by strides.
inline SgemmArgs transposed(const SgemmArgs& p) {
  SgemmArgs t = p;
  t.m = p.n;
  t.n = p.m;
  t.a = {p.b.data, p.b.col_stride, p.b.row_stride};
  t.b = {p.a.data, p.a.col_stride, p.a.row_stride};
  t.c = {p.c.data, p.c.col_stride, p.c.row_stride};
  t.bias = {p.bias.data, p.bias.col_stride, p.bias.row_stride};
  return t;
}

inline bool skinny_shape(const SgemmArgs& p) {
  return p.k > 0 && (p.n <= kSkinnyMaxN || p.m <= kSkinnyMaxN);
}

/// What a skinny launch runs: the problem oriented so that C has at most
/// kSkinnyMaxN columns, cut into `slices` slices of K of k_slice each.
struct SkinnyPlan {
  SgemmArgs q;
  std::int64_t slices = 1;
  std::int64_t k_slice = 0;
};

/// warp_tiled split along K where the output tiles cannot fill the GPU and K
/// is long: slices of at least kSplitMinSlice (a multiple of every tile's
/// BK, so that slices keep the operands' 16-byte alignment) until about
/// kSkinnyBlocks blocks. 1 where it does not apply.
///
/// A block of warp_tiled alone on its SM spends ~0.5 µs on each step of BK
/// (its loads' latency, nothing to hide it behind), so a slice's length sets
/// the kernel's time: at 512, every shape with few tiles took ~30 µs
/// (bench_small_shapes, H100: [256, 64] x K 1024, [64, 1024] x K 1024 and
/// [64, 64] x K 8192 alike, against 7.5-11 µs for PyTorch). Slices of 64
/// measured 10-16 µs there. The step's [256, 1024] x K 512 (64 tiles) went
/// from 28 to 20 µs split in four; [512, 1024] x K 256 (128 tiles) from 16.5
/// to 21 split in two, so the split stops below 100 tiles.
inline constexpr std::int64_t kSplitMinSlice = 64;
inline constexpr std::int64_t kSplitBelowBlocks = 100;
inline std::int64_t split_k_slice(const SgemmArgs& p, std::int64_t tile_blocks) {
  if (tile_blocks >= kSplitBelowBlocks || p.k < 2 * kSplitMinSlice) return 0;
  const std::int64_t wanted = std::max<std::int64_t>(2, kSkinnyBlocks / 2 / tile_blocks);
  const std::int64_t slices = std::min(wanted, p.k / kSplitMinSlice);
  const std::int64_t slice = (p.k + slices - 1) / slices;
  return (slice + 15) / 16 * 16;
}

/// One slice without a workspace to sum partials in.
inline SkinnyPlan plan_skinny(const SgemmArgs& p, bool have_workspace) {
  SkinnyPlan plan{p.n <= kSkinnyMaxN ? p : transposed(p)};
  const SgemmArgs& q = plan.q;
  std::int64_t slices = 1;
  if (have_workspace) {
    // At least one: an empty C plans one slice rather than divide by zero.
    const std::int64_t row_blocks =
        std::max<std::int64_t>(1, (q.m + kSkinnyRows - 1) / kSkinnyRows);
    const std::int64_t most = std::max<std::int64_t>(1, q.k / kSkinnyMinSlice);
    slices = std::clamp<std::int64_t>(kSkinnyBlocks / row_blocks, 1, most);
  }
  plan.k_slice = std::max<std::int64_t>(1, (q.k + slices - 1) / slices);
  plan.slices = std::max<std::int64_t>(1, (q.k + plan.k_slice - 1) / plan.k_slice);
  return plan;
}

// Internal linkage, as the other kernels' headers: the emulated tests compile
// the same names for the host.
namespace {

/// The columns the instantiation holds: N rounded up to 8, 16 or 32.
template <int kN>
__global__ void __launch_bounds__(kSkinnyLanes)
    sgemm_skinny_n(SgemmArgs p, float* partial, std::int64_t k_slice) {
  const int lane = static_cast<int>(threadIdx.x);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * kSkinnyRows;
  const std::int64_t slice = blockIdx.y;
  const std::int64_t k_begin = slice * k_slice;
  const std::int64_t k_end = k_begin + k_slice < p.k ? k_begin + k_slice : p.k;
  float acc[kSkinnyRows][kN];
  CUTE_UNROLL
  for (int r = 0; r < kSkinnyRows; ++r) {
    CUTE_UNROLL
    for (int n = 0; n < kN; ++n) acc[r][n] = 0.0F;
  }
  for (std::int64_t k = k_begin + lane; k < k_end; k += kSkinnyLanes) {
    float b[kN];
    CUTE_UNROLL
    for (int n = 0; n < kN; ++n) {
      b[n] = n < p.n ? p.b.data[k * p.b.row_stride + n * p.b.col_stride] : 0.0F;
    }
    CUTE_UNROLL
    for (int r = 0; r < kSkinnyRows; ++r) {
      const std::int64_t m = m0 + r;
      const float a = m < p.m ? p.a.data[m * p.a.row_stride + k * p.a.col_stride] : 0.0F;
      CUTE_UNROLL
      for (int n = 0; n < kN; ++n) acc[r][n] = fmaf(a, b[n], acc[r][n]);
    }
  }
  // Every lane ends with the warp's sums (a butterfly: the same adds in the
  // same order on every lane).
  CUTE_UNROLL
  for (int r = 0; r < kSkinnyRows; ++r) {
    CUTE_UNROLL
    for (int n = 0; n < kN; ++n) {
      CUTE_UNROLL
      for (int offset = kSkinnyLanes / 2; offset > 0; offset /= 2) {
        acc[r][n] += __shfl_xor_sync(0xFFFFFFFFU, acc[r][n], offset);
      }
    }
  }
  // Lane n stores column n of the warp's rows.
  CUTE_UNROLL
  for (int r = 0; r < kSkinnyRows; ++r) {
    const std::int64_t m = m0 + r;
    CUTE_UNROLL
    for (int n = 0; n < kN; ++n) {
      if (lane != n || n >= p.n || m >= p.m) continue;
      if (gridDim.y == 1) {
        store_epilogue(p.c.data[m * p.c.row_stride + n * p.c.col_stride], acc[r][n], m, n, p);
      } else {
        partial[(slice * p.m + m) * p.n + n] = acc[r][n];
      }
    }
  }
}

/// C = epilogue(sum of the slices' partials), one thread an element of C,
/// the slices added in order.
__global__ void __launch_bounds__(256)
    sgemm_skinny_reduce(SgemmArgs p, const float* partial, std::int64_t slices) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.m * p.n) return;
  const std::int64_t m = i / p.n;
  const std::int64_t n = i % p.n;
  float sum = 0.0F;
  for (std::int64_t s = 0; s < slices; ++s) sum += partial[s * p.m * p.n + i];
  store_epilogue(p.c.data[m * p.c.row_stride + n * p.c.col_stride], sum, m, n, p);
}

}  // namespace
}  // namespace loom::kernels::sgemm_detail
