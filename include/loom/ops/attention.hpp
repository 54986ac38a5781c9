#pragma once
/// @file ops/attention.hpp
/// Scaled dot-product attention, FlashAttention's forward and backward
/// (Lecture 12; FlashAttention-3's forward on Hopper, FlashAttention-2's
/// elsewhere and for the backward):
///   out = softmax(scale q k^T + mask) v
/// with the log-sum-exp of every query row beside it.
///
/// q is [B, H, Sq, D], k and v are [B, H, Sk, D] (Sq and Sk may differ),
/// out is q's shape; all bf16 or all f16, D 64 or 128, the last dimension
/// contiguous and the other strides free (a [B, S, H, D] tensor viewed with
/// transpose(1, 2) is taken as it is), in one memory space. S and P never
/// reach memory: a block of query rows walks the keys with an online softmax.
///
/// lse (optional, f32 [B, H, Sq]) gets log(sum_j exp(scale q_i . k_j)) over
/// the keys row i keeps (natural log, the scale included): two results over
/// disjoint key blocks merge exactly by it, as ring attention does. A row
/// that keeps no key (causal, aligned bottom right, with Sq > Sk) gets out
/// 0 and lse -inf.
///
/// Causal attention keeps key j for query i when j <= i (aligned top left,
/// as PyTorch's is_causal), or when j <= i + Sk - Sq (bottom right: the
/// queries are the last Sq positions of the keys' sequence).
///
/// On a GPU, strides (batch, head, row) must be multiples of 8 elements and
/// data 16-byte aligned; the CPU backend runs the reference (scores in
/// double). Validated at submit (InvalidArgument naming the task).
/// @code
///   g.add(loom::ops::flash_attention(q, k, v, out, lse, {.causal = true}));
/// @endcode

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/ops/variant.hpp>
#include <loom/tensor.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace loom::ops {

/// Where a causal mask's diagonal starts when Sq != Sk.
enum class CausalAlignment : std::uint8_t { top_left, bottom_right };

/// The kernels on a GPU (variant.hpp):
///  - automatic: wgmma on a device of compute capability 9.0 (H100/H200)
///    where loom was built for it (CMAKE_CUDA_ARCHITECTURES 90) and the
///    tensors suit TMA (positive strides wherever a dimension has more than
///    one element); for the backward, at head dim 128; mma_sync otherwise;
///  - mma_sync: FlashAttention-2's kernels on Ampere's mma.sync, any GPU;
///  - wgmma: FlashAttention-3's design on Hopper's wgmma and TMA (the
///    backward at head dim 128 only); where it cannot run, the task fails
///    with InvalidArgument saying why.
enum class AttentionVariant : std::uint8_t { automatic, mma_sync, wgmma };

template <>
struct VariantNames<AttentionVariant> {
  static constexpr std::array<std::string_view, 3> names = {"automatic", "mma_sync", "wgmma"};
};
// A value added to the enum needs its name in the table: the last one must match.
static_assert(to_string(AttentionVariant::wgmma) == "wgmma");

struct AttentionOptions {
  bool causal = false;
  CausalAlignment alignment = CausalAlignment::top_left;
  /// Multiplies q . k; 0 means 1 / sqrt(D).
  float scale = 0.0F;
  /// The kernel on a GPU (the CPU backend runs its reference).
  AttentionVariant variant = AttentionVariant::automatic;
};

/// out (and lse, when defined) = attention(q, k, v). Thread-safe: builds an op.
LOOM_API OpPtr flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& lse = Tensor{}, const AttentionOptions& options = {});

/// Where the backward pass writes the gradients of q, k and v (each its
/// input's shape and type).
struct AttentionGradients {
  Tensor dq, dk, dv;
};

/// The gradients of out = attention(q, k, v) given dout (the gradient of a
/// loss with respect to out, q's shape and type), FlashAttention-2's backward:
/// out and lse are the forward's results with the same options (lse is
/// required here; P is recomputed from it, never stored). dq, dk and dv are
/// written whole (keys no query keeps get 0), and share no storage with
/// anything else the op touches. On a GPU the op borrows f32 scratch of
/// (B H Sq (D + 1)) floats from loom's pool for dq's sums. Same layout rules
/// as flash_attention. Thread-safe: builds an op.
/// @code
///   g.add(loom::ops::flash_attention_backward(q, k, v, out, lse, dout,
///                                             {.dq = dq, .dk = dk, .dv = dv}, {.causal = true}));
/// @endcode
LOOM_API OpPtr flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& out, const Tensor& lse, const Tensor& dout,
                                        const AttentionGradients& grads,
                                        const AttentionOptions& options = {});

}  // namespace loom::ops
