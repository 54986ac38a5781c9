// Attention's dispatch (the kernels: flash_fwd.cuh, flash_fwd_wgmma.cuh, flash_bwd.cuh).
#include "attention/attention.hpp"
#include "common/check.hpp"
#include "common/sm90a_device.hpp"

#include <loom/error.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace loom::kernels {
namespace {

bool strides_fit(const AttentionTensor& t) {
  return t.batch_stride % 8 == 0 && t.head_stride % 8 == 0 && t.row_stride % 8 == 0 &&
         reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0;
}

bool fits(DType dtype, float scale, std::int64_t head_dim) {
  // The scale multiplies -inf for masked keys and decides the running max:
  // finite and positive.
  return (dtype == DType::bf16 || dtype == DType::f16) && scale > 0.0F && std::isfinite(scale) &&
         (head_dim == 64 || head_dim == 128);
}

std::string too_large(std::int64_t batch, std::int64_t heads, std::int64_t q_len,
                      std::int64_t k_len) {
  if (heads <= 65535 && batch <= 65535 && q_len <= (std::int64_t{1} << 30) &&
      k_len <= (std::int64_t{1} << 30)) {
    return {};
  }
  return "at most 65535 heads and batch entries and 2^30 rows, got " + std::to_string(batch) +
         " x " + std::to_string(heads) + " x " + std::to_string(q_len) + " (keys " +
         std::to_string(k_len) + ")";
}

// TMA takes no zero or negative stride: each mode of more than one element
// needs a positive one (a mode of one element is never stepped, and the
// launch gives it a valid stride).
bool tma_strides_fit(const AttentionTensor& t, std::int64_t rows, std::int64_t heads,
                     std::int64_t batch) {
  return (rows <= 1 || t.row_stride > 0) && (heads <= 1 || t.head_stride > 0) &&
         (batch <= 1 || t.batch_stride > 0);
}

// The wgmma kernels' view of the current device (the forward's image
// stands for the backward's: one source file builds both).
Sm90aDevice wgmma_device() {
  static Sm90aDeviceCache cache(attention_detail::flash_wgmma_kernel_registers);
  return cache.current();
}

// Whether the wgmma forward takes these tensors on this device, and if not
// why, as a code: the message is built only where a refusal is reported.
enum class WgmmaFit { runs, head_dim, not_built, strides, device };

WgmmaFit wgmma_forward_fit(const AttentionArgs& p) {
  // Nothing for the kernel to do: no rows to write, or rows of zeros and
  // -inf without a key (FA2's launch writes those; TMA takes no empty
  // dimension).
  if (p.batch <= 0 || p.heads <= 0 || p.q_len <= 0 || p.k_len <= 0) return WgmmaFit::runs;
  if (!attention_detail::flash_wgmma_built()) return WgmmaFit::not_built;
  if (!tma_strides_fit(p.q, p.q_len, p.heads, p.batch) ||
      !tma_strides_fit(p.k, p.k_len, p.heads, p.batch) ||
      !tma_strides_fit(p.v, p.k_len, p.heads, p.batch)) {
    return WgmmaFit::strides;
  }
  return wgmma_device().runs() ? WgmmaFit::runs : WgmmaFit::device;
}

// The message for a wgmma kernel that cannot take its tensors here ("" where it runs).
std::string wgmma_refusal(WgmmaFit fit, std::int64_t head_dim) {
  switch (fit) {
    case WgmmaFit::runs: return {};
    case WgmmaFit::head_dim:
      return "the wgmma backward takes head dim 128 only, got " + std::to_string(head_dim);
    case WgmmaFit::not_built:
      return "the wgmma kernel was not built (no compute capability 9.0 in "
             "CMAKE_CUDA_ARCHITECTURES)";
    case WgmmaFit::strides:
      return "the wgmma kernel loads its inputs by TMA, which needs positive strides wherever a "
             "dimension has more than one element";
    case WgmmaFit::device: break;
  }
  return wgmma_device().refusal();
}

constexpr std::size_t kWorkspaceAlign = 256;

std::size_t delta_bytes(const AttentionBackwardArgs& p) {
  const auto bytes = static_cast<std::size_t>(p.batch * p.heads * p.q_len) * sizeof(float);
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

}  // namespace

bool flash_fwd_fits(const AttentionArgs& p) noexcept {
  return fits(p.dtype, p.scale, p.head_dim) && strides_fit(p.q) && strides_fit(p.k) &&
         strides_fit(p.v) && strides_fit(p.out);
}

std::string flash_fwd_variant_refusal(const AttentionArgs& p) {
  switch (p.variant) {
    case ops::AttentionVariant::automatic:
    case ops::AttentionVariant::mma_sync: return {};
    case ops::AttentionVariant::wgmma: return wgmma_refusal(wgmma_forward_fit(p), p.head_dim);
    default: return "unknown variant " + std::to_string(static_cast<int>(p.variant));
  }
}

ops::AttentionVariant flash_fwd_kernel_for(const AttentionArgs& p) {
  if (p.variant != ops::AttentionVariant::automatic) return p.variant;
  return wgmma_forward_fit(p) == WgmmaFit::runs ? ops::AttentionVariant::wgmma
                                                : ops::AttentionVariant::mma_sync;
}

void flash_attention_forward(const AttentionArgs& p, StreamView stream) {
  if (p.batch <= 0 || p.heads <= 0 || p.q_len <= 0) return;
  if (!flash_fwd_fits(p)) {
    throw InvalidArgument(
        "flash attention: needs bf16 or f16, a finite scale above 0, a head dim of 64 or 128, "
        "batch, head and row "
        "strides multiples of 8 elements and 16-byte aligned data");
  }
  if (const std::string why = too_large(p.batch, p.heads, p.q_len, p.k_len); !why.empty()) {
    throw InvalidArgument("flash attention: " + why);
  }
  if (const std::string why = flash_fwd_variant_refusal(p); !why.empty()) {
    throw InvalidArgument("flash attention: variant " + std::string(ops::to_string(p.variant)) +
                          ": " + why);
  }
  const bool bf16 = p.dtype == DType::bf16;
  // With no keys every row is zeros and -inf: FA2's launch writes them
  // (TMA takes no empty dimension), whatever the variant.
  if (p.k_len > 0 && flash_fwd_kernel_for(p) == ops::AttentionVariant::wgmma) {
    if (bf16) {
      attention_detail::launch_flash_fwd_wgmma_bf16(p, stream);
    } else {
      attention_detail::launch_flash_fwd_wgmma_f16(p, stream);
    }
  } else if (bf16) {
    attention_detail::launch_flash_fwd_bf16(p, stream);
  } else {
    attention_detail::launch_flash_fwd_f16(p, stream);
  }
}

bool flash_bwd_fits(const AttentionBackwardArgs& p) noexcept {
  return fits(p.dtype, p.scale, p.head_dim) && strides_fit(p.q) && strides_fit(p.k) &&
         strides_fit(p.v) && strides_fit(p.out) && strides_fit(p.dout) && strides_fit(p.dq) &&
         strides_fit(p.dk) && strides_fit(p.dv) &&
         reinterpret_cast<std::uintptr_t>(p.lse.data) % alignof(float) == 0;
}

namespace {

// As wgmma_forward_fit, for the backward's key blocks (head dim 128 only).
WgmmaFit wgmma_backward_fit(const AttentionBackwardArgs& p) {
  // Nothing for the key blocks to do, or only zeros to write (FA2's launch).
  if (p.batch <= 0 || p.heads <= 0 || p.q_len <= 0 || p.k_len <= 0) return WgmmaFit::runs;
  if (p.head_dim != 128) return WgmmaFit::head_dim;
  if (!attention_detail::flash_wgmma_built()) return WgmmaFit::not_built;
  if (!tma_strides_fit(p.q, p.q_len, p.heads, p.batch) ||
      !tma_strides_fit(p.dout, p.q_len, p.heads, p.batch) ||
      !tma_strides_fit(p.k, p.k_len, p.heads, p.batch) ||
      !tma_strides_fit(p.v, p.k_len, p.heads, p.batch)) {
    return WgmmaFit::strides;
  }
  return wgmma_device().runs() ? WgmmaFit::runs : WgmmaFit::device;
}

}  // namespace

std::string flash_bwd_variant_refusal(const AttentionBackwardArgs& p) {
  switch (p.variant) {
    case ops::AttentionVariant::automatic:
    case ops::AttentionVariant::mma_sync: return {};
    case ops::AttentionVariant::wgmma: return wgmma_refusal(wgmma_backward_fit(p), p.head_dim);
    default: return "unknown variant " + std::to_string(static_cast<int>(p.variant));
  }
}

ops::AttentionVariant flash_bwd_kernel_for(const AttentionBackwardArgs& p) {
  if (p.variant != ops::AttentionVariant::automatic) return p.variant;
  return wgmma_backward_fit(p) == WgmmaFit::runs ? ops::AttentionVariant::wgmma
                                                 : ops::AttentionVariant::mma_sync;
}

std::size_t attention_backward_workspace_bytes(const AttentionBackwardArgs& p) noexcept {
  return delta_bytes(p) +
         static_cast<std::size_t>(p.batch * p.heads * p.q_len * p.head_dim) * sizeof(float);
}

void place_attention_backward_workspace(AttentionBackwardArgs& p, void* workspace) noexcept {
  p.delta = static_cast<float*>(workspace);
  p.dq_accum = reinterpret_cast<float*>(static_cast<char*>(workspace) + delta_bytes(p));
}

void flash_attention_backward(const AttentionBackwardArgs& p, StreamView stream) {
  if (p.batch <= 0 || p.heads <= 0 || (p.q_len <= 0 && p.k_len <= 0)) return;
  if (!flash_bwd_fits(p)) {
    throw InvalidArgument(
        "flash attention backward: needs bf16 or f16, a finite scale above 0, a head dim of 64 "
        "or 128, batch, head and row strides multiples of 8 elements and 16-byte aligned data");
  }
  if (const std::string why = too_large(p.batch, p.heads, p.q_len, p.k_len); !why.empty()) {
    throw InvalidArgument("flash attention backward: " + why);
  }
  if (p.batch * p.heads * p.q_len > (std::int64_t{1} << 33)) {
    throw InvalidArgument("flash attention backward: at most 2^33 query rows in all, got " +
                          std::to_string(p.batch * p.heads * p.q_len));
  }
  if (p.q_len > 0 && (p.delta == nullptr || p.dq_accum == nullptr)) {
    throw InvalidArgument("flash attention backward: no workspace placed");
  }
  if (const std::string why = flash_bwd_variant_refusal(p); !why.empty()) {
    throw InvalidArgument("flash attention backward: variant " +
                          std::string(ops::to_string(p.variant)) + ": " + why);
  }
  // With no queries the key blocks only write zeros: FA2's launch does it
  // (TMA takes no empty dimension), whatever the variant.
  const bool wgmma = p.q_len > 0 && flash_bwd_kernel_for(p) == ops::AttentionVariant::wgmma;
  if (p.dtype == DType::bf16) {
    attention_detail::launch_flash_bwd_bf16(p, stream, wgmma);
  } else {
    attention_detail::launch_flash_bwd_f16(p, stream, wgmma);
  }
}

}  // namespace loom::kernels
