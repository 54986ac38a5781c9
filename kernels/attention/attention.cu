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

}  // namespace

bool flash_fwd_fits(const AttentionArgs& p) noexcept {
  // The scale multiplies -inf for masked keys and decides the running max:
  // finite and positive.
  return (p.dtype == DType::bf16 || p.dtype == DType::f16) && p.scale > 0.0F &&
         std::isfinite(p.scale) && (p.head_dim == 64 || p.head_dim == 128) && strides_fit(p.q) &&
         strides_fit(p.k) && strides_fit(p.v) && strides_fit(p.out);
}

void flash_attention_forward(const AttentionArgs& p, StreamView stream) {
  if (p.batch <= 0 || p.heads <= 0 || p.q_len <= 0) return;
  if (!flash_fwd_fits(p)) {
    throw InvalidArgument(
        "flash attention: needs bf16 or f16, a finite scale above 0, a head dim of 64 or 128, "
        "batch, head and row "
        "strides multiples of 8 elements and 16-byte aligned data");
  }
  if (p.heads > 65535 || p.batch > 65535 || p.q_len > (std::int64_t{1} << 30) ||
      p.k_len > (std::int64_t{1} << 30)) {
    throw InvalidArgument(
        "flash attention: at most 65535 heads and batch entries and 2^30 rows, "
        "got " +
        std::to_string(p.batch) + " x " + std::to_string(p.heads) + " x " +
        std::to_string(p.q_len) + " (keys " + std::to_string(p.k_len) + ")");
  }
  if (p.dtype == DType::bf16) {
    attention_detail::launch_flash_fwd_bf16(p, stream);
  } else {
    attention_detail::launch_flash_fwd_f16(p, stream);
  }
}

}  // namespace loom::kernels
