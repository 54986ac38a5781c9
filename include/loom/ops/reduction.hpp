#pragma once
/// @file ops/reduction.hpp
/// Reductions: sum, max, min, of whole tensors or along a dimension (Lecture 9).
///
/// Inputs are f32, f16 or bf16, always accumulated in f32 (the CPU backend
/// accumulates in double); outputs are f32, f16 or bf16, in the input's
/// memory space. An empty input gives the identity: sum 0, max -inf, min
/// +inf. A NaN anywhere makes the result NaN.
///
/// @code
/// auto total = rt.tensor<float>({1});
/// g.add(loom::ops::sum(x, total));                        // every element of x
/// auto row_max = rt.tensor<float>({x.size(0)});
/// g.add(loom::ops::max(x, /*dim=*/1, row_max));           // each row of a 2-D x
/// g.add(loom::ops::sum(x, total, {.deterministic = true}));
/// @endcode
///
/// Determinism. No reduction uses atomics: the same input, at the same
/// address modulo 16 bytes, gives the same bits on every run on one device.
/// The default whole-tensor kernel sizes its grid to the GPU, so another GPU
/// model may round differently; ReductionOptions::deterministic fixes the grid
/// (a function of the element count only), for the same bits on every GPU.
/// Reductions along a dimension are always cut by the shape alone.
///
/// Strided views. A whole-tensor reduction takes any view whose elements
/// form at most three evenly strided runs (slices, transposes, reshapes of
/// those, in any order of dimensions); a reduction along `dim` takes any view
/// whose other dimensions merge into at most two evenly strided runs (so the
/// middle dimension of a rank-3 tensor is fine), and writes an output that
/// may be strided likewise. Other views are rejected at submit, saying so
/// (call contiguous() first).

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/ops/variant.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace loom::ops {

/// The kernel of a whole-tensor reduction (variant.hpp), in the order
/// Lecture 9 teaches them; `automatic` (the default) is warp_shuffle, and one
/// launch of one block for small inputs.
enum class ReductionVariant : std::uint8_t {
  automatic,
  interleaved,      ///< divergent tree in global memory (needs n floats of workspace)
  divergence_free,  ///< sequential addressing, still in global memory
  shared,           ///< the tree in shared memory, first step during the load
  coarsened,        ///< each thread folds 16 elements before the tree
  warp_shuffle,     ///< 16-byte loads, grid-stride, warp shuffles, two passes
};
template <>
struct VariantNames<ReductionVariant> {
  static constexpr std::array<std::string_view, 6> names = {
      "automatic", "interleaved", "divergence_free", "shared", "coarsened", "warp_shuffle"};
};

struct ReductionOptions {
  ReductionVariant variant = ReductionVariant::automatic;
  /// The same bits on every GPU model, not only on every run.
  bool deterministic = false;
};

/// out = the sum of every element of x; out holds one element.
/// Validation at submit (InvalidArgument naming the task): dtypes, out's
/// size, one memory space, a view the kernels can take.
LOOM_API OpPtr sum(const Tensor& x, const Tensor& out, ReductionOptions options = {});
/// out = the largest element of x (-inf for an empty x).
LOOM_API OpPtr max(const Tensor& x, const Tensor& out, ReductionOptions options = {});
/// out = the smallest element of x (+inf for an empty x).
LOOM_API OpPtr min(const Tensor& x, const Tensor& out, ReductionOptions options = {});

/// Sums along `dim` (negative counts from the end): out has x's shape without
/// `dim`, or with `dim` of extent 1. On a 2-D x, dim 1 sums each row and
/// dim 0 each column.
LOOM_API OpPtr sum(const Tensor& x, int dim, const Tensor& out);
/// The largest element along `dim`; shapes as for sum.
LOOM_API OpPtr max(const Tensor& x, int dim, const Tensor& out);
/// The smallest element along `dim`; shapes as for sum.
LOOM_API OpPtr min(const Tensor& x, int dim, const Tensor& out);

}  // namespace loom::ops
