// Attention's dispatch (the kernels: flash_fwd.cuh, flash_fwd_wgmma.cuh, flash_bwd.cuh).
#include "attention/attention.hpp"
#include "common/check.hpp"

#include <loom/error.hpp>

#include <array>
#include <atomic>
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

// What the current device is to the wgmma forward, read once a device (the
// first 64) and packed in one word: kind | major << 8 | minor << 16, kind 1
// runs it, 2 another compute capability, 3 the sm_90a image not loaded
// (the plain sm_90 image beside it, a stub that traps, takes far fewer
// registers than the real kernel's 168). No allocation and no driver query
// after the first: automatic asks on every launch.
constexpr int kWgmmaImageMinRegisters = 128;

struct WgmmaDevice {
  int kind = 0;
  int major = 0;
  int minor = 0;
};

WgmmaDevice wgmma_device() {
  static std::array<std::atomic<int>, 64> cache{};
  int device = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  const bool cached = device >= 0 && device < static_cast<int>(cache.size());
  int packed = cached ? cache[static_cast<std::size_t>(device)].load(std::memory_order_acquire) : 0;
  if (packed == 0) {
    int major = 0;
    int minor = 0;
    LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    const int kind = major != 9 || minor != 0 ? 2
                     : attention_detail::flash_wgmma_kernel_registers() < kWgmmaImageMinRegisters
                         ? 3
                         : 1;
    packed = kind | (major & 0xFF) << 8 | (minor & 0xFF) << 16;
    if (cached) cache[static_cast<std::size_t>(device)].store(packed, std::memory_order_release);
  }
  return {packed & 0xFF, (packed >> 8) & 0xFF, (packed >> 16) & 0xFF};
}

// Whether the wgmma forward takes these tensors on this device, and if not
// why, as a code: the message is built only where a refusal is reported.
enum class WgmmaFit { runs, not_built, strides, device };

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
  return wgmma_device().kind == 1 ? WgmmaFit::runs : WgmmaFit::device;
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
    case ops::AttentionVariant::wgmma: break;
    default: return "unknown variant " + std::to_string(static_cast<int>(p.variant));
  }
  switch (wgmma_forward_fit(p)) {
    case WgmmaFit::runs: return {};
    case WgmmaFit::not_built:
      return "the wgmma kernel was not built (no compute capability 9.0 in "
             "CMAKE_CUDA_ARCHITECTURES)";
    case WgmmaFit::strides:
      return "the wgmma kernel loads q, k and v by TMA, which needs positive strides wherever a "
             "dimension has more than one element";
    case WgmmaFit::device: break;
  }
  const WgmmaDevice device = wgmma_device();
  if (device.kind == 3) {
    return "the driver loaded the kernel's plain sm_90 image, not its sm_90a one: rebuild with "
           "CMAKE_CUDA_ARCHITECTURES=90a";
  }
  return "it needs a device of compute capability 9.0 (H100/H200), this one is " +
         std::to_string(device.major) + "." + std::to_string(device.minor);
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
