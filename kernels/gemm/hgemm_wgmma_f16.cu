// wgmma for f16 operands (one operand type a file, so both of CI's cores
// compile); sm_90a only, as hgemm_wgmma_bf16.cu.
#include "gemm/hgemm.hpp"

#include <loom/error.hpp>

#if defined(LOOM_HGEMM_WGMMA_BUILT)
#include "gemm/hgemm_wgmma.cuh"
#endif

namespace loom::kernels::hgemm_detail {

void launch_wgmma_f16(const HgemmArgs& args, StreamView stream, int sm_count, bool cluster) {
#if defined(LOOM_HGEMM_WGMMA_BUILT)
  launch_wgmma<cute::half_t>(args, stream, sm_count, cluster);
#else
  (void)args;
  (void)stream;
  (void)sm_count;
  (void)cluster;
  throw InvalidArgument("hgemm: the wgmma kernel was not built (no sm_90a target)");
#endif
}

}  // namespace loom::kernels::hgemm_detail
