// The SGEMM variants up to register tiling, the dispatch by name, and the
// launch checks. warp_tiled lives in sgemm_warp_tiled.cu (its instantiations
// are the heavy ones to compile).
#include "gemm/sgemm.hpp"

#include "common/check.hpp"
#include "gemm/sgemm_common.cuh"
#include "gemm/sgemm_warp_tiled.hpp"

#include <loom/error.hpp>

#include <cute/tensor.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace loom::kernels {
namespace {

using namespace cute;
// loom's own Shape, Stride and Tensor would otherwise hide CuTe's here.
using cute::Layout;
using cute::Shape;
using cute::Stride;
using cute::Tensor;
using sgemm_detail::load_predicated;
using sgemm_detail::store_predicated;
using sgemm_detail::store_scaled;

// ---------------------------------------------------------------- naive
constexpr int kNaiveX = 32;  // along n: a warp stores one row segment of C
constexpr int kNaiveY = 8;

__global__ void sgemm_naive(SgemmArgs p) {
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t m = static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (m >= p.m || n >= p.n) return;
  const float* a = p.a.data + m * p.a.row_stride;
  const float* b = p.b.data + n * p.b.col_stride;
  float acc = 0.0F;
  for (std::int64_t k = 0; k < p.k; ++k) {
    acc = fmaf(a[k * p.a.col_stride], b[k * p.b.row_stride], acc);
  }
  store_scaled(p.c.data[m * p.c.row_stride + n * p.c.col_stride], acc, p.alpha, p.beta);
}

// ---------------------------------------------------------------- tiled_manual
// Thread (tx, ty) owns C(m0 + ty, n0 + tx). Each step stages a 32 x 32 tile
// of A and of B; the +1 column of padding keeps the column reads of sA free
// of bank conflicts.
constexpr int kTile = 32;

__global__ void sgemm_tiled_manual(SgemmArgs p) {
  __shared__ float sA[kTile][kTile + 1];  // [m][k]
  __shared__ float sB[kTile][kTile + 1];  // [k][n]
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const std::int64_t m = static_cast<std::int64_t>(blockIdx.y) * kTile + ty;
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * kTile + tx;
  float acc = 0.0F;
  for (std::int64_t k0 = 0; k0 < p.k; k0 += kTile) {
    const std::int64_t ka = k0 + tx;  // A's column this thread loads
    const std::int64_t kb = k0 + ty;  // B's row this thread loads
    sA[ty][tx] = m < p.m && ka < p.k ? p.a.data[m * p.a.row_stride + ka * p.a.col_stride] : 0.0F;
    sB[ty][tx] = kb < p.k && n < p.n ? p.b.data[kb * p.b.row_stride + n * p.b.col_stride] : 0.0F;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc = fmaf(sA[ty][kk], sB[kk][tx], acc);
    __syncthreads();
  }
  if (m < p.m && n < p.n) {
    store_scaled(p.c.data[m * p.c.row_stride + n * p.c.col_stride], acc, p.alpha, p.beta);
  }
}

// ---------------------------------------------------------------- tiled_cute
// tiled_manual's algorithm with CuTe doing the index arithmetic: the block's
// tiles come from local_tile, each thread's elements from local_partition,
// and the residue from an identity tensor partitioned the same way.
template <class ThrLoadRowFast, class ThrLoadKFast, class TA, class TCA, class TS, class Bounds>
__device__ __forceinline__ void load_tile(bool k_contiguous, const TA& gX, const TCA& cX, TS& sX,
                                          const Bounds& bounds, int tid) {
  // Threads walk the operand's contiguous dimension, so loads coalesce for
  // either layout; the switch is uniform, decided once per launch.
  if (k_contiguous) {
    load_predicated(local_partition(gX, ThrLoadKFast{}, tid),
                    local_partition(cX, ThrLoadKFast{}, tid),
                    local_partition(sX, ThrLoadKFast{}, tid), bounds);
  } else {
    load_predicated(local_partition(gX, ThrLoadRowFast{}, tid),
                    local_partition(cX, ThrLoadRowFast{}, tid),
                    local_partition(sX, ThrLoadRowFast{}, tid), bounds);
  }
}

__global__ void __launch_bounds__(kTile* kTile) sgemm_tiled_cute(SgemmArgs p) {
  using Blk = Int<kTile>;
  using SmemLayout = Layout<Shape<Blk, Blk>, Stride<_1, Int<kTile + 1>>>;  // (BM or BN, BK), padded
  using ThrRowFast = Layout<Shape<Blk, Blk>>;                              // rows vary fastest
  using ThrKFast = Layout<Shape<Blk, Blk>, Stride<Blk, _1>>;               // k varies fastest
  using ThrC = Layout<Shape<Blk, Blk>, Stride<Blk, _1>>;  // n fastest: a warp shares one row of A

  __shared__ float smem_a[cosize_v<SmemLayout>];
  __shared__ float smem_b[cosize_v<SmemLayout>];
  Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayout{});  // (BM,BK)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayout{});  // (BN,BK)

  Tensor mA = sgemm_detail::tensor_a(p);  // (M,K)
  Tensor mB = sgemm_detail::tensor_b(p);  // (N,K)
  Tensor mC = sgemm_detail::tensor_c(p);  // (M,N)
  auto tiler = make_shape(Blk{}, Blk{}, Blk{});
  auto coord = make_coord(int(blockIdx.y), int(blockIdx.x), _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});  // (BM,BK,k)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});  // (BN,BK,k)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});  // (BM,BN)
  Tensor cA = local_tile(make_identity_tensor(shape(mA)), tiler, coord, Step<_1, X, _1>{});
  Tensor cB = local_tile(make_identity_tensor(shape(mB)), tiler, coord, Step<X, _1, _1>{});
  Tensor cC = local_tile(make_identity_tensor(shape(mC)), tiler, coord, Step<_1, _1, X>{});

  const int tid = static_cast<int>(threadIdx.x);
  Tensor tCsA = local_partition(sA, ThrC{}, tid, Step<_1, X>{});   // (1,BK)
  Tensor tCsB = local_partition(sB, ThrC{}, tid, Step<X, _1>{});   // (1,BK)
  Tensor tCgC = local_partition(gC, ThrC{}, tid, Step<_1, _1>{});  // (1,1)
  Tensor tCcC = local_partition(cC, ThrC{}, tid, Step<_1, _1>{});  // (1,1)
  Tensor tCrC = make_tensor<float>(shape(tCgC));
  clear(tCrC);

  const bool a_k_contiguous = p.a.col_stride == 1;
  const bool b_k_contiguous = p.b.row_stride == 1;
  const int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    load_tile<ThrRowFast, ThrKFast>(a_k_contiguous, gA(_, _, kt), cA(_, _, kt), sA, shape(mA), tid);
    load_tile<ThrRowFast, ThrKFast>(b_k_contiguous, gB(_, _, kt), cB(_, _, kt), sB, shape(mB), tid);
    __syncthreads();
    gemm(tCsA, tCsB, tCrC);  // (1,BK) x (1,BK) -> (1,1)
    __syncthreads();
  }
  store_predicated(tCrC, tCgC, tCcC, shape(mC), p.alpha, p.beta);
}

// ---------------------------------------------------------------- register_tiled
// A 128 x 128 block tile over 256 threads: each thread accumulates an 8 x 8
// micro-tile (rows ty + 16 i, columns tx + 16 j). Per k, a thread reads 8
// values of A and 8 of B from shared memory and does 64 FMAs on them.
constexpr int kRegBlock = 128;
constexpr int kRegBK = 8;
constexpr int kRegThreads = 256;

__global__ void __launch_bounds__(kRegThreads) sgemm_register_tiled(SgemmArgs p) {
  using BM = Int<kRegBlock>;
  using BK = Int<kRegBK>;
  // The padding (132, not 128) spreads the k-fast loads' stores over banks.
  using SmemLayout = Layout<Shape<BM, BK>, Stride<_1, Int<kRegBlock + 4>>>;  // (BM or BN, BK)
  using ThrRowFast = Layout<Shape<_32, _8>>;
  using ThrKFast = Layout<Shape<_32, _8>, Stride<_8, _1>>;
  using ThrC = Layout<Shape<_16, _16>, Stride<_16, _1>>;
  static_assert(decltype(size(ThrC{}))::value == kRegThreads &&
                decltype(size(ThrKFast{}))::value == kRegThreads);

  __shared__ float smem_a[cosize_v<SmemLayout>];
  __shared__ float smem_b[cosize_v<SmemLayout>];
  Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayout{});  // (BM,BK)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayout{});  // (BN,BK)

  Tensor mA = sgemm_detail::tensor_a(p);  // (M,K)
  Tensor mB = sgemm_detail::tensor_b(p);  // (N,K)
  Tensor mC = sgemm_detail::tensor_c(p);  // (M,N)
  auto tiler = make_shape(BM{}, BM{}, BK{});
  auto coord = make_coord(int(blockIdx.y), int(blockIdx.x), _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});  // (BM,BK,k)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});  // (BN,BK,k)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});  // (BM,BN)
  Tensor cA = local_tile(make_identity_tensor(shape(mA)), tiler, coord, Step<_1, X, _1>{});
  Tensor cB = local_tile(make_identity_tensor(shape(mB)), tiler, coord, Step<X, _1, _1>{});
  Tensor cC = local_tile(make_identity_tensor(shape(mC)), tiler, coord, Step<_1, _1, X>{});

  const int tid = static_cast<int>(threadIdx.x);
  Tensor tCsA = local_partition(sA, ThrC{}, tid, Step<_1, X>{});   // (TM,BK)
  Tensor tCsB = local_partition(sB, ThrC{}, tid, Step<X, _1>{});   // (TN,BK)
  Tensor tCgC = local_partition(gC, ThrC{}, tid, Step<_1, _1>{});  // (TM,TN)
  Tensor tCcC = local_partition(cC, ThrC{}, tid, Step<_1, _1>{});  // (TM,TN)
  Tensor tCrA = make_tensor<float>(shape<0>(tCsA));                // (TM)
  Tensor tCrB = make_tensor<float>(shape<0>(tCsB));                // (TN)
  Tensor tCrC = make_tensor<float>(shape(tCgC));                   // (TM,TN)
  clear(tCrC);

  const bool a_k_contiguous = p.a.col_stride == 1;
  const bool b_k_contiguous = p.b.row_stride == 1;
  const int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    load_tile<ThrRowFast, ThrKFast>(a_k_contiguous, gA(_, _, kt), cA(_, _, kt), sA, shape(mA), tid);
    load_tile<ThrRowFast, ThrKFast>(b_k_contiguous, gB(_, _, kt), cB(_, _, kt), sB, shape(mB), tid);
    __syncthreads();
    CUTE_UNROLL
    for (int kk = 0; kk < kRegBK; ++kk) {
      copy(tCsA(_, kk), tCrA);
      copy(tCsB(_, kk), tCrB);
      CUTE_UNROLL
      for (int j = 0; j < size(tCrB); ++j) {
        CUTE_UNROLL
        for (int i = 0; i < size(tCrA); ++i) tCrC(i, j) = fmaf(tCrA(i), tCrB(j), tCrC(i, j));
      }
    }
    __syncthreads();
  }
  store_predicated(tCrC, tCgC, tCcC, shape(mC), p.alpha, p.beta);
}

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
  // Rows of blocks go on the grid's y dimension; the smallest row block is
  // the naive kernel's.
  if (tiles(p.m, kNaiveY) > kMaxGridY) {
    throw InvalidArgument("sgemm: m=" + std::to_string(p.m) + " exceeds the grid's rows (at most " +
                          std::to_string(kMaxGridY * kNaiveY) + ")");
  }
}

bool unit_stride_operands(const SgemmArgs& p) {
  return (p.a.row_stride == 1 || p.a.col_stride == 1) &&
         (p.b.row_stride == 1 || p.b.col_stride == 1);
}

}  // namespace

std::string_view to_string(SgemmVariant variant) noexcept {
  switch (variant) {
    case SgemmVariant::naive: return "naive";
    case SgemmVariant::tiled_manual: return "tiled_manual";
    case SgemmVariant::tiled_cute: return "tiled_cute";
    case SgemmVariant::register_tiled: return "register_tiled";
    case SgemmVariant::warp_tiled: return "warp_tiled";
  }
  return "unknown";
}

std::string_view to_string(SgemmWarpTile tile) noexcept {
  switch (tile) {
    case SgemmWarpTile::t128x128x8: return "128x128x8";
    case SgemmWarpTile::t128x128x16: return "128x128x16";
    case SgemmWarpTile::t64x64x8: return "64x64x8";
  }
  return "unknown";
}

SgemmWarpTile default_warp_tile(std::int64_t m, std::int64_t n, int sm_count) noexcept {
  const std::int64_t big_blocks = static_cast<std::int64_t>(tiles(m, 128)) * tiles(n, 128);
  return big_blocks < sm_count ? SgemmWarpTile::t64x64x8 : SgemmWarpTile::t128x128x8;
}

void sgemm(const SgemmArgs& args, StreamView stream, SgemmVariant variant, SgemmWarpTile tile) {
  check_extents(args);
  if (args.m == 0 || args.n == 0) return;
  // C = beta C: no tiles to walk, whatever the variant.
  if (args.k == 0) variant = SgemmVariant::naive;
  if (variant == SgemmVariant::warp_tiled && !unit_stride_operands(args)) {
    variant = SgemmVariant::register_tiled;
  }
  switch (variant) {
    case SgemmVariant::naive:
      sgemm_naive<<<dim3(tiles(args.n, kNaiveX), tiles(args.m, kNaiveY)), dim3(kNaiveX, kNaiveY), 0,
                    stream>>>(args);
      break;
    case SgemmVariant::tiled_manual:
      sgemm_tiled_manual<<<dim3(tiles(args.n, kTile), tiles(args.m, kTile)), dim3(kTile, kTile), 0,
                           stream>>>(args);
      break;
    case SgemmVariant::tiled_cute:
      sgemm_tiled_cute<<<dim3(tiles(args.n, kTile), tiles(args.m, kTile)), kTile * kTile, 0,
                         stream>>>(args);
      break;
    case SgemmVariant::register_tiled:
      sgemm_register_tiled<<<dim3(tiles(args.n, kRegBlock), tiles(args.m, kRegBlock)), kRegThreads,
                             0, stream>>>(args);
      break;
    case SgemmVariant::warp_tiled: sgemm_detail::sgemm_warp_tiled(args, stream, tile); return;
  }
  LOOM_KERNEL_CHECK_LAUNCH("sgemm kernel launch");
}

}  // namespace loom::kernels
