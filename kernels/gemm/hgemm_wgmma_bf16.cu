// wgmma for bf16 operands (one operand type a file, so both of CI's cores
// compile), built for sm_90a where the build targets compute capability 9.0
// (library.cmake defines LOOM_HGEMM_WGMMA_BUILT then); elsewhere a stub that
// refuses.
#include "gemm/hgemm.hpp"

#include <loom/error.hpp>

#if defined(LOOM_HGEMM_WGMMA_BUILT)
#include "gemm/hgemm_wgmma.cuh"
#endif

namespace loom::kernels::hgemm_detail {

bool wgmma_built() noexcept {
#if defined(LOOM_HGEMM_WGMMA_BUILT)
  return true;
#else
  return false;
#endif
}

int wgmma_kernel_registers() {
#if defined(LOOM_HGEMM_WGMMA_BUILT)
  return wgmma_registers<cute::bfloat16_t>();
#else
  return 0;
#endif
}

void launch_wgmma_bf16(const HgemmArgs& args, StreamView stream, int sm_count, bool cluster) {
#if defined(LOOM_HGEMM_WGMMA_BUILT)
  launch_wgmma<cute::bfloat16_t>(args, stream, sm_count, cluster);
#else
  (void)args;
  (void)stream;
  (void)sm_count;
  (void)cluster;
  throw InvalidArgument("hgemm: the wgmma kernel was not built (no sm_90a target)");
#endif
}

}  // namespace loom::kernels::hgemm_detail
