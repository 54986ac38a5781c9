#pragma once
// The SGEMM kernels' own code under the emulation of CUDA threads, shared by
// the three files of its test (test_sgemm_emulated.cpp says what it checks).
// The warp-tiled kernel's 24 instantiations (four tiles, four operand
// layouts, and the 128 x 128 tiles' plain kernels) are most of the test's
// compile: two files hold two tiles each,
// so that a two-core build compiles them beside the rest (under ASan the
// one file took 150 s, the last 100 of them on one core).
#include "gemm/sgemm.hpp"  // first: CUDA's headers define the qualifiers redefined below

#include <cstdint>

#include "support/emulated_cuda.hpp"

namespace loom::kernels::sgemm_detail {
using namespace loom::emulated;  // NOLINT: the kernel's code reads CUDA's names unqualified
}  // namespace loom::kernels::sgemm_detail

#include "gemm/sgemm_kernels.cuh"
#include "gemm/sgemm_skinny.cuh"
#include "gemm/sgemm_transpose.cuh"
#include "gemm/sgemm_warp_tiled.cuh"

namespace loom::test::sgemm_emulated {

inline unsigned tiles(std::int64_t extent, int tile) {
  return static_cast<unsigned>((extent + tile - 1) / tile);
}

template <class Cfg, bool Plain>
void run_layouts(const kernels::SgemmArgs& p, dim3 grid, bool ak, bool bk) {
  namespace emu = kernels::sgemm_detail;
  const dim3 block(Cfg::kThreads);
  using emulated::run_grid;
  if (ak && bk) {
    run_grid(grid, block, [&] { emu::sgemm_warp_tiled_kernel<Cfg, true, true, Plain>(p); });
  } else if (ak) {
    run_grid(grid, block, [&] { emu::sgemm_warp_tiled_kernel<Cfg, true, false, Plain>(p); });
  } else if (bk) {
    run_grid(grid, block, [&] { emu::sgemm_warp_tiled_kernel<Cfg, false, true, Plain>(p); });
  } else {
    run_grid(grid, block, [&] { emu::sgemm_warp_tiled_kernel<Cfg, false, false, Plain>(p); });
  }
}

/// warp_tiled's launch of tile Cfg (the layout from the operands' strides),
/// split along K where p.k_slice is set, emulated.
template <class Cfg>
void run_warp_tiled(const kernels::SgemmArgs& p) {
  namespace emu = kernels::sgemm_detail;
  const auto slices = p.k_slice > 0 ? static_cast<unsigned>((p.k + p.k_slice - 1) / p.k_slice) : 1U;
  const dim3 grid(tiles(p.n, Cfg::kBN), tiles(p.m, Cfg::kBM), slices);
  const bool ak = p.a.col_stride == 1;
  const bool bk = p.b.row_stride == 1;
  // The launcher's choice of kernel (sgemm_warp_tiled.cu's launch_layout).
  if constexpr (Cfg::kPlainKernel) {
    if (emu::plain_product(p)) return run_layouts<Cfg, true>(p, grid, ak, bk);
  }
  run_layouts<Cfg, false>(p, grid, ak, bk);
}

/// The 128 x 128 tiles (BK 8 and 16): test_sgemm_emulated_wide.cpp.
void run_warp_tiled_wide(const kernels::SgemmArgs& p, kernels::SgemmWarpTile tile);
/// The 128 x 64 and 64 x 64 tiles: test_sgemm_emulated_narrow.cpp.
void run_warp_tiled_narrow(const kernels::SgemmArgs& p, kernels::SgemmWarpTile tile);

}  // namespace loom::test::sgemm_emulated
