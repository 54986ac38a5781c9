// warp_tiled's launchers: the tile configurations and the layout switch
// (the kernel and its design: sgemm_warp_tiled.cuh).
#include "gemm/sgemm_warp_tiled.hpp"

#include "common/check.hpp"
#include "common/launch.hpp"
#include "gemm/sgemm_warp_tiled.cuh"

#include <cstdint>

namespace loom::kernels::sgemm_detail {
namespace {

unsigned tiles(std::int64_t extent, int tile) {
  return static_cast<unsigned>((extent + tile - 1) / tile);
}

template <class Cfg, bool AKMajor, bool BKMajor>
void launch_layout(const SgemmArgs& p, StreamView stream) {
  // Split along K: a slice of the grid's z a slice of K (p.k_slice set).
  const auto slices = p.k_slice > 0 ? static_cast<unsigned>((p.k + p.k_slice - 1) / p.k_slice) : 1U;
  const dim3 grid(tiles(p.n, Cfg::kBN), tiles(p.m, Cfg::kBM), slices);
  if constexpr (Cfg::kPlainKernel) {
    if (plain_product(p)) {
      loom::detail::launch_on_stream(stream, sgemm_warp_tiled_kernel<Cfg, AKMajor, BKMajor, true>,
                                     grid, Cfg::kThreads, 0, p);
      return;
    }
  }
  loom::detail::launch_on_stream(stream, sgemm_warp_tiled_kernel<Cfg, AKMajor, BKMajor>, grid,
                                 Cfg::kThreads, 0, p);
}

// The layout switch: four instantiations a tile, chosen once per call.
template <class Cfg>
void launch(const SgemmArgs& p, StreamView stream) {
  const bool a_k_major = p.a.col_stride == 1;
  const bool b_k_major = p.b.row_stride == 1;
  if (a_k_major && b_k_major) {
    launch_layout<Cfg, true, true>(p, stream);
  } else if (a_k_major) {
    launch_layout<Cfg, true, false>(p, stream);
  } else if (b_k_major) {
    launch_layout<Cfg, false, true>(p, stream);
  } else {
    launch_layout<Cfg, false, false>(p, stream);
  }
}

}  // namespace

void sgemm_warp_tiled(const SgemmArgs& args, StreamView stream, SgemmWarpTile tile) {
  switch (tile) {
    case SgemmWarpTile::t128x128x8: launch<WarpTile128x128x8>(args, stream); break;
    case SgemmWarpTile::t128x128x16: launch<WarpTile128x128x16>(args, stream); break;
    case SgemmWarpTile::t128x64x8: launch<WarpTile128x64x8>(args, stream); break;
    case SgemmWarpTile::t64x64x8: launch<WarpTile64x64x8>(args, stream); break;
  }
  LOOM_KERNEL_CHECK_LAUNCH("sgemm warp_tiled kernel launch");
}

}  // namespace loom::kernels::sgemm_detail
