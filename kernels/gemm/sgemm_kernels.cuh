#pragma once
// The SGEMM kernels up to register tiling (sgemm.hpp describes each); their
// launchers are in sgemm.cu. A header so that the CPU test can run them
// under an emulation of CUDA's threads (test_sgemm_emulated.cpp).
#include "gemm/sgemm.hpp"

#include "gemm/sgemm_common.cuh"

#include <cute/tensor.hpp>

#include <cstdint>

// Internal linkage: each translation unit that includes this gets its own.
namespace loom::kernels::sgemm_detail {
namespace {

using namespace cute;
// loom's own Shape, Stride and Tensor would otherwise hide CuTe's here.
using cute::Layout;
using cute::Shape;
using cute::Stride;
using cute::Tensor;

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
  store_epilogue(p.c.data[m * p.c.row_stride + n * p.c.col_stride], acc, m, n, p);
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
    CUTE_UNROLL
    for (int kk = 0; kk < kTile; ++kk) acc = fmaf(sA[ty][kk], sB[kk][tx], acc);
    __syncthreads();
  }
  if (m < p.m && n < p.n) {
    store_epilogue(p.c.data[m * p.c.row_stride + n * p.c.col_stride], acc, m, n, p);
  }
}

// ---------------------------------------------------------------- tiled_cute, register_tiled
// An operand's staged tile, loaded with the thread layout whose fastest
// dimension is the operand's contiguous one.
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

// tiled_cute and register_tiled are one kernel over CuTe, block_tiled: the
// block's tiles come from local_tile, each thread's elements from
// local_partition, the residue from an identity tensor partitioned the same
// way. What the lecture changes between the two steps is the configuration:
// the tile sizes, the thread layouts, and how a thread multiplies its share
// of the staged tiles (Cfg::multiply).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) sgemm_block_tiled(SgemmArgs p) {
  using BM = Int<Cfg::kBlock>;  // BM = BN
  using BK = Int<Cfg::kBK>;
  using SmemLayout = typename Cfg::SmemLayout;  // (BM or BN, BK)
  using ThrRowFast = typename Cfg::ThrRowFast;  // loads where rows are contiguous
  using ThrKFast = typename Cfg::ThrKFast;      // loads where K is contiguous
  using ThrC = typename Cfg::ThrC;              // the threads over C's tile
  static_assert(decltype(size(ThrC{}))::value == Cfg::kThreads &&
                    decltype(size(ThrKFast{}))::value == Cfg::kThreads &&
                    decltype(size(ThrRowFast{}))::value == Cfg::kThreads,
                "every thread layout covers the block's threads");
  static_assert(Cfg::kBlock % decltype(size<0>(ThrC{}))::value == 0 &&
                    Cfg::kBlock % decltype(size<1>(ThrC{}))::value == 0,
                "C's tile divides evenly among the threads");
  static_assert(decltype(size<0>(SmemLayout{}))::value == Cfg::kBlock &&
                    decltype(size<1>(SmemLayout{}))::value == Cfg::kBK,
                "the shared tiles are (BM or BN, BK)");

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
  Tensor tCrC = make_tensor<float>(shape(tCgC));                   // (TM,TN)
  clear(tCrC);

  const bool a_k_contiguous = p.a.col_stride == 1;
  const bool b_k_contiguous = p.b.row_stride == 1;
  const int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    load_tile<ThrRowFast, ThrKFast>(a_k_contiguous, gA(_, _, kt), cA(_, _, kt), sA, shape(mA), tid);
    load_tile<ThrRowFast, ThrKFast>(b_k_contiguous, gB(_, _, kt), cB(_, _, kt), sB, shape(mB), tid);
    __syncthreads();
    Cfg::multiply(tCsA, tCsB, tCrC);
    __syncthreads();
  }
  store_predicated(tCrC, tCgC, tCcC, shape(mC), p);
}

// ---- tiled_cute: tiled_manual's algorithm, CuTe doing the index arithmetic.
// 32 x 32 tiles, a thread an element of C, the +1 padding of sA's columns.
struct TiledCuteConfig {
  static constexpr int kBlock = kTile;
  static constexpr int kBK = kTile;
  static constexpr int kThreads = kTile * kTile;
  using Blk = Int<kTile>;
  using SmemLayout = Layout<Shape<Blk, Blk>, Stride<_1, Int<kTile + 1>>>;  // padded
  using ThrRowFast = Layout<Shape<Blk, Blk>>;                              // rows vary fastest
  using ThrKFast = Layout<Shape<Blk, Blk>, Stride<Blk, _1>>;               // k varies fastest
  using ThrC = Layout<Shape<Blk, Blk>, Stride<Blk, _1>>;  // n fastest: a warp shares one row of A
  template <class SA, class SB, class RC>
  __device__ __forceinline__ static void multiply(const SA& tCsA, const SB& tCsB, RC& tCrC) {
    gemm(tCsA, tCsB, tCrC);  // (1,BK) x (1,BK) -> (1,1), straight from shared memory
  }
};

// ---- register_tiled: a 128 x 128 block tile over 256 threads; each thread
// accumulates an 8 x 8 micro-tile (rows ty + 16 i, columns tx + 16 j). Per
// k, a thread reads 8 values of A and 8 of B from shared memory into
// registers and does 64 FMAs on them.
constexpr int kRegBlock = 128;
constexpr int kRegBK = 8;
constexpr int kRegThreads = 256;

struct RegisterTiledConfig {
  static constexpr int kBlock = kRegBlock;
  static constexpr int kBK = kRegBK;
  static constexpr int kThreads = kRegThreads;
  // The padding (132, not 128) spreads the k-fast loads' stores over banks.
  using SmemLayout = Layout<Shape<Int<kRegBlock>, Int<kRegBK>>, Stride<_1, Int<kRegBlock + 4>>>;
  using ThrRowFast = Layout<Shape<_32, _8>>;
  using ThrKFast = Layout<Shape<_32, _8>, Stride<_8, _1>>;
  using ThrC = Layout<Shape<_16, _16>, Stride<_16, _1>>;
  template <class SA, class SB, class RC>
  __device__ __forceinline__ static void multiply(const SA& tCsA, const SB& tCsB, RC& tCrC) {
    Tensor tCrA = make_tensor<float>(shape<0>(tCsA));  // (TM)
    Tensor tCrB = make_tensor<float>(shape<0>(tCsB));  // (TN)
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
  }
};

// The lecture's names for the two steps.
constexpr auto sgemm_tiled_cute = sgemm_block_tiled<TiledCuteConfig>;
constexpr auto sgemm_register_tiled = sgemm_block_tiled<RegisterTiledConfig>;

}  // namespace
}  // namespace loom::kernels::sgemm_detail
