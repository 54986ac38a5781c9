#pragma once
/// @file ops/loss.hpp
/// log_softmax and the fused cross-entropy loss, forward and backward.
///
/// Rows are the last dimension of a 2-D tensor [rows, classes] (logits of
/// f32, f16 or bf16; math in f32). Rows may be strided (a slice of a wider
/// tensor) as long as each row's elements are contiguous; other layouts are
/// rejected at submit, naming the task, as are bad dtypes, shapes, and
/// memory spaces.
///
/// cross_entropy reads each row of logits once: it computes the row's
/// log-sum-exp (saved in `lse` for the backward) and the loss
/// lse - logits[label] in one pass. cross_entropy_backward reads each row
/// once more and writes the gradient scale * (softmax - one_hot(label)),
/// without materializing either. PyTorch's log_softmax + nll_loss and their
/// backwards make five passes over the logits for the same result.
///
/// Labels are i32 or i64. A row whose label equals `ignore_index` counts
/// for nothing: its loss and gradient are 0, and a mean divides by the rows
/// not ignored (as torch's). Any other label outside [0, classes) cannot
/// stop a GPU kernel: that row's loss and gradient are NaN on both backends,
/// so that a bad label cannot pass unnoticed.
/// @code
///   g.add(loom::ops::cross_entropy(logits, labels, loss, lse));                  // loss: f32 [1],
///   the mean g.add(loom::ops::cross_entropy_backward(logits, labels, lse, {}, dlogits));  //
///   d(mean)/dlogits
/// @endcode

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/tensor.hpp>

#include <cstdint>

namespace loom::ops {

/// How the rows' losses are combined.
enum class LossReduction : std::uint8_t {
  mean,  ///< their mean over the rows not ignored: loss is f32 [1] or []
  sum,   ///< their sum: loss is f32 [1] or []
  none,  ///< each row's loss: loss is f32 [rows]
};

struct CrossEntropyOptions {
  LossReduction reduction = LossReduction::mean;
  /// Rows with this label count for nothing (torch's default, -100).
  std::int64_t ignore_index = -100;
};

/// y = x - logsumexp(x) along each row: log(softmax(x)), computed without
/// forming softmax (no log of an underflowed 0). x and y: one shape and
/// dtype (f32, f16, bf16), rank 2; y may be x itself (in place).
LOOM_API OpPtr log_softmax(const Tensor& x, const Tensor& y);

/// The cross-entropy of each row of `logits` against its class in `labels`
/// ([rows], i32 or i64): loss_i = logsumexp(logits_i) - logits_i[label_i],
/// reduced as `options` says into `loss` (f32). `lse` (f32 [rows]) receives
/// each row's log-sum-exp, which cross_entropy_backward reads.
LOOM_API OpPtr cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& loss,
                             const Tensor& lse, CrossEntropyOptions options = {});

/// grad_logits = d loss / d logits, times `grad_loss` (the gradient flowing
/// into the loss: f32 [1] or [] for mean and sum, [rows] for none; an
/// undefined tensor means 1): for row i, scale_i * (exp(logits_i - lse_i) -
/// one_hot(label_i)), with scale_i = grad_loss / (rows not ignored) for a
/// mean. grad_logits has logits' shape and dtype; it may be logits itself
/// (in place). `lse` is cross_entropy's, for the same logits.
LOOM_API OpPtr cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& lse,
                                      const Tensor& grad_loss, const Tensor& grad_logits,
                                      CrossEntropyOptions options = {});

}  // namespace loom::ops
