// flash_fwd for bf16, head dims 64 and 128 (one operand type a file, so both of CI's cores
// compile).
#include "attention/flash_fwd.cuh"

namespace loom::kernels::attention_detail {

void launch_flash_fwd_bf16(const AttentionArgs& args, StreamView stream) {
  launch_flash_fwd<cute::bfloat16_t>(args, stream);
}

}  // namespace loom::kernels::attention_detail
