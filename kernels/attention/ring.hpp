#pragma once
// Ring attention's two small kernels (the ring itself, loom::ops::ring_attention,
// is built from flash attention's tasks, collectives and these):
//
//   merge        folds one partial attention result (out, lse over a block of
//                keys) into an f32 running result by log-sum-exp:
//                  m = max(lse_a, lse_b), w_x = exp(lse_x - m),
//                  out = (w_a out_a + w_b out_b) / (w_a + w_b),
//                  lse = m + log(w_a + w_b);
//                a row with both lse -inf stays 0 and -inf. Optionally writes the
//                merged result rounded to the operands' type as well (the last
//                step). `first` takes the partial as it is.
//   accumulate   acc (f32) += part (bf16/f16), or acc = part when `first`; with
//                part null, acc is left as it is. Optionally writes acc rounded
//                to `out` (a gradient's last step).
//
// Tensors are [B, H, S, D] (D contiguous) and [B, H, S] for lse, with free
// batch, head and row strides in elements of their own type.
#include "attention/attention.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace loom::kernels {

struct AttentionMergeArgs {
  std::int64_t batch = 0, heads = 0, rows = 0, head_dim = 0;
  DType dtype = DType::bf16;  ///< of part and out
  AttentionTensor acc;        ///< f32, read unless first, written
  AttentionTensor acc_lse;    ///< f32 [B, H, S], read unless first, written
  AttentionTensor part;       ///< dtype
  AttentionTensor part_lse;   ///< f32
  AttentionTensor out;        ///< dtype; null data: not written
  AttentionTensor out_lse;    ///< f32; null data: not written
  bool first = false;
  static constexpr std::array<std::size_t, 6> loom_pointer_offsets();
};

constexpr std::array<std::size_t, 6> AttentionMergeArgs::loom_pointer_offsets() {
  constexpr std::size_t data = offsetof(AttentionTensor, data);
  return {offsetof(AttentionMergeArgs, acc) + data,  offsetof(AttentionMergeArgs, acc_lse) + data,
          offsetof(AttentionMergeArgs, part) + data, offsetof(AttentionMergeArgs, part_lse) + data,
          offsetof(AttentionMergeArgs, out) + data,  offsetof(AttentionMergeArgs, out_lse) + data};
}
static_assert(std::is_standard_layout_v<AttentionMergeArgs>, "offsetof needs a standard layout");

struct GradientAccumulateArgs {
  std::int64_t batch = 0, heads = 0, rows = 0, head_dim = 0;
  DType dtype = DType::bf16;  ///< of part and out
  AttentionTensor acc;        ///< f32
  AttentionTensor part;       ///< dtype; null data: nothing added
  AttentionTensor out;        ///< dtype; null data: not written
  bool first = false;
  static constexpr std::array<std::size_t, 3> loom_pointer_offsets();
};

constexpr std::array<std::size_t, 3> GradientAccumulateArgs::loom_pointer_offsets() {
  constexpr std::size_t data = offsetof(AttentionTensor, data);
  return {offsetof(GradientAccumulateArgs, acc) + data,
          offsetof(GradientAccumulateArgs, part) + data,
          offsetof(GradientAccumulateArgs, out) + data};
}
static_assert(std::is_standard_layout_v<GradientAccumulateArgs>,
              "offsetof needs a standard layout");

/// Enqueues the merge on `stream` (device pointers; head_dim a multiple of 4,
/// every row 16-byte aligned for f32 and 8-byte for 16-bit types).
/// @throws InvalidArgument where attention_merge_fits is false.
void attention_merge(const AttentionMergeArgs& args, StreamView stream);
bool attention_merge_fits(const AttentionMergeArgs& args) noexcept;
/// The CPU reference: the same formula in double, rounded once.
void attention_merge_reference(const AttentionMergeArgs& args);

/// Enqueues the accumulation on `stream` (as attention_merge's alignment).
void gradient_accumulate(const GradientAccumulateArgs& args, StreamView stream);
bool gradient_accumulate_fits(const GradientAccumulateArgs& args) noexcept;
void gradient_accumulate_reference(const GradientAccumulateArgs& args);

}  // namespace loom::kernels
