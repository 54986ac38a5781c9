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
//   flash_bwd   FA2's backward: a block owns 128 keys at head dim 128 (64
//               at 64; eight warps) and walks the query blocks of 64 rows
//               that see them, recomputing P = exp(scale Q K^T - lse) from
//               the forward's log-sum-exp; dV += P^T dO and dK += dS^T Q
//               stay in registers, with dS = P (dO V^T - delta) and
//               delta = rowsum(dO * O) from a first launch; dQ += dS K is
//               added into an f32 scratch copy with atomics and rounded by
//               a last launch. P and dS pass through shared memory to be
//               read transposed. The next query block's Q and dO load
//               while this one's products run (two buffers), and each key
//               block starts its walk at its own query block, so that the
//               blocks running side by side add into different dq rows.
//   flash_fwd_wgmma, flash_bwd_wgmma
//               the same on Hopper (sm_90a: TMA, a producer warpgroup,
//               wgmma), FlashAttention-3's design; their files say how.
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
#include <loom/ops/attention.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
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
  ops::AttentionVariant variant = ops::AttentionVariant::automatic;  ///< the kernel
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

/// The backward pass's tensors: the forward's inputs, its out and lse, the
/// output's gradient dout, and the gradients it writes, dq, dk and dv (each
/// its input's shape and type). delta and dq_accum are f32 scratch
/// (attention_backward_workspace_bytes): each query row's dout . out, and
/// dq summed over key blocks before it is scaled and rounded.
struct AttentionBackwardArgs {
  std::int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0;
  DType dtype = DType::bf16;
  AttentionTensor q, k, v, out, dout, dq, dk, dv;
  AttentionTensor lse;  ///< [B, H, Sq] f32, as the forward wrote it
  float* delta = nullptr;
  float* dq_accum = nullptr;
  float scale = 0.0F;
  bool causal = false;
  std::int64_t causal_offset = 0;
  ops::AttentionVariant variant = ops::AttentionVariant::automatic;  ///< the key-block kernel
  static constexpr std::array<std::size_t, 11> loom_pointer_offsets();
};

constexpr std::array<std::size_t, 11> AttentionBackwardArgs::loom_pointer_offsets() {
  constexpr std::size_t data = offsetof(AttentionTensor, data);
  return {offsetof(AttentionBackwardArgs, q) + data,    offsetof(AttentionBackwardArgs, k) + data,
          offsetof(AttentionBackwardArgs, v) + data,    offsetof(AttentionBackwardArgs, out) + data,
          offsetof(AttentionBackwardArgs, dout) + data, offsetof(AttentionBackwardArgs, dq) + data,
          offsetof(AttentionBackwardArgs, dk) + data,   offsetof(AttentionBackwardArgs, dv) + data,
          offsetof(AttentionBackwardArgs, lse) + data,  offsetof(AttentionBackwardArgs, delta),
          offsetof(AttentionBackwardArgs, dq_accum)};
}
static_assert(std::is_standard_layout_v<AttentionBackwardArgs>, "offsetof needs a standard layout");

/// Whether flash_fwd takes these tensors: bf16/f16, a finite scale > 0, head dim 64 or 128,
/// strides multiples of 8 elements, data on 16 bytes.
bool flash_fwd_fits(const AttentionArgs& args) noexcept;

/// Why args.variant cannot run on the current device with these tensors
/// ("" when it can; automatic always can where flash_fwd_fits holds, and so
/// can any variant of an empty problem or one without keys, which FA2's
/// launch takes).
std::string flash_fwd_variant_refusal(const AttentionArgs& args);

/// The kernel args.variant names: automatic resolved on the current device
/// (mma_sync or wgmma), any other value as it is (the refusal says whether
/// it can run).
ops::AttentionVariant flash_fwd_kernel_for(const AttentionArgs& args);

/// Enqueues the forward pass on `stream` (device pointers), on the kernel
/// flash_fwd_kernel_for names.
/// @throws InvalidArgument where flash_fwd_fits is false, the variant is
/// refused here (flash_fwd_variant_refusal) or a grid is too large.
void flash_attention_forward(const AttentionArgs& args, StreamView stream);

/// The CPU reference on host pointers: scores and sums in double, the output
/// rounded once to its type.
void attention_reference(const AttentionArgs& args);

/// Whether flash_bwd takes these tensors (as flash_fwd_fits, for all eight,
/// and lse's rows 4-byte aligned).
bool flash_bwd_fits(const AttentionBackwardArgs& args) noexcept;

/// The f32 scratch the backward pass needs on a GPU (delta, then dq_accum).
std::size_t attention_backward_workspace_bytes(const AttentionBackwardArgs& args) noexcept;

/// Points args.delta and args.dq_accum into `workspace`
/// (attention_backward_workspace_bytes of device memory).
void place_attention_backward_workspace(AttentionBackwardArgs& args, void* workspace) noexcept;

/// Why args.variant cannot run the backward on the current device with
/// these tensors ("" when it can): wgmma takes head dim 128 only.
std::string flash_bwd_variant_refusal(const AttentionBackwardArgs& args);

/// The key-block kernel args.variant resolves to on the current device.
ops::AttentionVariant flash_bwd_kernel_for(const AttentionBackwardArgs& args);

/// Enqueues the backward pass (three launches: delta with dq_accum cleared,
/// the key blocks, dq rounded) on `stream`; device pointers, workspace placed.
/// @throws InvalidArgument where flash_bwd_fits is false or a grid is too large.
void flash_attention_backward(const AttentionBackwardArgs& args, StreamView stream);

/// The backward reference on host pointers, in double: P from the scores and
/// the given lse, delta from the given out and dout (the GPU's recipe).
void attention_backward_reference(const AttentionBackwardArgs& args);

namespace attention_detail {
void launch_flash_fwd_bf16(const AttentionArgs& args, StreamView stream);
void launch_flash_fwd_f16(const AttentionArgs& args, StreamView stream);
void launch_flash_fwd_wgmma_bf16(const AttentionArgs& args, StreamView stream);
void launch_flash_fwd_wgmma_f16(const AttentionArgs& args, StreamView stream);
/// Whether the wgmma forward was built (an sm_90a image), and the registers
/// a thread of its loaded image takes on the current device (a stub's are few).
bool flash_wgmma_built() noexcept;
int flash_wgmma_kernel_registers();
/// The backward's three launches, the key blocks on the wgmma kernel where
/// `wgmma` (head dim 128), else on FA2's.
void launch_flash_bwd_bf16(const AttentionBackwardArgs& args, StreamView stream, bool wgmma);
void launch_flash_bwd_f16(const AttentionBackwardArgs& args, StreamView stream, bool wgmma);
void launch_flash_bwd_wgmma_keys_bf16(const AttentionBackwardArgs& args, StreamView stream);
void launch_flash_bwd_wgmma_keys_f16(const AttentionBackwardArgs& args, StreamView stream);
}  // namespace attention_detail

}  // namespace loom::kernels
