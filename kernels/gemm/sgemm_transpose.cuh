#pragma once
// warp_tiled with both operands K-major (A row-major, B column-major) copies
// A M-major into the workspace first, when the product is large enough to
// pay for it, and runs the M-major-A kernel on the copy.
//
// Why: the warp-tiled kernel keeps its shared tiles M- (N-) contiguous, so a
// K-major operand is turned around through registers on every K step, and
// with both operands K-major that costs the most (4096^3, H100, 2026-12-07:
// 0.78 of cuBLAS, against 0.93 with A M-major and B K-major). The copy moves
// 8 M K bytes where the product does 2 M N K flops: its time over the
// product's is 4 (flop rate / bandwidth) / N, about 65 / N on an H100 (51
// TFLOP/s, 3.2 TB/s), so under 7 % from N = 1024, where the layout gains ~15 %.

#include "gemm/sgemm.hpp"

#include <cstdint>

namespace loom::kernels::sgemm_detail {

inline constexpr int kTransposeTile = 32;
inline constexpr int kTransposeRows = 8;  // block of 32 x 8 threads, 4 elements each
inline constexpr std::int64_t kTransposeMinN = 1024;
inline constexpr std::int64_t kTransposeMaxGrid = 65535;  // M's tiles on the grid's y

/// The copy's leading dimension: M rounded up to whole 16-byte vectors, so
/// that the kernel's vector loads take it.
inline std::int64_t m_major_ld(std::int64_t m) { return (m + 3) / 4 * 4; }

/// The copy's launch: a block a 32 x 32 tile of A, K's tiles on the grid's
/// x and M's on its y.
inline dim3 copy_a_grid(std::int64_t m, std::int64_t k) {
  return dim3(static_cast<unsigned>((k + kTransposeTile - 1) / kTransposeTile),
              static_cast<unsigned>((m + kTransposeTile - 1) / kTransposeTile));
}
inline dim3 copy_a_block() { return dim3(kTransposeTile, kTransposeRows); }

/// Whether warp_tiled copies A M-major first: both operands K-major, a
/// 128 x 128 tile (a wave or more of blocks), no split along K, and N large
/// enough that the copy is a small part of the product.
inline bool copies_a_m_major(const SgemmArgs& p, bool wide_tile, std::int64_t k_slice) {
  const bool both_k_major = p.a.col_stride == 1 && p.b.row_stride == 1;
  const bool grid_fits = (p.m + kTransposeTile - 1) / kTransposeTile <= kTransposeMaxGrid;
  return both_k_major && wide_tile && k_slice == 0 && p.n >= kTransposeMinN && p.m > 1 && grid_fits;
}

// Internal linkage, as the other kernels' headers: the emulated tests compile
// the same name for the host.
namespace {

/// out(i, kk) = a(i, kk) for i < m, kk < k, where a is K-major (element
/// (i, kk) at a[i * lda + kk]) and out M-major (at out[kk * ld + i]). The
/// classic shared-memory transpose: a warp reads 32 consecutive elements of
/// a row of A and writes 32 consecutive elements of a column; the tile's
/// padding column keeps the turn free of bank conflicts.
__global__ void __launch_bounds__(kTransposeTile* kTransposeRows)
    sgemm_copy_a_m_major(const float* a, std::int64_t lda, float* out, std::int64_t ld, int m,
                         int k) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int k0 = static_cast<int>(blockIdx.x) * kTransposeTile;
  const int i0 = static_cast<int>(blockIdx.y) * kTransposeTile;
  const int x = static_cast<int>(threadIdx.x);
  for (int r = static_cast<int>(threadIdx.y); r < kTransposeTile; r += kTransposeRows) {
    const int i = i0 + r;
    const int kk = k0 + x;
    if (i < m && kk < k) tile[r][x] = a[static_cast<std::int64_t>(i) * lda + kk];
  }
  __syncthreads();
  for (int r = static_cast<int>(threadIdx.y); r < kTransposeTile; r += kTransposeRows) {
    const int kk = k0 + r;
    const int i = i0 + x;
    if (i < m && kk < k) out[static_cast<std::int64_t>(kk) * ld + i] = tile[x][r];
  }
}

}  // namespace
}  // namespace loom::kernels::sgemm_detail
