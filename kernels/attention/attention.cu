// Attention's dispatch (the kernel: flash_fwd.cuh).
#include "attention/attention.hpp"

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
  if (p.dtype == DType::bf16) {
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
  if (p.dtype == DType::bf16) {
    attention_detail::launch_flash_bwd_bf16(p, stream);
  } else {
    attention_detail::launch_flash_bwd_f16(p, stream);
  }
}

}  // namespace loom::kernels
