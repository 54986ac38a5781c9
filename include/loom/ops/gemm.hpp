#pragma once
/// @file ops/gemm.hpp
/// Matrix multiplication: f32 (SGEMM, Lectures 5, 8, 15), f16 and bf16 on
/// tensor cores with f32 accumulation; single or batched.

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/ops/variant.hpp>
#include <loom/tensor.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace loom::ops {

/// c = alpha * a * b + beta * c: a is M x K, b is K x N, c is M x N, all in
/// one memory space; or a batch, [B, M, K] x [B, K, N] -> [B, M, N], where a
/// 2-D operand is shared by every entry. f32 operands use FP32 math (no
/// TF32); f16 and bf16 accumulate in f32, c in their type or f32. Each operand is
/// row-major or column-major: a transposed view (Tensor::transpose) is how a
/// column-major operand is passed, and leading dimensions come from the
/// strides (a slice of a wider matrix is fine). beta == 0 ignores c's
/// contents, NaN included. On a GPU the fastest kernel for the shape runs;
/// the CPU backend runs the reference.
///
/// Validated at submit (InvalidArgument naming the task): dtypes, ranks,
/// inner dimensions, other strided layouts (call contiguous() first), and c
/// sharing storage with a or b.
///
/// @code
/// g.add(loom::ops::matmul(a, b, c));                      // c = a b
/// g.add(loom::ops::matmul(x.transpose(0, 1), w, y, 2.0f, 1.0f));  // y = 2 x^T w + y
/// @endcode
/// Thread-safe: builds an op and touches no data.
LOOM_API OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c, float alpha = 1.0F,
                      float beta = 0.0F);

/// The activation a matmul's epilogue applies.
enum class Activation : std::uint8_t { none, relu, gelu_tanh };

/// What happens to each element of c as it is stored, in the same kernel:
///   c = activation(alpha * a b + beta * c + bias)
/// bias (f32, optional) broadcasts to c's shape by NumPy's rule: [N] or
/// [1, N] adds bias[n] to every row (a linear layer's bias), [M, 1] adds
/// bias[m] to every column; its layout may be strided. relu and gelu_tanh
/// are the elementwise maps' (loom/ops/elementwise.hpp).
struct MatmulEpilogue {
  float alpha = 1.0F;
  float beta = 0.0F;
  Tensor bias{};
  Activation activation = Activation::none;
};

/// c = epilogue(a b): a linear layer's forward in one kernel.
/// @code
/// g.add(loom::ops::matmul(x, w, h, {.bias = b, .activation = loom::ops::Activation::relu}));
/// @endcode
LOOM_API OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c,
                      const MatmulEpilogue& epilogue);

/// matmul's kernels on a GPU (variant.hpp; the CPU backend runs its
/// reference whatever the variant). f32 (the SGEMM lecture steps): naive to
/// skinny; f16 and bf16 (tensor cores): mma_sync to wgmma_cluster. A variant
/// of the other dtype's family is rejected at submit, naming the task; one
/// that cannot take the operands or the device fails the task saying why,
/// except that f32's fall back as automatic's rules do (warp_tiled to
/// register_tiled for strided operands, skinny to warp_tiled for C wider
/// and taller than 32).
enum class MatmulVariant : std::uint8_t {
  automatic,       ///< the fastest for the shape and device (see the README's table)
  naive,           ///< f32: one thread an element of C, A and B from global memory
  tiled_manual,    ///< f32: 32 x 32 tiles through shared memory, indices by hand
  tiled_cute,      ///< f32: the same with CuTe's layouts doing the indexing
  register_tiled,  ///< f32: 128 x 128 tiles, 8 x 8 elements a thread in registers
  warp_tiled,      ///< f32: warp tiles over CuTe, split along K where it has few tiles
  skinny,          ///< f32: C with at most 32 columns or rows, a warp over slices of K
  mma_sync,        ///< f16/bf16: mma.sync with cp.async stages (sm_80 and up)
  simple,          ///< f16/bf16: 32 x 32 tiles, any layout and alignment
  wgmma,           ///< f16/bf16: Hopper's warpgroup MMA fed by TMA (compute capability 9.0)
  wgmma_cluster,   ///< f16/bf16: wgmma in clusters of two sharing B's tiles (9.0)
};
template <>
struct VariantNames<MatmulVariant> {
  static constexpr std::array<std::string_view, 11> names = {
      "automatic", "naive",    "tiled_manual", "tiled_cute", "register_tiled", "warp_tiled",
      "skinny",    "mma_sync", "simple",       "wgmma",      "wgmma_cluster"};
};

/// As above, on the kernel `variant` names (for the lectures' steps and
/// benchmarks; automatic is what the other forms run).
/// @code
/// g.add(loom::ops::matmul(a, b, c, {}, loom::ops::MatmulVariant::tiled_cute));
/// @endcode
LOOM_API OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c,
                      const MatmulEpilogue& epilogue, MatmulVariant variant);

}  // namespace loom::ops
