// flash_bwd for bf16, head dims 64 and 128 (one operand type a file, so both of CI's cores
// compile).
#include "attention/flash_bwd.cuh"

namespace loom::kernels::attention_detail {

void launch_flash_bwd_bf16(const AttentionBackwardArgs& args, StreamView stream, bool wgmma) {
  launch_flash_bwd<cute::bfloat16_t>(args, stream,
                                     wgmma ? launch_flash_bwd_wgmma_keys_bf16 : nullptr);
}

}  // namespace loom::kernels::attention_detail
