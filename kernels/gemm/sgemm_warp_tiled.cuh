#pragma once
// warp_tiled: block tile -> warp tile -> thread tile, over CuTe.
//
// The block's M x N tile is split among warps (WARPS_M x WARPS_N); a warp's
// tile is walked in steps of 16 x 32 (ITER_M x ITER_N of them), in which
// each lane (4 x 8 lanes) owns a 4 x 4 sub-tile. The split is a layout: the
// block's row index is m = j + 4 lane_m + 16 iter_m + WM warp_m, the compact
// layout of shape (4, 4, ITER_M, WARPS_M), so composing the shared and global
// tiles with it and slicing at (_, lane_m, _, warp_m) hands each thread its
// rows. A thread's 4 consecutive rows (and columns) make 128-bit shared
// loads; lanes of one row of the warp read 128 contiguous bytes of sB and
// share 4 vectors of sA, free of bank conflicts.
//
// Global loads are 16-byte vectors through a TiledCopy laid out along the
// operand's contiguous dimension (K for a row-major A, M for a column-major
// one), used for whole tiles of aligned operands; edge tiles and misaligned
// operands take a predicated scalar path through the same partition. The
// next tile's loads are issued into registers before this tile's math and
// stored to the other shared buffer after it: one barrier a tile.
#include "gemm/sgemm.hpp"

#include "gemm/sgemm_common.cuh"

#include <cute/tensor.hpp>

#include <cstdint>
#include <type_traits>

// Internal linkage: each translation unit that includes this gets its own.
namespace loom::kernels::sgemm_detail {
namespace {

using namespace cute;
// loom's own Shape, Stride and Tensor would otherwise hide CuTe's here.
using cute::Layout;
using cute::Shape;
using cute::Stride;
using cute::Tensor;

template <int BM, int BN, int BK, int WarpsM, int WarpsN>
struct WarpTileConfig {
  static constexpr int kBM = BM;
  static constexpr int kBN = BN;
  static constexpr int kBK = BK;
  static constexpr int kWarpsM = WarpsM;
  static constexpr int kWarpsN = WarpsN;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  // Blocks an SM the registers must allow: two at 256 threads caps a thread
  // at 128 registers, which the 8 x 8 thread tile fits without spilling; at
  // 128 threads, three (170 registers) leave room for the K-major loads.
  static constexpr int kMinBlocks = kThreads >= 256 ? 2 : 3;
  static constexpr int kLanesM = 4;
  static constexpr int kLanesN = 8;
  static constexpr int kVec = 4;  // floats in a 128-bit access; a lane's sub-tile is kVec x kVec
  static constexpr int kIterM = BM / WarpsM / (kLanesM * kVec);
  static constexpr int kIterN = BN / WarpsN / (kLanesN * kVec);
  static_assert(kIterM >= 1 && kIterM * WarpsM * kLanesM * kVec == BM, "BM must split evenly");
  static_assert(kIterN >= 1 && kIterN * WarpsN * kLanesN * kVec == BN, "BN must split evenly");
  static_assert(BK % kVec == 0, "BK must hold whole vectors");
  // Rows of a shared tile are padded by one vector: the scalar stores of a
  // K-contiguous operand then fall on different banks, and every column
  // still starts 16-byte aligned.
  static constexpr int kPadM = BM + kVec;
  static constexpr int kPadN = BN + kVec;
  // Whether plain products get their own kernel (below): the tiles of large
  // products, where the K loop's registers decide; the small tiles keep one
  // kernel, and the instantiations stay bounded.
  static constexpr bool kPlainKernel = BM == 128 && BN == 128;
};

/// The operand (rows, K) as a tensor whose contiguous mode is static, so
/// that its copies can be vectorized.
template <bool KMajor>
__device__ auto operand_tensor(const float* data, int rows, int k, std::int64_t ld) {
  if constexpr (KMajor) {
    return make_tensor(make_gmem_ptr(data), make_shape(rows, k), make_stride(ld, Int<1>{}));
  } else {
    return make_tensor(make_gmem_ptr(data), make_shape(rows, k), make_stride(Int<1>{}, ld));
  }
}

/// 16-byte loads laid along the operand's contiguous mode: consecutive
/// threads read consecutive vectors, so a warp's loads coalesce.
template <int Rows, int BK, int Threads, bool KMajor>
__device__ auto operand_copy() {
  using Atom = Copy_Atom<UniversalCopy<uint128_t>, float>;
  if constexpr (KMajor) {
    constexpr int kGroups = BK / 4;  // vectors along K
    static_assert(Rows % (Threads / kGroups) == 0, "threads must tile the operand's rows");
    return make_tiled_copy(
        Atom{}, Layout<Shape<Int<Threads / kGroups>, Int<kGroups>>, Stride<Int<kGroups>, _1>>{},
        Layout<Shape<_1, _4>>{});
  } else {
    constexpr int kGroups = Rows / 4;  // vectors along the rows
    static_assert(Threads % kGroups == 0 && BK % (Threads / kGroups) == 0,
                  "threads must tile the operand's K");
    return make_tiled_copy(Atom{}, Layout<Shape<Int<kGroups>, Int<Threads / kGroups>>>{},
                           Layout<Shape<_4, _1>>{});
  }
}

__device__ bool vector_ready(const float* data, std::int64_t ld) {
  return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && ld % 4 == 0;
}

// The problem block z computes: all of it, or its slice of K into its
// partial sums (plain products: the reduction applies the epilogue).
__device__ inline SgemmArgs slice_of(const SgemmArgs& args) {
  if (gridDim.z <= 1) return args;
  SgemmArgs p = args;
  const std::int64_t k0 = static_cast<std::int64_t>(blockIdx.z) * args.k_slice;
  p.k = args.k - k0 < args.k_slice ? args.k - k0 : args.k_slice;
  p.a.data += k0 * args.a.col_stride;
  p.b.data += k0 * args.b.row_stride;
  p.c = {args.partial + static_cast<std::int64_t>(blockIdx.z) * args.m * args.n, args.n, 1};
  p.alpha = 1.0F;
  p.beta = 0.0F;
  p.bias = {};
  p.activation = SgemmActivation::none;
  return p;
}

/// Whether a product is plain: C = alpha A B + beta C over the whole of K,
/// with no bias, no activation and no split. Host and device.
__host__ __device__ inline bool plain_product(const SgemmArgs& p) {
  return p.k_slice == 0 && p.bias.data == nullptr && p.activation == SgemmActivation::none;
}

// Plain (plain_product): the kernel without the split's prologue and with
// an alpha/beta store. The general kernel's prologue and fused epilogue
// (bias, relu, gelu_tanh) cost registers that its K loop needs: at 4096^3
// on an H100, 128 x 128 x 16 ran at 0.73-0.81 of cuBLAS in the general
// form and 0.89-0.93 in this one (bench/RESULTS.md, 2026-12-07).
template <class Cfg, bool AKMajor, bool BKMajor, bool Plain = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    sgemm_warp_tiled_kernel(SgemmArgs args) {
  const SgemmArgs p = Plain ? args : slice_of(args);
  using BM = Int<Cfg::kBM>;
  using BN = Int<Cfg::kBN>;
  using BK = Int<Cfg::kBK>;
  using V = Int<Cfg::kVec>;
  using SmemLayoutA =
      Layout<Shape<BM, BK, _2>, Stride<_1, Int<Cfg::kPadM>, Int<Cfg::kPadM * Cfg::kBK>>>;
  using SmemLayoutB =
      Layout<Shape<BN, BK, _2>, Stride<_1, Int<Cfg::kPadN>, Int<Cfg::kPadN * Cfg::kBK>>>;
  // The row (column) index split as (vector, lane, step, warp): see the top.
  using SplitM = Layout<Shape<V, Int<Cfg::kLanesM>, Int<Cfg::kIterM>, Int<Cfg::kWarpsM>>>;
  using SplitN = Layout<Shape<V, Int<Cfg::kLanesN>, Int<Cfg::kIterN>, Int<Cfg::kWarpsN>>>;

  alignas(16) __shared__ float smem_a[cosize_v<SmemLayoutA>];
  alignas(16) __shared__ float smem_b[cosize_v<SmemLayoutB>];
  Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayoutB{});  // (BN,BK,PIPE)

  const int m = static_cast<int>(p.m);
  const int n = static_cast<int>(p.n);
  const int k = static_cast<int>(p.k);
  const std::int64_t lda = AKMajor ? p.a.row_stride : p.a.col_stride;
  const std::int64_t ldb = BKMajor ? p.b.col_stride : p.b.row_stride;
  Tensor mA = operand_tensor<AKMajor>(p.a.data, m, k, lda);  // (M,K)
  Tensor mB = operand_tensor<BKMajor>(p.b.data, n, k, ldb);  // (N,K)
  Tensor mC = tensor_c(p);                                   // (M,N)

  auto tiler = make_shape(BM{}, BN{}, BK{});
  auto coord = make_coord(int(blockIdx.y), int(blockIdx.x), _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});  // (BM,BK,k)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});  // (BN,BK,k)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});  // (BM,BN)
  Tensor cA = local_tile(make_identity_tensor(shape(mA)), tiler, coord, Step<_1, X, _1>{});
  Tensor cB = local_tile(make_identity_tensor(shape(mB)), tiler, coord, Step<X, _1, _1>{});
  Tensor cC = local_tile(make_identity_tensor(shape(mC)), tiler, coord, Step<_1, _1, X>{});

  // Global -> registers -> shared, one TiledCopy per operand.
  const int tid = static_cast<int>(threadIdx.x);
  auto copy_a = operand_copy<Cfg::kBM, Cfg::kBK, Cfg::kThreads, AKMajor>();
  auto copy_b = operand_copy<Cfg::kBN, Cfg::kBK, Cfg::kThreads, BKMajor>();
  auto thr_copy_a = copy_a.get_slice(tid);
  auto thr_copy_b = copy_b.get_slice(tid);
  Tensor tAgA = thr_copy_a.partition_S(gA);                   // (CPY,CPY_M,CPY_K,k)
  Tensor tAcA = thr_copy_a.partition_S(cA);                   // (CPY,CPY_M,CPY_K,k)
  Tensor tAsA = thr_copy_a.partition_D(sA);                   // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tArA = make_tensor<float>(shape(tAsA(_, _, _, 0)));  // (CPY,CPY_M,CPY_K)
  Tensor tBgB = thr_copy_b.partition_S(gB);                   // (CPY,CPY_N,CPY_K,k)
  Tensor tBcB = thr_copy_b.partition_S(cB);                   // (CPY,CPY_N,CPY_K,k)
  Tensor tBsB = thr_copy_b.partition_D(sB);                   // (CPY,CPY_N,CPY_K,PIPE)
  Tensor tBrB = make_tensor<float>(shape(tBsB(_, _, _, 0)));  // (CPY,CPY_N,CPY_K)

  // Shared -> registers -> FMA: block tile -> warp tile -> thread tile.
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int warp_m = warp % Cfg::kWarpsM;
  const int warp_n = warp / Cfg::kWarpsM;
  const int lane_m = lane / Cfg::kLanesN;
  const int lane_n = lane % Cfg::kLanesN;
  auto rows = make_coord(_, lane_m, _, warp_m);
  auto cols = make_coord(_, lane_n, _, warp_n);
  Tensor sA_split = make_tensor(
      sA.data(), composition(sA.layout(), make_tile(SplitM{}, Layout<BK>{}, Layout<_2>{})));
  Tensor sB_split = make_tensor(
      sB.data(), composition(sB.layout(), make_tile(SplitN{}, Layout<BK>{}, Layout<_2>{})));
  Tensor gC_split = make_tensor(gC.data(), composition(gC.layout(), make_tile(SplitM{}, SplitN{})));
  Tensor cC_split = make_tensor(cC.data(), composition(cC.layout(), make_tile(SplitM{}, SplitN{})));
  // Slicing flattens what it keeps; group_modes restores the thread's rows
  // (columns) as one mode.
  Tensor tCsA = group_modes<0, 2>(sA_split(rows, _, _));  // ((V,ITER_M),BK,PIPE)
  Tensor tCsB = group_modes<0, 2>(sB_split(cols, _, _));  // ((V,ITER_N),BK,PIPE)
  Tensor tCgC =
      group_modes<1, 3>(group_modes<0, 2>(gC_split(rows, cols)));  // ((V,ITER_M),(V,ITER_N))
  Tensor tCcC =
      group_modes<1, 3>(group_modes<0, 2>(cC_split(rows, cols)));  // ((V,ITER_M),(V,ITER_N))
  Tensor tCrA = make_tensor<float>(shape(tCsA(_, 0, 0)));          // ((V,ITER_M))
  Tensor tCrB = make_tensor<float>(shape(tCsB(_, 0, 0)));          // ((V,ITER_N))
  Tensor tCrC = make_tensor<float>(shape(tCgC));                   // ((V,ITER_M),(V,ITER_N))
  clear(tCrC);

  const bool vec_a = vector_ready(p.a.data, lda) && (int(blockIdx.y) + 1) * Cfg::kBM <= m;
  const bool vec_b = vector_ready(p.b.data, ldb) && (int(blockIdx.x) + 1) * Cfg::kBN <= n;
  auto load_tile = [&](int kt) {
    const bool whole_k = (kt + 1) * Cfg::kBK <= k;
    if (vec_a && whole_k) {
      copy(copy_a, tAgA(_, _, _, kt), tArA);
    } else {
      load_predicated(tAgA(_, _, _, kt), tAcA(_, _, _, kt), tArA, shape(mA));
    }
    if (vec_b && whole_k) {
      copy(copy_b, tBgB(_, _, _, kt), tBrB);
    } else {
      load_predicated(tBgB(_, _, _, kt), tBcB(_, _, _, kt), tBrB, shape(mB));
    }
  };
  auto store_tile = [&](int stage) {
    copy(tArA, tAsA(_, _, _, stage));
    copy(tBrB, tBsB(_, _, _, stage));
  };

  const int k_tiles = size<2>(gA);
  if (k_tiles > 0) {
    load_tile(0);
    store_tile(0);
    __syncthreads();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int stage = kt & 1;
    const bool has_next = kt + 1 < k_tiles;
    if (has_next) load_tile(kt + 1);  // in flight during the math below
    CUTE_UNROLL
    for (int kk = 0; kk < Cfg::kBK; ++kk) {
      copy(tCsA(_, kk, stage), tCrA);
      copy(tCsB(_, kk, stage), tCrB);
      CUTE_UNROLL
      for (int j = 0; j < size(tCrB); ++j) {
        CUTE_UNROLL
        for (int i = 0; i < size(tCrA); ++i) tCrC(i, j) = fmaf(tCrA(i), tCrB(j), tCrC(i, j));
      }
    }
    // The other buffer was last read before the previous barrier.
    if (has_next) store_tile(stage ^ 1);
    __syncthreads();
  }
  store_predicated<Plain>(tCrC, tCgC, tCcC, shape(mC), p);
}

// The tiles the benchmark sweeps (SgemmWarpTile).
using WarpTile128x128x8 = WarpTileConfig<128, 128, 8, 4, 2>;
using WarpTile128x128x16 = WarpTileConfig<128, 128, 16, 4, 2>;
using WarpTile128x64x8 = WarpTileConfig<128, 64, 8, 4, 1>;
using WarpTile64x64x8 = WarpTileConfig<64, 64, 8, 2, 2>;

}  // namespace
}  // namespace loom::kernels::sgemm_detail
