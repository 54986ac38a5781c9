#pragma once
// mma_sync: bf16/f16 GEMM on Ampere's tensor-core instruction (hgemm.hpp).
//
// A block owns a 128 x 128 tile of C; four warps (2 x 2) each own 64 x 64,
// walked by the tiled MMA in 32 x 32 x 16 steps (Tile<32,32,16>: a warp's
// two m16n8k16 atoms side by side along N, so one ldmatrix.x4 feeds both).
// K advances 32 at a time through four shared-memory stages filled by
// cp.async 16-byte copies: while the math reads stage s, stages s+1..s+3 are
// in flight. Shared tiles are swizzled (Swizzle<2,3,3> for rows of 32
// K-contiguous elements, Swizzle<3,3,3> for 64-element M- or N-contiguous
// columns) so that the copies' 16-byte stores and ldmatrix's 8 x 16-byte row
// reads each touch all 32 banks once. An operand whose contiguous dimension
// is M or N is read with ldmatrix.trans, which hands the MMA the same
// registers a K-contiguous one would.
//
// Tails: each 16-byte copy is predicated on its first element's (row, k)
// lying inside the matrix; outside, the shared vector is zeroed, so the MMA
// adds nothing for it. With contiguous extents a multiple of 8 a vector is
// wholly inside or outside.
#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"
#include "common/tensor_core.cuh"
#include "elementwise/functors.hpp"
#include "gemm/hgemm.hpp"

#include <cute/tensor.hpp>

#include <atomic>
#include <cstdint>
#include <utility>

namespace loom::kernels::hgemm_detail {
namespace {

using namespace cute;
using cute::Layout;
using cute::Shape;
using cute::Stride;
using cute::Tensor;

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 32;
constexpr int kStages = 4;
constexpr int kThreads = 128;
constexpr int kGroupRows = 8;  // tile rows a group of blocks walks before moving along N

/// One operand's shared layout, global copy and shared-to-register copy,
/// by which of its dimensions is contiguous in memory.
template <class T, int Rows, bool KMajor>
struct OperandConfig;

template <class T, int Rows>
struct OperandConfig<T, Rows, true> {
  using SmemAtom =
      decltype(composition(Swizzle<2, 3, 3>{}, Layout<Shape<_8, _32>, Stride<_32, _1>>{}));
  using SmemLayout =
      decltype(tile_to_shape(SmemAtom{}, Shape<Int<Rows>, Int<kBK>, Int<kStages>>{}));
  using GmemCopy =
      decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
                               Layout<Shape<_32, _4>, Stride<_4, _1>>{}, Layout<Shape<_1, _8>>{}));
  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, T>;
};

template <class T, int Rows>
struct OperandConfig<T, Rows, false> {
  using SmemAtom =
      decltype(composition(Swizzle<3, 3, 3>{}, Layout<Shape<_64, _8>, Stride<_1, _64>>{}));
  using SmemLayout =
      decltype(tile_to_shape(SmemAtom{}, Shape<Int<Rows>, Int<kBK>, Int<kStages>>{}));
  using GmemCopy =
      decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
                               Layout<Shape<_16, _8>, Stride<_1, _16>>{}, Layout<Shape<_8, _1>>{}));
  using SmemCopyAtom = Copy_Atom<SM75_U16x8_LDSM_T, T>;
};

template <class T, bool AKMajor, bool BKMajor>
struct Config {
  using A = OperandConfig<T, kBM, AKMajor>;
  using B = OperandConfig<T, kBN, BKMajor>;
  using TiledMma = TiledMMA<MMA_Atom<typename tensor_core::MmaAtomFor<T>::type>,
                            Layout<Shape<_2, _2, _1>>, Tile<_32, _32, _16>>;
  static constexpr std::size_t kSharedBytes =
      (cosize(typename A::SmemLayout{}) + cosize(typename B::SmemLayout{})) * sizeof(T);
};

/// The operand (rows, K) of batch entry `b`, its contiguous mode static so
/// that copies vectorize.
template <class T, bool KMajor>
__device__ auto operand(const BatchedMatrix& m, int rows, int k, std::int64_t row_stride,
                        std::int64_t k_stride, int b) {
  const T* base = static_cast<const T*>(m.data) + b * m.batch_stride;
  if constexpr (KMajor) {
    return make_tensor(make_gmem_ptr(base), make_shape(rows, k), make_stride(row_stride, _1{}));
  } else {
    return make_tensor(make_gmem_ptr(base), make_shape(rows, k), make_stride(_1{}, k_stride));
  }
}

/// dst = src for the vectors whose first element lies inside (rows, k);
/// zeros elsewhere.
template <class Copy, class TS, class TD, class TC>
__device__ __forceinline__ void copy_tile(const Copy& copy_op, const TS& src, TD&& dst,
                                          const TC& coords, int rows_left, int k_left) {
  CUTE_UNROLL
  for (int i = 0; i < size<1>(dst); ++i) {
    CUTE_UNROLL
    for (int j = 0; j < size<2>(dst); ++j) {
      const auto c = coords(0, i, j);
      if (get<0>(c) < rows_left && get<1>(c) < k_left) {
        copy(copy_op, src(_, i, j), dst(_, i, j));
      } else {
        clear(dst(_, i, j));
      }
    }
  }
}

/// act(alpha * acc + beta * c + bias) for element (m, n) of C's batch entry.
/// A call, not inlined: the epilogue has a call site per accumulator, and
/// inlined copies of this (C's and the bias's dtype switches, gelu) made
/// ptxas take 174 s a file on CI's cores (45 s as a call). The plain
/// epilogue (alpha only) stays inline in the kernel.
__device__ __noinline__ float epilogue_value(const HgemmArgs& p, float acc, std::int64_t m,
                                             std::int64_t n, std::int64_t c_index, int b) {
  float v = p.alpha * acc;
  if (p.beta != 0.0F) v = fmaf(p.beta, load_as_f32(p.c.data, p.c.dtype, c_index), v);
  if (p.bias.data != nullptr) {
    v += load_as_f32(p.bias.data, p.bias.dtype,
                     b * p.bias.batch_stride + m * p.bias.row_stride + n * p.bias.col_stride);
  }
  switch (p.activation) {
    case SgemmActivation::relu: return map_fn::loom_map_relu(v);
    case SgemmActivation::gelu_tanh: return map_fn::loom_map_gelu_tanh(v);
    default: return v;
  }
}

/// The block's tile of C: blocks walk C in groups of kGroupRows tile rows,
/// column by column within a group, so a group's tiles of B are read while
/// they are still in L2.
__device__ __forceinline__ void block_tile(int tiles_m, int tiles_n, int& bm, int& bn) {
  const int id = static_cast<int>(blockIdx.x);
  const int per_group = kGroupRows * tiles_n;
  const int first_m = (id / per_group) * kGroupRows;
  const int rows = min(tiles_m - first_m, kGroupRows);
  const int in_group = id % per_group;
  bm = first_m + in_group % rows;
  bn = in_group / rows;
}

template <class T, bool AKMajor, bool BKMajor>
__global__ void __launch_bounds__(kThreads) hgemm_mma_sync_kernel(HgemmArgs p) {
  using Cfg = Config<T, AKMajor, BKMajor>;
  const int M = static_cast<int>(p.m);
  const int N = static_cast<int>(p.n);
  const int K = static_cast<int>(p.k);
  const int batch = static_cast<int>(blockIdx.y);
  int bm = 0;
  int bn = 0;
  block_tile((M + kBM - 1) / kBM, (N + kBN - 1) / kBN, bm, bn);

  // A (M, K); B as (N, K): element (n, k) is B's (k, n).
  const Tensor mA = operand<T, AKMajor>(p.a, M, K, p.a.row_stride, p.a.col_stride, batch);
  const Tensor mB = operand<T, BKMajor>(p.b, N, K, p.b.col_stride, p.b.row_stride, batch);
  const Tensor gA = local_tile(mA, Shape<Int<kBM>, Int<kBK>>{}, make_coord(bm, _));  // (BM,BK,k)
  const Tensor gB = local_tile(mB, Shape<Int<kBN>, Int<kBK>>{}, make_coord(bn, _));  // (BN,BK,k)

  extern __shared__ __align__(128) unsigned char shared[];
  T* shared_a = reinterpret_cast<T*>(shared);
  T* shared_b = shared_a + cosize(typename Cfg::A::SmemLayout{});
  Tensor sA = make_tensor(make_smem_ptr(shared_a), typename Cfg::A::SmemLayout{});  // (BM,BK,P)
  Tensor sB = make_tensor(make_smem_ptr(shared_b), typename Cfg::B::SmemLayout{});  // (BN,BK,P)

  typename Cfg::A::GmemCopy copy_a;
  typename Cfg::B::GmemCopy copy_b;
  auto thr_copy_a = copy_a.get_slice(threadIdx.x);
  auto thr_copy_b = copy_b.get_slice(threadIdx.x);
  const Tensor tAgA = thr_copy_a.partition_S(gA);  // (CPY,CPY_M,CPY_K,k)
  Tensor tAsA = thr_copy_a.partition_D(sA);        // (CPY,CPY_M,CPY_K,P)
  const Tensor tBgB = thr_copy_b.partition_S(gB);
  Tensor tBsB = thr_copy_b.partition_D(sB);
  // Which element of the tile each copy vector starts at, for the tails.
  const Tensor tAcA = thr_copy_a.partition_S(make_identity_tensor(Shape<Int<kBM>, Int<kBK>>{}));
  const Tensor tBcB = thr_copy_b.partition_S(make_identity_tensor(Shape<Int<kBN>, Int<kBK>>{}));
  const int rows_a = M - bm * kBM;
  const int rows_b = N - bn * kBN;

  const int k_tiles = (K + kBK - 1) / kBK;
  const auto load_stage = [&](int k_tile, int stage) {
    const int k_left = K - k_tile * kBK;
    copy_tile(copy_a, tAgA(_, _, _, k_tile), tAsA(_, _, _, stage), tAcA, rows_a, k_left);
    copy_tile(copy_b, tBgB(_, _, _, k_tile), tBsB(_, _, _, stage), tBcB, rows_b, k_left);
  };

  // Prologue: the first kStages - 1 tiles in flight (a fence a stage, even
  // an empty one, keeps the wait counts below right).
  int k_tile_next = 0;
  CUTE_UNROLL
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (k_tile_next < k_tiles) load_stage(k_tile_next, stage);
    cp_async_fence();
    ++k_tile_next;
  }

  typename Cfg::TiledMma mma;
  auto thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));  // (MMA,MMA_M,MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));  // (MMA,MMA_N,MMA_K)
  const Tensor cC = make_identity_tensor(Shape<Int<kBM>, Int<kBN>>{});
  const Tensor tCcC = thr_mma.partition_C(cC);  // (MMA,MMA_M,MMA_N) -> (m, n)
  Tensor acc = partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});
  clear(acc);

  auto s2r_a = make_tiled_copy_A(typename Cfg::A::SmemCopyAtom{}, mma);
  auto s2r_thr_a = s2r_a.get_slice(threadIdx.x);
  const Tensor tXsA = s2r_thr_a.partition_S(sA);  // (CPY,MMA_M,MMA_K,P)
  Tensor tXrA = s2r_thr_a.retile_D(tCrA);
  auto s2r_b = make_tiled_copy_B(typename Cfg::B::SmemCopyAtom{}, mma);
  auto s2r_thr_b = s2r_b.get_slice(threadIdx.x);
  const Tensor tXsB = s2r_thr_b.partition_S(sB);
  Tensor tXrB = s2r_thr_b.retile_D(tCrB);

  constexpr int kBlocks = size<2>(decltype(tCrA){});  // MMA_K steps in a tile of K
  int read_stage = 0;
  int write_stage = kStages - 1;
  cp_async_wait<kStages - 2>();
  __syncthreads();
  copy(s2r_a, tXsA(_, _, 0, read_stage), tXrA(_, _, 0));
  copy(s2r_b, tXsB(_, _, 0, read_stage), tXrB(_, _, 0));

  for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
    CUTE_UNROLL
    for (int kb = 0; kb < kBlocks; ++kb) {
      if (kb == kBlocks - 1) {
        // The next tile's stage must have landed before its first read.
        read_stage = read_stage == kStages - 1 ? 0 : read_stage + 1;
        cp_async_wait<kStages - 2>();
        __syncthreads();
      }
      const int kb_next = (kb + 1) % kBlocks;
      copy(s2r_a, tXsA(_, _, kb_next, read_stage), tXrA(_, _, kb_next));
      copy(s2r_b, tXsB(_, _, kb_next, read_stage), tXrB(_, _, kb_next));
      if (kb == 0) {
        // The stage read during the previous tile is free again (the
        // barrier above, a tile ago, saw every warp finish with it).
        if (k_tile_next < k_tiles) load_stage(k_tile_next, write_stage);
        cp_async_fence();
        ++k_tile_next;
        write_stage = write_stage == kStages - 1 ? 0 : write_stage + 1;
      }
      gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), acc);
    }
  }

  // Epilogue: pairs of neighbouring columns (an accumulator's values 2i and
  // 2i+1) go out as one store where C is row-major.
  const std::int64_t c_batch = batch * p.c.batch_stride;
  const std::int64_t m0 = static_cast<std::int64_t>(bm) * kBM;
  const std::int64_t n0 = static_cast<std::int64_t>(bn) * kBN;
  const bool row_major_c = p.c.col_stride == 1;
  const bool plain =
      p.beta == 0.0F && p.bias.data == nullptr && p.activation == SgemmActivation::none;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); i += 2) {
    const std::int64_t m = m0 + get<0>(tCcC(i));
    const std::int64_t n = n0 + get<1>(tCcC(i));
    if (m >= M) continue;
    const std::int64_t at = c_batch + m * p.c.row_stride + n * p.c.col_stride;
    const bool neighbours = get<0>(tCcC(i + 1)) == get<0>(tCcC(i)) &&
                            get<1>(tCcC(i + 1)) == get<1>(tCcC(i)) + 1;  // known at compile time
    const auto address = reinterpret_cast<std::uintptr_t>(p.c.data) +
                         static_cast<std::uintptr_t>(at) * (p.c.dtype == DType::f32 ? 4U : 2U);
    const bool aligned = address % (p.c.dtype == DType::f32 ? 8U : 4U) == 0;
    if (neighbours && row_major_c && n + 1 < N && aligned) {
      const float v0 = plain ? p.alpha * acc(i) : epilogue_value(p, acc(i), m, n, at, batch);
      const float v1 =
          plain ? p.alpha * acc(i + 1) : epilogue_value(p, acc(i + 1), m, n + 1, at + 1, batch);
      if (p.c.dtype == DType::f32) {
        *reinterpret_cast<float2*>(static_cast<float*>(const_cast<void*>(p.c.data)) + at) =
            make_float2(v0, v1);
      } else {
        const bool bf16 = p.c.dtype == DType::bf16;
        const std::uint32_t lo = bf16 ? f32_to_bf16_bits(v0) : f32_to_f16_bits(v0);
        const std::uint32_t hi = bf16 ? f32_to_bf16_bits(v1) : f32_to_f16_bits(v1);
        *reinterpret_cast<std::uint32_t*>(static_cast<std::uint16_t*>(const_cast<void*>(p.c.data)) +
                                          at) = lo | (hi << 16);
      }
      continue;
    }
    CUTE_UNROLL
    for (int j = 0; j < 2; ++j) {
      const std::int64_t nj = n0 + get<1>(tCcC(i + j));
      const std::int64_t mj = m0 + get<0>(tCcC(i + j));
      if (mj >= M || nj >= N) continue;
      const std::int64_t at_j = c_batch + mj * p.c.row_stride + nj * p.c.col_stride;
      store_from_f32(
          const_cast<void*>(p.c.data), p.c.dtype, at_j,
          plain ? p.alpha * acc(i + j) : epilogue_value(p, acc(i + j), mj, nj, at_j, batch));
    }
  }
}

template <class T, bool AKMajor, bool BKMajor>
void launch_layout(const HgemmArgs& p, StreamView stream) {
  constexpr auto kernel = hgemm_mma_sync_kernel<T, AKMajor, BKMajor>;
  constexpr std::size_t bytes = Config<T, AKMajor, BKMajor>::kSharedBytes;
  static std::atomic<std::uint64_t> opted_in{0};
  tensor_core::opt_in_shared_memory(kernel, bytes, opted_in);
  const auto tiles = static_cast<unsigned>(((p.m + kBM - 1) / kBM) * ((p.n + kBN - 1) / kBN));
  loom::detail::launch_on_stream(stream, kernel, dim3(tiles, static_cast<unsigned>(p.batch)),
                                 kThreads, bytes, p);
}

/// Launches the kernel for operand type T, in the layouts it is built for:
/// an A whose contiguous dimension is M with a K-contiguous B is the
/// transposed problem C^T = B^T A^T, whose A is K-contiguous and whose B is
/// N-contiguous (swapping the operands swaps which is which).
template <class T>
void launch_mma_sync(HgemmArgs p, StreamView stream) {
  bool a_k = p.a.col_stride == 1;
  const bool b_k = p.b.row_stride == 1;
  if (!a_k && b_k) {
    std::swap(p.m, p.n);
    std::swap(p.a, p.b);
    std::swap(p.a.row_stride, p.a.col_stride);
    std::swap(p.b.row_stride, p.b.col_stride);
    std::swap(p.c.row_stride, p.c.col_stride);
    std::swap(p.bias.row_stride, p.bias.col_stride);
    launch_layout<T, true, false>(p, stream);
  } else if (a_k && b_k) {
    launch_layout<T, true, true>(p, stream);
  } else if (a_k) {
    launch_layout<T, true, false>(p, stream);
  } else {
    launch_layout<T, false, false>(p, stream);
  }
  LOOM_KERNEL_CHECK_LAUNCH("hgemm mma_sync kernel launch");
}

}  // namespace
}  // namespace loom::kernels::hgemm_detail
