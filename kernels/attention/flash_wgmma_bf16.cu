// The forward's and the backward's wgmma kernels for bf16 (one operand type a file, so both of
// CI's cores compile), built for sm_90a where the build targets compute
// capability 9.0 (library.cmake defines LOOM_FLASH_WGMMA_BUILT then);
// elsewhere a stub that refuses.
#include "attention/attention.hpp"

#include <loom/error.hpp>

#if defined(LOOM_FLASH_WGMMA_BUILT)
#include "attention/flash_bwd_wgmma.cuh"
#endif

namespace loom::kernels::attention_detail {

bool flash_wgmma_built() noexcept {
#if defined(LOOM_FLASH_WGMMA_BUILT)
  return true;
#else
  return false;
#endif
}

int flash_wgmma_kernel_registers() {
#if defined(LOOM_FLASH_WGMMA_BUILT)
  return flash_wgmma_registers<cute::bfloat16_t>();
#else
  return 0;
#endif
}

void launch_flash_fwd_wgmma_bf16(const AttentionArgs& args, StreamView stream) {
#if defined(LOOM_FLASH_WGMMA_BUILT)
  launch_flash_fwd_wgmma<cute::bfloat16_t>(args, stream);
#else
  (void)args;
  (void)stream;
  throw InvalidArgument("flash attention: the wgmma kernel was not built (no sm_90a target)");
#endif
}

void launch_flash_bwd_wgmma_keys_bf16(const AttentionBackwardArgs& args, StreamView stream) {
#if defined(LOOM_FLASH_WGMMA_BUILT)
  launch_bwd_wgmma_key_blocks<cute::bfloat16_t>(args, stream);
#else
  (void)args;
  (void)stream;
  throw InvalidArgument(
      "flash attention backward: the wgmma kernel was not built (no sm_90a target)");
#endif
}

}  // namespace loom::kernels::attention_detail
