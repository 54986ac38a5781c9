#pragma once
// The warp-tiled SGEMM's launcher (sgemm_warp_tiled.cu), called by sgemm().

#include "gemm/sgemm.hpp"

namespace loom::kernels::sgemm_detail {

/// Needs A and B each with a unit stride (row- or column-major).
void sgemm_warp_tiled(const SgemmArgs& args, StreamView stream, SgemmWarpTile tile);

}  // namespace loom::kernels::sgemm_detail
