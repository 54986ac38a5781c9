#pragma once
// flash_bwd: the attention backward kernels (the design: attention.hpp).
#include "attention/attention.hpp"
#include "attention/flash_common.cuh"
#include "common/check.hpp"
#include "common/launch.hpp"
#include "common/tensor_core.cuh"

#include <cute/tensor.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>

namespace loom::kernels::attention_detail {
namespace {

using namespace cute;
using cute::Layout;
using cute::Shape;
using cute::Stride;
using cute::Tensor;

constexpr int kBlockM = 64;  // query rows a step
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowThreads = 256;  // the delta and dq launches: a warp a row
// Keys a block of the main launch: 128 at head dim 128 (1.04x 64 keys on
// an H100, with the rest of this design), 64 at head dim 64 (128 keys took
// 236 registers there, one block a multiprocessor, and ran 0.92x).
template <int HeadDim>
constexpr int kBwdBlockN = HeadDim == 128 ? 128 : 64;

/// The key-block kernel's tiles and products for BlockN keys a block.
template <class T, int HeadDim, int BlockN>
struct FlashBwdConfig {
  static_assert(HeadDim % 64 == 0 && BlockN % 64 == 0, "rows of 64-element swizzle atoms");
  using SmemQ = flash::SmemTile<kBlockM, HeadDim>;             // Q, dO
  using SmemQt = flash::SmemTileTransposed<kBlockM, HeadDim>;  // (HeadDim, query)
  using SmemK = flash::SmemTile<BlockN, HeadDim>;              // K, V
  using SmemKt = flash::SmemTileTransposed<BlockN, HeadDim>;   // (HeadDim, key)
  using SmemS = flash::SmemTile<kBlockM, BlockN>;              // P, dS (query, key)
  using SmemSt = flash::SmemTileTransposed<kBlockM, BlockN>;   // (key, query)
  using Atom = MMA_Atom<typename tensor_core::MmaAtomFor<T>::type>;
  // Eight warps. With 64 keys a block every product is 64 rows by 64 or
  // HeadDim columns: four warps along M, two along N. With 128 keys, S and
  // dP (64 x 128) and dQ (64 x HeadDim) take two warps along M and four
  // along N, and dK and dV (128 x HeadDim) four by two: each warp's tile
  // is then 32 rows deep, so an operand read from shared memory feeds
  // twice the products.
  using MmaFourByTwo = TiledMMA<Atom, Layout<Shape<_4, _2, _1>>, Tile<_64, _32, _16>>;
  using MmaTwoByFour = TiledMMA<Atom, Layout<Shape<_2, _4, _1>>, Tile<_32, _64, _16>>;
  using MmaSdP = std::conditional_t<BlockN == 64, MmaFourByTwo, MmaTwoByFour>;
  using MmadKV = MmaFourByTwo;
  using MmadQ = std::conditional_t<BlockN == 64, MmaFourByTwo, MmaTwoByFour>;
  using GmemCopy = flash::GmemRowsCopy<T, HeadDim, kThreads>;
  // K and V; Q and dO twice (the next query block's load overlaps this
  // one's products); P and dS; lse and delta.
  static constexpr std::size_t kSharedBytes =
      (2 * cosize(SmemK{}) + 4 * cosize(SmemQ{}) + 2 * cosize(SmemS{})) * sizeof(T) +
      2 * kBlockM * sizeof(float);
  // Two blocks a multiprocessor where registers and shared memory allow.
  static constexpr int kMinBlocks = BlockN == 64 ? 2 : 1;
};

/// acc += A B^T over shared tiles A (M, K) and B (N, K), each k-slice loaded
/// into registers with its own ldmatrix copy just before its product.
template <class Mma, class CopyAtomA, class CopyAtomB, class SA, class SB, class Acc>
__device__ __forceinline__ void mma_from_shared(const Mma& mma, CopyAtomA atom_a, CopyAtomB atom_b,
                                                const SA& sA, const SB& sB, Acc& acc) {
  auto thr_mma = mma.get_slice(threadIdx.x);
  Tensor rA = thr_mma.partition_fragment_A(sA);
  Tensor rB = thr_mma.partition_fragment_B(sB);
  auto copy_a = make_tiled_copy_A(atom_a, mma);
  auto thr_a = copy_a.get_slice(threadIdx.x);
  const Tensor tAsA = thr_a.partition_S(sA);
  Tensor tArA = thr_a.retile_D(rA);
  auto copy_b = make_tiled_copy_B(atom_b, mma);
  auto thr_b = copy_b.get_slice(threadIdx.x);
  const Tensor tBsB = thr_b.partition_S(sB);
  Tensor tBrB = thr_b.retile_D(rB);
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(rA); ++kb) {
    copy(copy_a, tAsA(_, _, kb), tArA(_, _, kb));
    copy(copy_b, tBsB(_, _, kb), tBrB(_, _, kb));
    gemm(mma, rA(_, _, kb), rB(_, _, kb), acc);
  }
}

/// acc1 += A1 B1^T and acc2 += A2 B2^T over the same k extent, k-slice by
/// k-slice side by side: each slice's two products are independent, so a
/// warp has twice the tensor-core work in flight between its dependent steps
/// (at two warps a scheduler the products waited on each other's latency).
template <class Mma, class CopyAtomA, class CopyAtomB, class SA1, class SB1, class Acc1, class SA2,
          class SB2, class Acc2>
__device__ __forceinline__ void mma_pair_from_shared(const Mma& mma, CopyAtomA atom_a,
                                                     CopyAtomB atom_b, const SA1& sA1,
                                                     const SB1& sB1, Acc1& acc1, const SA2& sA2,
                                                     const SB2& sB2, Acc2& acc2) {
  auto thr_mma = mma.get_slice(threadIdx.x);
  auto copy_a = make_tiled_copy_A(atom_a, mma);
  auto thr_a = copy_a.get_slice(threadIdx.x);
  auto copy_b = make_tiled_copy_B(atom_b, mma);
  auto thr_b = copy_b.get_slice(threadIdx.x);
  Tensor rA1 = thr_mma.partition_fragment_A(sA1);
  Tensor rB1 = thr_mma.partition_fragment_B(sB1);
  Tensor rA2 = thr_mma.partition_fragment_A(sA2);
  Tensor rB2 = thr_mma.partition_fragment_B(sB2);
  const Tensor tAsA1 = thr_a.partition_S(sA1);
  const Tensor tBsB1 = thr_b.partition_S(sB1);
  const Tensor tAsA2 = thr_a.partition_S(sA2);
  const Tensor tBsB2 = thr_b.partition_S(sB2);
  Tensor tArA1 = thr_a.retile_D(rA1);
  Tensor tBrB1 = thr_b.retile_D(rB1);
  Tensor tArA2 = thr_a.retile_D(rA2);
  Tensor tBrB2 = thr_b.retile_D(rB2);
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(rA1); ++kb) {
    copy(copy_a, tAsA1(_, _, kb), tArA1(_, _, kb));
    copy(copy_b, tBsB1(_, _, kb), tBrB1(_, _, kb));
    copy(copy_a, tAsA2(_, _, kb), tArA2(_, _, kb));
    copy(copy_b, tBsB2(_, _, kb), tBrB2(_, _, kb));
    gemm(mma, rA1(_, _, kb), rB1(_, _, kb), acc1);
    gemm(mma, rA2(_, _, kb), rB2(_, _, kb), acc2);
  }
}

/// Writes a (rows, HeadDim) f32 accumulator times `scale` as T into the rows
/// of `dst` below `rows_left`, two neighbouring columns a 32-bit store.
template <class T, class Acc, class Coords>
__device__ __forceinline__ void store_rows(const Acc& acc, const Coords& coords, T* dst,
                                           std::int64_t row_stride, int rows_left, float scale) {
  CUTE_UNROLL
  for (int i = 0; i < size(acc); i += 2) {
    const int row = get<0>(coords(i));
    if (row < rows_left) {
      alignas(4)
          const T pair[2] = {static_cast<T>(acc(i) * scale), static_cast<T>(acc(i + 1) * scale)};
      *reinterpret_cast<std::uint32_t*>(dst + row * row_stride + get<1>(coords(i))) =
          *reinterpret_cast<const std::uint32_t*>(pair);
    }
  }
}

/// The query row a warp of the delta and dq launches takes: g counts rows
/// over (batch, head, row), the order of delta and dq_accum.
struct WarpRow {
  std::int64_t g, b, h, i;
  template <class T>
  __device__ const T* in(const AttentionTensor& t) const {
    return static_cast<const T*>(t.data) + b * t.batch_stride + h * t.head_stride +
           i * t.row_stride;
  }
};

__device__ __forceinline__ WarpRow warp_row(const AttentionBackwardArgs& p) {
  const std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * (kRowThreads / 32) +
                         static_cast<std::int64_t>(threadIdx.x / 32);
  const std::int64_t bh = g / p.q_len;
  return {g, bh / p.heads, bh % p.heads, g % p.q_len};
}

/// One warp a query row: delta = dout . out (f32), and the row of dq_accum
/// cleared for the key blocks' atomics.
template <class T, int HeadDim>
__global__ void __launch_bounds__(kRowThreads) flash_bwd_delta_kernel(AttentionBackwardArgs p) {
  const WarpRow r = warp_row(p);
  if (r.g >= p.batch * p.heads * p.q_len) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t g = r.g;
  const T* o = r.in<T>(p.out);
  const T* d_o = r.in<T>(p.dout);
  float sum = 0.0F;
  CUTE_UNROLL
  for (int e = lane; e < HeadDim; e += 32) {
    sum += static_cast<float>(o[e]) * static_cast<float>(d_o[e]);
  }
  CUTE_UNROLL
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFU, sum, offset);
  if (lane == 0) p.delta[g] = sum;
  float* accum = p.dq_accum + g * HeadDim;
  CUTE_UNROLL
  for (int e = lane; e < HeadDim; e += 32) accum[e] = 0.0F;
}

/// One warp a query row: dq = scale * dq_accum, rounded to T.
template <class T, int HeadDim>
__global__ void __launch_bounds__(kRowThreads) flash_bwd_dq_kernel(AttentionBackwardArgs p) {
  const WarpRow r = warp_row(p);
  if (r.g >= p.batch * p.heads * p.q_len) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  T* dq = const_cast<T*>(r.in<T>(p.dq));
  const float* accum = p.dq_accum + r.g * HeadDim;
  CUTE_UNROLL
  for (int e = lane; e < HeadDim; e += 32) dq[e] = static_cast<T>(accum[e] * p.scale);
}

template <class T, int HeadDim, int BlockN>
__global__ void __launch_bounds__(kThreads, (FlashBwdConfig<T, HeadDim, BlockN>::kMinBlocks))
    flash_bwd_kernel(AttentionBackwardArgs p) {
  using Cfg = FlashBwdConfig<T, HeadDim, BlockN>;
  constexpr int kBlockN = BlockN;
  const int n_block = static_cast<int>(blockIdx.x);
  const auto head = static_cast<std::int64_t>(blockIdx.y);
  const auto batch = static_cast<std::int64_t>(blockIdx.z);
  const int q_len = static_cast<int>(p.q_len);
  const int k_len = static_cast<int>(p.k_len);
  const int key0 = n_block * kBlockN;
  const int m_blocks = (q_len + kBlockM - 1) / kBlockM;
  // Causal: the first query that keeps key0 is key0 - offset; the query
  // blocks before it see none of this block's keys.
  int m_begin = 0;
  if (p.causal) {
    const std::int64_t first = key0 - p.causal_offset;
    m_begin = first <= 0 ? 0 : (first >= q_len ? m_blocks : static_cast<int>(first / kBlockM));
  }

  const auto at = [&](const AttentionTensor& t) {
    return static_cast<const T*>(t.data) + batch * t.batch_stride + head * t.head_stride;
  };
  const auto rows_of = [&](const AttentionTensor& t, int len) {
    return make_tensor(make_gmem_ptr(at(t)), make_shape(len, Int<HeadDim>{}),
                       make_stride(t.row_stride, _1{}));
  };
  const auto q_tile = Shape<Int<kBlockM>, Int<HeadDim>>{};
  const auto k_tile = Shape<Int<kBlockN>, Int<HeadDim>>{};
  const Tensor gK = local_tile(rows_of(p.k, k_len), k_tile, make_coord(n_block, 0));
  const Tensor gV = local_tile(rows_of(p.v, k_len), k_tile, make_coord(n_block, 0));
  const Tensor gQ = local_tile(rows_of(p.q, q_len), q_tile, make_coord(_, 0));  // (M, D, m)
  const Tensor gdO = local_tile(rows_of(p.dout, q_len), q_tile, make_coord(_, 0));

  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kKSize = cosize(typename Cfg::SmemK{});
  constexpr int kQSize = cosize(typename Cfg::SmemQ{});
  constexpr int kSSize = cosize(typename Cfg::SmemS{});
  // [K][V][Q, dO of even steps][Q, dO of odd steps][P][dS][lse][delta]
  T* base = reinterpret_cast<T*>(shared);
  Tensor sK = make_tensor(make_smem_ptr(base), typename Cfg::SmemK{});
  Tensor sV = make_tensor(make_smem_ptr(base + kKSize), typename Cfg::SmemK{});
  T* const q_base = base + 2 * kKSize;
  const auto q_buffer = [&](int buffer) { return q_base + 2 * buffer * kQSize; };
  const auto do_buffer = [&](int buffer) { return q_base + (2 * buffer + 1) * kQSize; };
  T* const s_base = q_base + 4 * kQSize;
  Tensor sP = make_tensor(make_smem_ptr(s_base), typename Cfg::SmemS{});
  Tensor sdS = make_tensor(make_smem_ptr(s_base + kSSize), typename Cfg::SmemS{});
  const Tensor sKt = make_tensor(sK.data(), typename Cfg::SmemKt{});
  const Tensor sPt = make_tensor(sP.data(), typename Cfg::SmemSt{});
  const Tensor sdSt = make_tensor(sdS.data(), typename Cfg::SmemSt{});
  auto* s_lse = reinterpret_cast<float*>(s_base + 2 * kSSize);
  float* s_delta = s_lse + kBlockM;

  typename Cfg::GmemCopy gmem_copy;
  auto thr_copy = gmem_copy.get_slice(threadIdx.x);
  const Tensor tQc = thr_copy.partition_S(make_identity_tensor(q_tile));
  const Tensor tKc = thr_copy.partition_S(make_identity_tensor(k_tile));
  const Tensor tQgQ = thr_copy.partition_S(gQ);
  const Tensor tdOgdO = thr_copy.partition_S(gdO);
  // Query block m's Q and dO into a buffer, as one cp.async group.
  const auto load_query_block = [&](int m, int buffer) {
    const int rows_left = q_len - m * kBlockM;
    flash::copy_rows(
        gmem_copy, tQgQ(_, _, _, m),
        thr_copy.partition_D(make_tensor(make_smem_ptr(q_buffer(buffer)), typename Cfg::SmemQ{})),
        tQc, rows_left);
    flash::copy_rows(
        gmem_copy, tdOgdO(_, _, _, m),
        thr_copy.partition_D(make_tensor(make_smem_ptr(do_buffer(buffer)), typename Cfg::SmemQ{})),
        tQc, rows_left);
    cp_async_fence();
  };
  flash::copy_rows(gmem_copy, thr_copy.partition_S(gK), thr_copy.partition_D(sK), tKc,
                   k_len - key0);
  flash::copy_rows(gmem_copy, thr_copy.partition_S(gV), thr_copy.partition_D(sV), tKc,
                   k_len - key0);
  cp_async_fence();
  // The key blocks of a head run side by side and would all add into the
  // same query block's dq rows at once (atomics to one address serialize):
  // each walks its query blocks from its own starting point instead.
  const int steps = m_blocks - m_begin;
  const int first_step = steps > 0 ? n_block % steps : 0;
  const auto query_block = [&](int step) {
    const int s = step + first_step;
    return m_begin + (s < steps ? s : s - steps);
  };
  if (steps > 0) load_query_block(query_block(0), 0);

  typename Cfg::MmaSdP mma_sdp;
  typename Cfg::MmadKV mma_dkv;
  typename Cfg::MmadQ mma_dq;
  auto thr_sdp = mma_sdp.get_slice(threadIdx.x);
  auto thr_dkv = mma_dkv.get_slice(threadIdx.x);
  auto thr_dq = mma_dq.get_slice(threadIdx.x);
  Tensor acc_dk = partition_fragment_C(mma_dkv, k_tile);
  Tensor acc_dv = partition_fragment_C(mma_dkv, k_tile);
  clear(acc_dk);
  clear(acc_dv);
  const Copy_Atom<SM75_U32x4_LDSM_N, T> ldsm;
  const Copy_Atom<SM75_U16x8_LDSM_T, T> ldsm_t;
  // Where each accumulator element sits: (query, key) in S and dP, (key,
  // col) in dK and dV, (query, col) in dQ.
  const Tensor tScS =
      thr_sdp.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  const Tensor tKVc = thr_dkv.partition_C(make_identity_tensor(k_tile));
  const Tensor tQc_dq = thr_dq.partition_C(make_identity_tensor(q_tile));
  const Tensor tSsP = thr_sdp.partition_C(sP);
  const Tensor tSsdS = thr_sdp.partition_C(sdS);
  const float scale_log2 = p.scale * flash::kLog2e;
  const float* lse =
      static_cast<const float*>(p.lse.data) + batch * p.lse.batch_stride + head * p.lse.head_stride;
  const std::int64_t bh_row0 = (batch * p.heads + head) * p.q_len;

  for (int step = 0; step < steps; ++step) {
    const int m = query_block(step);
    const int q0 = m * kBlockM;
    const int buffer = step & 1;
    if (threadIdx.x < kBlockM) {
      // Rows past the end, and rows that keep no key (lse -inf), get
      // P = 2^(s - inf) = 0 and so no gradient.
      const int row = q0 + static_cast<int>(threadIdx.x);
      const float l = row < q_len ? lse[row * p.lse.row_stride] : -INFINITY;
      s_lse[threadIdx.x] = l == -INFINITY ? INFINITY : l * flash::kLog2e;
      s_delta[threadIdx.x] = row < q_len ? p.delta[bh_row0 + row] : 0.0F;
    }
    // The next block's loads run under this block's products; the other
    // buffer was last read before the barrier that ended the step before.
    if (step + 1 < steps) {
      load_query_block(query_block(step + 1), buffer ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const Tensor sQ = make_tensor(make_smem_ptr(q_buffer(buffer)), typename Cfg::SmemQ{});
    const Tensor sdO = make_tensor(make_smem_ptr(do_buffer(buffer)), typename Cfg::SmemQ{});
    const Tensor sQt = make_tensor(sQ.data(), typename Cfg::SmemQt{});
    const Tensor sdOt = make_tensor(sdO.data(), typename Cfg::SmemQt{});

    Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});
    Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});
    clear(acc_s);
    clear(acc_dp);
    mma_pair_from_shared(mma_sdp, ldsm, ldsm, sQ, sK, acc_s, sdO, sV, acc_dp);

    // P = exp(scale s - lse) with masked keys 0; dS = P (dP - delta). Two
    // neighbouring keys a 32-bit store (one swizzled 16-byte chunk holds
    // both). Blocks on neither the tail nor the diagonal skip the masks.
    const bool tail = key0 + kBlockN > k_len;
    const bool diagonal = p.causal && key0 + kBlockN - 1 > q0 + p.causal_offset;
    // Each row's lse and delta read before the stores below (which could
    // alias them as far as the compiler knows): a thread's few rows once.
    constexpr int kPairs = decltype(size(acc_s))::value / 2;
    float lse_of[kPairs];
    float delta_of[kPairs];
    CUTE_UNROLL
    for (int i = 0; i < kPairs; ++i) {
      lse_of[i] = s_lse[get<0>(tScS(2 * i))];
      delta_of[i] = s_delta[get<0>(tScS(2 * i))];
    }
    const auto softmax_gradient = [&](auto masking) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc_s); i += 2) {
        const int r = get<0>(tScS(i));
        const int key = key0 + get<1>(tScS(i));
        const float lse_r = lse_of[i / 2];
        const float delta_r = delta_of[i / 2];
        alignas(4) T probs[2];
        alignas(4) T grads[2];
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          bool masked = false;
          if constexpr (decltype(masking)::value) {
            masked = (tail && key + e >= k_len) ||
                     (diagonal && key + e > static_cast<std::int64_t>(q0 + r) + p.causal_offset);
          }
          const float prob = masked ? 0.0F : flash::fast_exp2(acc_s(i + e) * scale_log2 - lse_r);
          probs[e] = static_cast<T>(prob);
          grads[e] = static_cast<T>(prob * (acc_dp(i + e) - delta_r));
        }
        *reinterpret_cast<std::uint32_t*>(&tSsP(i)) =
            *reinterpret_cast<const std::uint32_t*>(probs);
        *reinterpret_cast<std::uint32_t*>(&tSsdS(i)) =
            *reinterpret_cast<const std::uint32_t*>(grads);
      }
    };
    if (tail || diagonal) {
      softmax_gradient(cute::true_type{});
    } else {
      softmax_gradient(cute::false_type{});
    }
    __syncthreads();

    mma_pair_from_shared(mma_dkv, ldsm_t, ldsm_t, sPt, sdOt, acc_dv, sdSt, sQt, acc_dk);
    Tensor acc_dq = partition_fragment_C(mma_dq, q_tile);
    clear(acc_dq);
    mma_from_shared(mma_dq, ldsm, ldsm_t, sdS, sKt, acc_dq);
    CUTE_UNROLL
    for (int i = 0; i < size(acc_dq); i += 2) {
      const int row = q0 + get<0>(tQc_dq(i));
      if (row < q_len) {
        float* to = p.dq_accum + (bh_row0 + row) * HeadDim + get<1>(tQc_dq(i));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        atomicAdd(reinterpret_cast<float2*>(to), make_float2(acc_dq(i), acc_dq(i + 1)));
#else
        atomicAdd(to, acc_dq(i));
        atomicAdd(to + 1, acc_dq(i + 1));
#endif
      }
    }
    __syncthreads();  // every warp is done with this buffer, sP, sdS and s_lse
  }
  // A block that no query sees never waited for its K and V.
  cp_async_wait<0>();

  T* dk = const_cast<T*>(at(p.dk)) + static_cast<std::int64_t>(key0) * p.dk.row_stride;
  T* dv = const_cast<T*>(at(p.dv)) + static_cast<std::int64_t>(key0) * p.dv.row_stride;
  store_rows(acc_dk, tKVc, dk, p.dk.row_stride, k_len - key0, p.scale);
  store_rows(acc_dv, tKVc, dv, p.dv.row_stride, k_len - key0, 1.0F);
}

unsigned row_blocks(const AttentionBackwardArgs& p) {
  const std::int64_t rows = p.batch * p.heads * p.q_len;
  return static_cast<unsigned>((rows + kRowThreads / 32 - 1) / (kRowThreads / 32));
}

template <class T, int HeadDim, int BlockN>
void launch_key_blocks(const AttentionBackwardArgs& p, StreamView stream) {
  constexpr auto kernel = flash_bwd_kernel<T, HeadDim, BlockN>;
  constexpr std::size_t bytes = FlashBwdConfig<T, HeadDim, BlockN>::kSharedBytes;
  static std::atomic<std::uint64_t> opted_in{0};
  tensor_core::opt_in_shared_memory(kernel, bytes, opted_in);
  const dim3 grid(static_cast<unsigned>((p.k_len + BlockN - 1) / BlockN),
                  static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  loom::detail::launch_on_stream(stream, kernel, grid, kThreads, bytes, p);
  LOOM_KERNEL_CHECK_LAUNCH("flash attention backward launch");
}

/// The key blocks' launch on another kernel (the wgmma one), or null.
using KeyBlocksLaunch = void (*)(const AttentionBackwardArgs&, StreamView);

template <class T, int HeadDim>
void launch_bwd_head_dim(const AttentionBackwardArgs& p, StreamView stream,
                         KeyBlocksLaunch key_blocks) {
  // No queries: dk and dv are zeros (the key blocks walk no query). No keys:
  // dq is zeros (delta's launch clears dq_accum).
  const bool rows = p.q_len > 0;
  if (rows) {
    loom::detail::launch_on_stream(stream, flash_bwd_delta_kernel<T, HeadDim>, row_blocks(p),
                                   kRowThreads, 0, p);
    LOOM_KERNEL_CHECK_LAUNCH("flash attention backward: delta launch");
  }
  if (p.k_len > 0) {
    if (key_blocks != nullptr) {
      key_blocks(p, stream);
    } else {
      launch_key_blocks<T, HeadDim, kBwdBlockN<HeadDim>>(p, stream);
    }
  }
  if (rows) {
    loom::detail::launch_on_stream(stream, flash_bwd_dq_kernel<T, HeadDim>, row_blocks(p),
                                   kRowThreads, 0, p);
    LOOM_KERNEL_CHECK_LAUNCH("flash attention backward: dq launch");
  }
}

/// `key_blocks`: the key blocks' launch where another kernel takes them
/// (head dim 128 only), else null for FA2's.
template <class T>
void launch_flash_bwd(const AttentionBackwardArgs& p, StreamView stream,
                      KeyBlocksLaunch key_blocks) {
  if (p.head_dim == 64) {
    launch_bwd_head_dim<T, 64>(p, stream, nullptr);
  } else {
    launch_bwd_head_dim<T, 128>(p, stream, key_blocks);
  }
}

}  // namespace
}  // namespace loom::kernels::attention_detail
