#pragma once
// Attention: softmax(scale Q K^T + mask) V, one (batch, head) at a time,
// with the log-sum-exp of every query row beside the output.
//
//   flash_fwd   FA2's forward (Lecture 12) on Ampere's mma.sync over CuTe:
//               a block owns 128 query rows (four warps of 32, each row in one
//               warp, so a row's max and sum need only shuffles within a
//               quad of lanes) and walks the keys 64 at a time. S = Q K^T
//               and O += P V are tensor-core products out of swizzled shared
//               tiles (V read with ldmatrix.trans); the softmax is online
//               (running max and sum a row, O rescaled when the max grows),
//               in base 2 with the scale folded in; S and P live in
//               registers only. While S is computed, V's tile is loading;
//               while P V is computed, the next K tile is. Head dims 64 and
//               128, bf16 or f16, f32 accumulation.
//
// Tails: query rows past Sq load as zeros and are not stored; keys past Sk
// load as zeros and are masked out of the softmax. Causal masking keeps key
// j for query i when j <= i + offset: offset 0 aligns the mask's diagonal to
// the top left (PyTorch's is_causal), Sk - Sq to the bottom right (a query
// block at the end of a longer key sequence). A row left with no key gets
// output 0 and log-sum-exp -inf.
//
// The log-sum-exp is f32: lse[b][h][i] = log(sum_j exp(scale q_i . k_j)) over
// the keys row i keeps (natural log, the scale included): two partial results
// over disjoint key sets merge exactly by it (ring attention).
#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace loom::kernels {

/// A [B, H, S, D] tensor with a contiguous last dimension.
struct AttentionTensor {
  const void* data = nullptr;
  std::int64_t batch_stride = 0;
  std::int64_t head_stride = 0;
  std::int64_t row_stride = 0;
};

struct AttentionArgs {
  std::int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0;
  DType dtype = DType::bf16;  ///< of q, k, v and out
  AttentionTensor q, k, v, out;
  /// [B, H, Sq] f32; null data: not written. Strides as the others (row stride 1).
  AttentionTensor lse;
  float scale = 0.0F;  ///< multiplies q . k
  bool causal = false;
  std::int64_t causal_offset = 0;  ///< key j is kept for query i when j <= i + offset
  static constexpr std::array<std::size_t, 5> loom_pointer_offsets();
};

constexpr std::array<std::size_t, 5> AttentionArgs::loom_pointer_offsets() {
  return {offsetof(AttentionArgs, q) + offsetof(AttentionTensor, data),
          offsetof(AttentionArgs, k) + offsetof(AttentionTensor, data),
          offsetof(AttentionArgs, v) + offsetof(AttentionTensor, data),
          offsetof(AttentionArgs, out) + offsetof(AttentionTensor, data),
          offsetof(AttentionArgs, lse) + offsetof(AttentionTensor, data)};
}
static_assert(std::is_standard_layout_v<AttentionArgs>, "offsetof needs a standard layout");

/// Whether flash_fwd takes these tensors: bf16/f16, a finite scale > 0, head dim 64 or 128,
/// strides multiples of 8 elements, data on 16 bytes.
bool flash_fwd_fits(const AttentionArgs& args) noexcept;

/// Enqueues the forward pass on `stream` (device pointers).
/// @throws InvalidArgument where flash_fwd_fits is false or a grid is too large.
void flash_attention_forward(const AttentionArgs& args, StreamView stream);

/// The CPU reference on host pointers: scores and sums in double, the output
/// rounded once to its type.
void attention_reference(const AttentionArgs& args);

namespace attention_detail {
void launch_flash_fwd_bf16(const AttentionArgs& args, StreamView stream);
void launch_flash_fwd_f16(const AttentionArgs& args, StreamView stream);
}  // namespace attention_detail

}  // namespace loom::kernels
