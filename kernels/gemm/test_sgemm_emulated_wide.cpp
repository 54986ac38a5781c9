// warp_tiled's instantiations for the 128 x 128 tiles, emulated (test_sgemm_emulated.hpp
// says why they are a file of their own).
#include "gemm/test_sgemm_emulated.hpp"

#include <stdexcept>

namespace loom::test::sgemm_emulated {

void run_warp_tiled_wide(const kernels::SgemmArgs& p, kernels::SgemmWarpTile tile) {
  namespace emu = kernels::sgemm_detail;
  switch (tile) {
    case kernels::SgemmWarpTile::t128x128x8: run_warp_tiled<emu::WarpTile128x128x8>(p); return;
    case kernels::SgemmWarpTile::t128x128x16: run_warp_tiled<emu::WarpTile128x128x16>(p); return;
    default: break;
  }
  throw std::invalid_argument("run_warp_tiled_wide: not one of the 128 x 128 tiles");
}

}  // namespace loom::test::sgemm_emulated
