// The SGEMM variants up to register tiling, the dispatch by name, and the
// launch checks. warp_tiled lives in sgemm_warp_tiled.cu (its instantiations
// are the heavy ones to compile).
#include "gemm/sgemm.hpp"

#include "common/check.hpp"
#include "common/launch.hpp"
#include "gemm/sgemm_kernels.cuh"
#include "gemm/sgemm_skinny.cuh"
#include "gemm/sgemm_transpose.cuh"
#include "gemm/sgemm_warp_tiled.hpp"

#include <loom/error.hpp>

#include <cute/tensor.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace loom::kernels {
namespace {

using namespace sgemm_detail;

// ---------------------------------------------------------------- launch

constexpr std::int64_t kMaxGridY = 65535;

unsigned tiles(std::int64_t extent, int tile) {
  return static_cast<unsigned>((extent + tile - 1) / tile);
}

void check_extents(const SgemmArgs& p) {
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  if (p.m < 0 || p.n < 0 || p.k < 0 || p.m > kMax || p.n > kMax || p.k > kMax) {
    throw InvalidArgument("sgemm: extents must lie in [0, 2^31 - 1], got m=" + std::to_string(p.m) +
                          " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k));
  }
}

// The tiled kernels put rows of blocks on the grid's y dimension (skinny
// puts them on x): `rows` rows a block.
void check_grid_rows(const SgemmArgs& p, int rows, SgemmVariant variant) {
  if (tiles(p.m, rows) > kMaxGridY) {
    throw InvalidArgument("sgemm: m=" + std::to_string(p.m) + " exceeds the " +
                          std::string(to_string(variant)) + " kernel's grid (at most " +
                          std::to_string(kMaxGridY * rows) + " rows)");
  }
}

void launch_skinny(const SgemmArgs& p, StreamView stream, void* workspace) {
  const SkinnyPlan plan = plan_skinny(p, workspace != nullptr);
  const SgemmArgs& q = plan.q;
  const std::int64_t slices = plan.slices;
  const std::int64_t k_slice = plan.k_slice;
  auto* partial = static_cast<float*>(workspace);
  const dim3 grid(tiles(q.m, kSkinnyRows), static_cast<unsigned>(slices));
  const auto launch = [&](auto kernel) {
    loom::detail::launch_on_stream(stream, kernel, grid, kSkinnyLanes, 0, q, partial, k_slice);
  };
  if (q.n <= 8) {
    launch(sgemm_skinny_n<8>);
  } else if (q.n <= 16) {
    launch(sgemm_skinny_n<16>);
  } else {
    launch(sgemm_skinny_n<kSkinnyMaxN>);
  }
  LOOM_KERNEL_CHECK_LAUNCH("sgemm skinny kernel launch");
  if (slices > 1) {
    loom::detail::launch_on_stream(stream, sgemm_skinny_reduce, tiles(q.m * q.n, 256), 256, 0, q,
                                   static_cast<const float*>(partial), slices);
    LOOM_KERNEL_CHECK_LAUNCH("sgemm skinny reduction launch");
  }
}

bool unit_stride_operands(const SgemmArgs& p) {
  return (p.a.row_stride == 1 || p.a.col_stride == 1) &&
         (p.b.row_stride == 1 || p.b.col_stride == 1);
}

bool wide_tile(SgemmWarpTile tile) {
  return tile == SgemmWarpTile::t128x128x8 || tile == SgemmWarpTile::t128x128x16;
}

// A copied M-major into the workspace (sgemm_transpose.cuh), and the product
// run on the copy.
void launch_on_m_major_a(const SgemmArgs& p, StreamView stream, SgemmWarpTile tile,
                         void* workspace) {
  auto* copy = static_cast<float*>(workspace);
  const std::int64_t ld = m_major_ld(p.m);
  loom::detail::launch_on_stream(stream, sgemm_copy_a_m_major, copy_a_grid(p.m, p.k),
                                 copy_a_block(), 0, p.a.data, p.a.row_stride, copy, ld,
                                 static_cast<int>(p.m), static_cast<int>(p.k));
  LOOM_KERNEL_CHECK_LAUNCH("sgemm: the copy of A M-major");
  SgemmArgs q = p;
  q.a = {copy, 1, ld};
  sgemm_detail::sgemm_warp_tiled(q, stream, tile);
}

}  // namespace

// Below this K, choose_sgemm_variant picks the one-thread-an-element kernel.
constexpr std::int64_t kTinyK = 16;

SgemmWarpTile default_warp_tile(std::int64_t m, std::int64_t n, int sm_count,
                                bool fused_epilogue) noexcept {
  const auto blocks = [&](int bm, int bn) {
    return static_cast<std::int64_t>(tiles(m, bm)) * tiles(n, bn);
  };
  // With a wave or more of 128 x 128 blocks: plain products run the plain
  // kernel, where BK = 16 beats BK = 8 (4096^3, H100, 2026-12-07: 0.89 /
  // 0.90 / 0.78 / 0.93 of cuBLAS against 0.81 / 0.82 / 0.80 / 0.89 by
  // layout; H200 at 2026-12-03, the same kernel then: 45.2 against 39.1
  // TFLOP/s); the general kernel, whose fused epilogue takes registers its
  // loop needs, runs BK = 8 faster (0.81 against 0.73 on the H100). Below
  // a wave, 64 x 64 blocks keep more warps on each SM (26.2 TFLOP/s at
  // 1024^3 against 19.2 for 128 x 128 x 16, H200).
  if (blocks(128, 128) < sm_count) return SgemmWarpTile::t64x64x8;
  return fused_epilogue ? SgemmWarpTile::t128x128x8 : SgemmWarpTile::t128x128x16;
}

SgemmVariant choose_sgemm_variant(const SgemmArgs& args) noexcept {
  if (skinny_shape(args)) return SgemmVariant::skinny;
  // A K this short makes the product a write of C: one thread an element,
  // as many blocks as C has warps, beats staging tiles that hold little
  // (bench_gemm, H100: [256, 1024] x K 10 took 6.9 µs in warp_tiled, the
  // fastest tile, against 2.8 µs for PyTorch).
  if (args.k <= kTinyK) return SgemmVariant::naive;
  return kSgemmDefault;
}

// warp_tiled's output tiles (the tile it will run) and its K slice, if split.
std::int64_t warp_tiled_split(const SgemmArgs& args, SgemmWarpTile tile) {
  const int bm = tile == SgemmWarpTile::t64x64x8 ? 64 : 128;
  const int bn = wide_tile(tile) ? 128 : 64;
  return split_k_slice(args, static_cast<std::int64_t>(tiles(args.m, bm)) * tiles(args.n, bn));
}

std::size_t sgemm_workspace_bytes(const SgemmArgs& args, SgemmVariant variant,
                                  SgemmWarpTile tile) noexcept {
  // An empty product launches nothing (sgemm returns at once): no slices to plan.
  if (args.m <= 0 || args.n <= 0 || args.k <= 0) return 0;
  // A skinny request on a wide shape runs the default: size for that.
  if (variant == SgemmVariant::skinny && !skinny_shape(args)) variant = kSgemmDefault;
  if (variant == SgemmVariant::warp_tiled && unit_stride_operands(args) && args.k > 0) {
    const std::int64_t slice = warp_tiled_split(args, tile);
    if (slice == 0) {
      return copies_a_m_major(args, wide_tile(tile), 0)
                 ? static_cast<std::size_t>(m_major_ld(args.m) * args.k) * sizeof(float)
                 : 0;
    }
    return static_cast<std::size_t>((args.k + slice - 1) / slice * args.m * args.n) * sizeof(float);
  }
  if (variant != SgemmVariant::skinny || !skinny_shape(args)) return 0;
  const SkinnyPlan plan = plan_skinny(args, true);
  return plan.slices > 1
             ? static_cast<std::size_t>(plan.slices * plan.q.m * plan.q.n) * sizeof(float)
             : 0;
}

void sgemm(const SgemmArgs& args, StreamView stream, SgemmVariant variant, SgemmWarpTile tile,
           void* workspace) {
  check_extents(args);
  if (args.m == 0 || args.n == 0) return;
  // C = beta C: no tiles to walk, whatever the variant.
  if (args.k == 0) variant = SgemmVariant::naive;
  if (variant == SgemmVariant::skinny) {
    if (skinny_shape(args)) {
      launch_skinny(args, stream, workspace);
      return;
    }
    variant = kSgemmDefault;
  }
  if (variant == SgemmVariant::warp_tiled && !unit_stride_operands(args)) {
    variant = SgemmVariant::register_tiled;
  }
  switch (variant) {
    case SgemmVariant::naive:
      check_grid_rows(args, kNaiveY, variant);
      loom::detail::launch_on_stream(stream, sgemm_naive,
                                     dim3(tiles(args.n, kNaiveX), tiles(args.m, kNaiveY)),
                                     dim3(kNaiveX, kNaiveY), 0, args);
      break;
    case SgemmVariant::tiled_manual:
      check_grid_rows(args, kTile, variant);
      loom::detail::launch_on_stream(stream, sgemm_tiled_manual,
                                     dim3(tiles(args.n, kTile), tiles(args.m, kTile)),
                                     dim3(kTile, kTile), 0, args);
      break;
    case SgemmVariant::tiled_cute:
      check_grid_rows(args, kTile, variant);
      loom::detail::launch_on_stream(stream, sgemm_tiled_cute,
                                     dim3(tiles(args.n, kTile), tiles(args.m, kTile)),
                                     kTile * kTile, 0, args);
      break;
    case SgemmVariant::register_tiled:
      check_grid_rows(args, kRegBlock, variant);
      loom::detail::launch_on_stream(stream, sgemm_register_tiled,
                                     dim3(tiles(args.n, kRegBlock), tiles(args.m, kRegBlock)),
                                     kRegThreads, 0, args);
      break;
    case SgemmVariant::warp_tiled: {
      check_grid_rows(args, tile == SgemmWarpTile::t64x64x8 ? 64 : 128, variant);
      const std::int64_t slice = workspace != nullptr ? warp_tiled_split(args, tile) : 0;
      if (slice == 0) {
        if (workspace != nullptr && copies_a_m_major(args, wide_tile(tile), 0)) {
          launch_on_m_major_a(args, stream, tile, workspace);
        } else {
          sgemm_detail::sgemm_warp_tiled(args, stream, tile);
        }
        return;
      }
      SgemmArgs split = args;
      split.k_slice = slice;
      split.partial = static_cast<float*>(workspace);
      sgemm_detail::sgemm_warp_tiled(split, stream, tile);
      const std::int64_t slices = (args.k + slice - 1) / slice;
      loom::detail::launch_on_stream(stream, sgemm_skinny_reduce, tiles(args.m * args.n, 256), 256,
                                     0, args, static_cast<const float*>(split.partial), slices);
      break;
    }
    case SgemmVariant::skinny: return;  // dispatched above
  }
  LOOM_KERNEL_CHECK_LAUNCH("sgemm kernel launch");
}

}  // namespace loom::kernels
