#pragma once
/// @file ops/gemm.hpp
/// Matrix multiplication: f32 (SGEMM, Lectures 5, 8, 15), f16 and bf16 on
/// tensor cores with f32 accumulation; single or batched.

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/tensor.hpp>

#include <cstdint>

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

}  // namespace loom::ops
