// mma_sync for bf16 operands (one operand type a file, so both of CI's cores compile).
#include "gemm/hgemm_mma_sync.cuh"

namespace loom::kernels::hgemm_detail {

void launch_mma_sync_bf16(const HgemmArgs& args, StreamView stream) {
  launch_mma_sync<cute::bfloat16_t>(args, stream);
}

}  // namespace loom::kernels::hgemm_detail
