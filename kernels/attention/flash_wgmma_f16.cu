// The forward's and the backward's wgmma kernels for f16 (flash_wgmma_bf16.cu says why a
// file a type, and what the stub does).
#include "attention/attention.hpp"

#include <loom/error.hpp>

#if defined(LOOM_FLASH_WGMMA_BUILT)
#include "attention/flash_bwd_wgmma.cuh"
#endif

namespace loom::kernels::attention_detail {

void launch_flash_fwd_wgmma_f16(const AttentionArgs& args, StreamView stream) {
#if defined(LOOM_FLASH_WGMMA_BUILT)
  launch_flash_fwd_wgmma<cute::half_t>(args, stream);
#else
  (void)args;
  (void)stream;
  throw InvalidArgument("flash attention: the wgmma kernel was not built (no sm_90a target)");
#endif
}

void launch_flash_bwd_wgmma_keys_f16(const AttentionBackwardArgs& args, StreamView stream) {
#if defined(LOOM_FLASH_WGMMA_BUILT)
  launch_bwd_wgmma_key_blocks<cute::half_t>(args, stream);
#else
  (void)args;
  (void)stream;
  throw InvalidArgument(
      "flash attention backward: the wgmma kernel was not built (no sm_90a target)");
#endif
}

}  // namespace loom::kernels::attention_detail
