#pragma once
// SGEMM over fp32: C = alpha * A * B + beta * C, with FP32 FMA math only (no
// TF32). A is M x K, B is K x N, C is M x N; each is described by two strides
// (in elements), so row-major, column-major (a transposed view) and padded
// leading dimensions all reach the kernels unchanged.
//
// Variants, in the order the lectures teach them:
//   naive           one thread per element of C; every operand read from
//                   global memory K times. What choose_sgemm_variant picks
//                   for K <= 16, where the product is mostly a write of C.
//   tiled_manual    32 x 32 tiles of A and B staged in shared memory, indexed
//                   by hand; each thread still computes one element of C.
//   tiled_cute      the same algorithm over CuTe: local_tile carves the
//                   block's tiles, local_partition hands elements to threads.
//                   Read it beside tiled_manual.
//   register_tiled  thread coarsening: a 128 x 128 block tile, each thread
//                   accumulating an 8 x 8 micro-tile in registers, so each
//                   value read from shared memory feeds 8 FMAs.
//   warp_tiled      block tile -> warp tile -> thread tile: each warp owns a
//                   region of C and walks it in 16 x 32 steps, each thread
//                   holding 4 x 4 sub-tiles whose shared-memory reads are
//                   128-bit; 128-bit global loads through a TiledCopy where
//                   the operand's layout and alignment allow; two shared
//                   buffers so the next tile's loads overlap this tile's math.
//                   The default.
//   skinny          C with at most 32 columns (or rows: the transposed
//                   problem): a warp a block computing 4 rows over a slice of
//                   K, slices summed in a fixed order (sgemm_skinny.cuh).
//                   What choose_sgemm_variant picks for such shapes; a shape
//                   wider both ways runs the default instead.
//
// Any M, N, K: blocks at the edges take a predicated path (elements outside
// the matrix read as zero, stores masked). beta == 0 never reads C, so a NaN
// in C does not leak into the result.
//
// The epilogue, in every variant, as each element of C is stored:
//   C = act(alpha * A B + beta * C + bias)
// bias is a matrix with zero strides where it broadcasts (a bias a column:
// row stride 0; a bias a row: column stride 0), act none, relu or
// gelu_tanh (the elementwise maps' functions, elementwise/map_math.inc).

#include <loom/cuda_interop.hpp>
#include <loom/ops/variant.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace loom::kernels {

enum class SgemmVariant { naive, tiled_manual, tiled_cute, register_tiled, warp_tiled, skinny };

/// Block tiles of warp_tiled (BM x BN x BK), swept by the benchmark.
enum class SgemmWarpTile { t128x128x8, t128x128x16, t128x64x8, t64x64x8 };

}  // namespace loom::kernels

// Named by the tables every variant family uses (loom/ops/variant.hpp): the
// benchmarks' labels and the tests' messages print these.
namespace loom::ops {
template <>
struct VariantNames<kernels::SgemmVariant> {
  static constexpr std::array<std::string_view, 6> names = {
      "naive", "tiled_manual", "tiled_cute", "register_tiled", "warp_tiled", "skinny"};
};
template <>
struct VariantNames<kernels::SgemmWarpTile> {
  static constexpr std::array<std::string_view, 4> names = {"128x128x8", "128x128x16", "128x64x8",
                                                            "64x64x8"};
};
// A value added to an enum needs its name in the table: the last ones must match.
static_assert(to_string(kernels::SgemmVariant::skinny) == "skinny");
static_assert(to_string(kernels::SgemmWarpTile::t64x64x8) == "64x64x8");
}  // namespace loom::ops

namespace loom::kernels {

// So that to_string(variant) resolves here and by argument-dependent lookup.
using loom::ops::to_string;

inline constexpr SgemmVariant kSgemmDefault = SgemmVariant::warp_tiled;

/// One matrix operand: element (i, j) is data[i * row_stride + j * col_stride].
template <class T>
struct MatrixRef {
  T* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 0;
};

/// The epilogue's activation.
enum class SgemmActivation : std::uint8_t { none, relu, gelu_tanh };

/// The problem: C (m x n) = act(alpha * A (m x k) * B (k x n) + beta * C + bias).
struct SgemmArgs {
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0F;
  float beta = 0.0F;
  MatrixRef<const float> a;
  MatrixRef<const float> b;
  MatrixRef<float> c;
  /// Null data: no bias. Zero strides broadcast it (see the header comment).
  MatrixRef<const float> bias;
  SgemmActivation activation = SgemmActivation::none;
  /// warp_tiled split along K (set by sgemm(), not by callers): slice z of
  /// the grid computes K from z * k_slice into partial + z * m * n (row-major,
  /// no epilogue); a reduction adds the slices in order and applies it.
  std::int64_t k_slice = 0;
  float* partial = nullptr;
  /// Where its pointers are: a compiled graph re-points a launch that takes it.
  static constexpr std::array<std::size_t, 5> loom_pointer_offsets();
};

constexpr std::array<std::size_t, 5> SgemmArgs::loom_pointer_offsets() {
  return {offsetof(SgemmArgs, a) + offsetof(MatrixRef<const float>, data),
          offsetof(SgemmArgs, b) + offsetof(MatrixRef<const float>, data),
          offsetof(SgemmArgs, c) + offsetof(MatrixRef<float>, data),
          offsetof(SgemmArgs, bias) + offsetof(MatrixRef<const float>, data),
          offsetof(SgemmArgs, partial)};
}
static_assert(std::is_standard_layout_v<SgemmArgs>, "offsetof needs a standard layout");

/// The warp-tiled tile the default picks for a shape: the largest whose
/// blocks still fill the GPU's SMs; at 128 x 128, K steps of 16 for plain
/// products and of 8 where a bias or an activation is fused (measured:
/// bench/RESULTS.md, 2026-12-07).
SgemmWarpTile default_warp_tile(std::int64_t m, std::int64_t n, int sm_count,
                                bool fused_epilogue = false) noexcept;

/// The variant for a shape: skinny where C has at most 32 columns or rows
/// (and K is not empty), else the default. A first rule, to be tuned from
/// bench_gemm's small shapes.
SgemmVariant choose_sgemm_variant(const SgemmArgs& args) noexcept;

/// Device scratch sgemm() can use for this shape and variant: partial sums
/// over slices of K, for skinny, and for warp_tiled where K dominates (too
/// few output tiles to fill the GPU, a long K: split-K); for warp_tiled at
/// 128 x 128 tiles with both operands K-major (A row-major, B column-major)
/// and N of 1024 or more, an M-major copy of A that the product then reads
/// (sgemm_transpose.cuh). Without it, K runs in one slice and the operands
/// are read as they are: correct, slower.
std::size_t sgemm_workspace_bytes(const SgemmArgs& args, SgemmVariant variant,
                                  SgemmWarpTile tile = SgemmWarpTile::t128x128x8) noexcept;

/// Enqueues C = alpha * A * B + beta * C on `stream`; device pointers. m or n
/// of 0 launches nothing; k of 0 scales C by beta. Extents must fit in int
/// (2^31 - 1). warp_tiled needs each of A and B to have a unit stride (row-
/// or column-major); other layouts fall back to register_tiled. `workspace`
/// holds sgemm_workspace_bytes(args, variant, tile) bytes, or is null.
/// @throws CudaError if a launch fails; InvalidArgument for extents too large.
void sgemm(const SgemmArgs& args, StreamView stream, SgemmVariant variant = kSgemmDefault,
           SgemmWarpTile tile = SgemmWarpTile::t128x128x8, void* workspace = nullptr);

/// The CPU reference, on host pointers: blocked, accumulating in double, so
/// its error is far below the GPU's and tests can compare against it.
void sgemm_reference(const SgemmArgs& args);

}  // namespace loom::kernels
