#pragma once
/// @file ops/index.hpp
/// The index ops of a training step: argmax and argmin along a dimension,
/// gather, scatter_add, one_hot and index_select (an embedding lookup).
///
/// Common rules. Data are f32, f16 or bf16 (scatter_add: f32); indices are
/// i32 or i64 (argmax and argmin write i64). Inputs may have any strides
/// (a transpose, a slice with a step, an expanded view); outputs any strides
/// whose elements are distinct, except one_hot's, which is contiguous. A
/// negative dim counts from the end. An output must not share storage with
/// an input. Bad inputs (dtypes, ranks, shapes, dim out of range, memory
/// spaces, overlaps) are rejected at submit, naming the task.
///
/// Indices out of range: a GPU kernel cannot throw, so an index outside
/// [0, extent) shows in the result instead, the same on the CPU and the
/// CUDA backends: gather and index_select write NaN (the dtype's canonical
/// NaN) to each output element it selected, one_hot writes NaN across the
/// label's row, and scatter_add skips the element (adds nothing).
///
/// Empty tensors are fine: an op with nothing to write writes nothing.

#include <loom/export.hpp>
#include <loom/op.hpp>

namespace loom::ops {

/// indices = the position of the largest element of x along `dim` (x: f32,
/// f16 or bf16, rank 1 to 8). indices is i64 with x's shape without `dim`,
/// or with `dim` kept at extent 1 (either: the same elements in the same
/// order). `values`, when defined, receives the largest elements themselves:
/// indices' shape, x's dtype (an undefined Tensor, the default, means not
/// wanted).
///
/// Ties go to the first (lowest) index. A NaN wins over every number (its
/// first occurrence wins), as in torch; -0 and +0 tie. A dimension of
/// extent 0 is rejected at submit: nothing has no largest element.
/// @code
///   g.add(loom::ops::argmax(logits, -1, predicted));          // [B, C] -> [B]
///   g.add(loom::ops::argmax(scores, 1, best, best_score));    // with the values
/// @endcode
LOOM_API OpPtr argmax(const Tensor& x, int dim, const Tensor& indices,
                      const Tensor& values = Tensor{});

/// As argmax, for the smallest element (a NaN still wins, as in torch).
LOOM_API OpPtr argmin(const Tensor& x, int dim, const Tensor& indices,
                      const Tensor& values = Tensor{});

/// torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] for dim 0,
/// x[i][index[i][j][k]][k] for dim 1, and so on. index (i32 or i64) has x's
/// rank; out has index's shape and x's dtype; along every dimension but
/// `dim`, index's extent is at most x's. An out-of-range index gives NaN
/// in that element.
/// @code
///   g.add(loom::ops::gather(log_probs, 1, targets_2d, picked));   // [B, C], [B, 1] -> [B, 1]
/// @endcode
LOOM_API OpPtr gather(const Tensor& x, int dim, const Tensor& index, const Tensor& out);

/// torch's scatter_add_, in place: for every element of src,
/// dst[...][index[...]][...] += src[...] (index replacing the coordinate
/// along `dim`). dst and src are f32; index (i32 or i64) and src have one
/// shape, of dst's rank, whose extents are at most dst's along every
/// dimension but `dim`. dst is read and written.
///
/// On the GPU the additions are atomic, so when several elements land on one
/// destination their order is unspecified: the last bits of such a sum may
/// differ from run to run and from the CPU backend (which adds in src's
/// row-major order). An out-of-range index skips its element.
/// @code
///   g.add(loom::ops::scatter_add(grad_table, 0, ids_2d, grad_rows));
/// @endcode
LOOM_API OpPtr scatter_add(const Tensor& dst, int dim, const Tensor& index, const Tensor& src);

/// out[i][j] = 1 where j == labels[i], else 0: labels [B] (i32 or i64), out
/// [B, C] of f32, f16 or bf16, contiguous. A label outside [0, C) makes its
/// whole row NaN.
/// @code
///   g.add(loom::ops::one_hot(labels, targets));   // [B] -> [B, C]
/// @endcode
LOOM_API OpPtr one_hot(const Tensor& labels, const Tensor& out);

/// out = the slices of x at `index` along `dim`: index is 1-D (i32 or i64,
/// K entries); out has x's shape with the extent of `dim` replaced by K, and
/// x's dtype. An embedding lookup is x [V, D], dim 0, index [B] -> out
/// [B, D]; rows are copied 16 bytes a thread where their layout allows. An
/// out-of-range index makes its slice NaN.
/// @code
///   g.add(loom::ops::index_select(embedding, 0, token_ids, hidden));   // [V, D] -> [B, D]
/// @endcode
LOOM_API OpPtr index_select(const Tensor& x, int dim, const Tensor& index, const Tensor& out);

}  // namespace loom::ops
