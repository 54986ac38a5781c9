#pragma once
// flash_fwd: the attention forward kernel (the design: attention.hpp).
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
using flash::as_a_operand;
using flash::copy_rows;
using flash::fast_exp2;
using flash::kLog2e;
using flash::quad_max;
using flash::quad_sum;
using flash::rows_by_cols;

constexpr int kBlockM = 128;  // query rows a block
constexpr int kBlockN = 64;   // keys a step
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

template <class T, int HeadDim>
struct FlashConfig {
  static_assert(HeadDim % 64 == 0, "rows of 64-element swizzle atoms");
  using SmemQ = flash::SmemTile<kBlockM, HeadDim>;
  using SmemKV = flash::SmemTile<kBlockN, HeadDim>;
  // V^T (HeadDim, kBlockN) over V's shared tile, for P V's B operand.
  using SmemVt = flash::SmemTileTransposed<kBlockN, HeadDim>;
  // Four warps stacked along M; Tile<64, 16, 16>: a warp's two n8 atoms side
  // by side, so one ldmatrix.x4 feeds both.
  using TiledMma = TiledMMA<MMA_Atom<typename tensor_core::MmaAtomFor<T>::type>,
                            Layout<Shape<Int<kWarps>, _1, _1>>, Tile<Int<16 * kWarps>, _16, _16>>;
  using GmemCopy = flash::GmemRowsCopy<T, HeadDim, kThreads>;
  static constexpr std::size_t kSharedBytes = (cosize(SmemQ{}) + 2 * cosize(SmemKV{})) * sizeof(T);
};

template <class T, int HeadDim>
__global__ void __launch_bounds__(kThreads) flash_fwd_kernel(AttentionArgs p) {
  using Cfg = FlashConfig<T, HeadDim>;
  const int m_block = static_cast<int>(blockIdx.x);
  const auto head = static_cast<std::int64_t>(blockIdx.y);
  const auto batch = static_cast<std::int64_t>(blockIdx.z);
  const int q_len = static_cast<int>(p.q_len);
  const int k_len = static_cast<int>(p.k_len);
  const int row0 = m_block * kBlockM;

  // The keys this block's rows may see: all, or up to the causal diagonal.
  int n_blocks = (k_len + kBlockN - 1) / kBlockN;
  if (p.causal) {
    // The block's last row that exists sees the most keys (inclusive).
    const int last_row = (row0 + kBlockM < q_len ? row0 + kBlockM : q_len) - 1;
    const std::int64_t last_key = last_row + p.causal_offset;
    const std::int64_t limit = last_key < 0 ? 0 : (last_key + kBlockN) / kBlockN;
    n_blocks = static_cast<int>(limit < n_blocks ? limit : n_blocks);
  }

  const auto at = [&](const AttentionTensor& t) {
    return static_cast<const T*>(t.data) + batch * t.batch_stride + head * t.head_stride;
  };
  const Tensor mQ = make_tensor(make_gmem_ptr(at(p.q)), make_shape(q_len, Int<HeadDim>{}),
                                make_stride(p.q.row_stride, _1{}));
  const Tensor mK = make_tensor(make_gmem_ptr(at(p.k)), make_shape(k_len, Int<HeadDim>{}),
                                make_stride(p.k.row_stride, _1{}));
  const Tensor mV = make_tensor(make_gmem_ptr(at(p.v)), make_shape(k_len, Int<HeadDim>{}),
                                make_stride(p.v.row_stride, _1{}));
  const Tensor gQ = local_tile(mQ, Shape<Int<kBlockM>, Int<HeadDim>>{}, make_coord(m_block, 0));
  const Tensor gK = local_tile(mK, Shape<Int<kBlockN>, Int<HeadDim>>{}, make_coord(_, 0));
  const Tensor gV = local_tile(mV, Shape<Int<kBlockN>, Int<HeadDim>>{}, make_coord(_, 0));

  extern __shared__ __align__(128) unsigned char shared[];
  T* q_smem = reinterpret_cast<T*>(shared);
  T* k_smem = q_smem + cosize(typename Cfg::SmemQ{});
  T* v_smem = k_smem + cosize(typename Cfg::SmemKV{});
  Tensor sQ = make_tensor(make_smem_ptr(q_smem), typename Cfg::SmemQ{});
  Tensor sK = make_tensor(make_smem_ptr(k_smem), typename Cfg::SmemKV{});
  Tensor sV = make_tensor(make_smem_ptr(v_smem), typename Cfg::SmemKV{});
  Tensor sVt = make_tensor(make_smem_ptr(v_smem), typename Cfg::SmemVt{});

  typename Cfg::GmemCopy gmem_copy;
  auto thr_copy = gmem_copy.get_slice(threadIdx.x);
  const Tensor tQgQ = thr_copy.partition_S(gQ);
  Tensor tQsQ = thr_copy.partition_D(sQ);
  const Tensor tKgK = thr_copy.partition_S(gK);  // (CPY, CPY_N, CPY_D, n)
  Tensor tKsK = thr_copy.partition_D(sK);
  const Tensor tVgV = thr_copy.partition_S(gV);
  Tensor tVsV = thr_copy.partition_D(sV);
  const Tensor tQcQ =
      thr_copy.partition_S(make_identity_tensor(Shape<Int<kBlockM>, Int<HeadDim>>{}));
  const Tensor tKcK =
      thr_copy.partition_S(make_identity_tensor(Shape<Int<kBlockN>, Int<HeadDim>>{}));

  typename Cfg::TiledMma mma;
  auto thr_mma = mma.get_slice(threadIdx.x);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);  // (MMA, MMA_M, MMA_K)
  Tensor tSrK = thr_mma.partition_fragment_B(sK);  // (MMA, MMA_N, MMA_K)
  Tensor tOrVt = thr_mma.partition_fragment_B(sVt);
  Tensor acc_o = partition_fragment_C(mma, Shape<Int<kBlockM>, Int<HeadDim>>{});
  clear(acc_o);

  auto s2r_q = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, T>{}, mma);
  auto s2r_thr_q = s2r_q.get_slice(threadIdx.x);
  const Tensor tSsQ = s2r_thr_q.partition_S(sQ);
  Tensor tSrQ_view = s2r_thr_q.retile_D(tSrQ);
  auto s2r_k = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, T>{}, mma);
  auto s2r_thr_k = s2r_k.get_slice(threadIdx.x);
  const Tensor tSsK = s2r_thr_k.partition_S(sK);
  Tensor tSrK_view = s2r_thr_k.retile_D(tSrK);
  auto s2r_v = make_tiled_copy_B(Copy_Atom<SM75_U16x8_LDSM_T, T>{}, mma);
  auto s2r_thr_v = s2r_v.get_slice(threadIdx.x);
  const Tensor tOsVt = s2r_thr_v.partition_S(sVt);
  Tensor tOrVt_view = s2r_thr_v.retile_D(tOrVt);

  // Where each score of this thread sits in the block: (row, key) by (rows, cols).
  const Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});
  const Tensor tScS_mma = thr_mma.partition_C(cS);
  const Tensor tScS = make_tensor(tScS_mma.data(), rows_by_cols(tScS_mma.layout()));
  constexpr int kRows = size<0>(decltype(tScS){});
  constexpr int kCols = size<1>(decltype(tScS){});

  float row_max[kRows];
  float row_sum[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0F;
  }
  const float scale_log2 = p.scale * kLog2e;

  // Q and the first K tile in flight together; a block with no key to see
  // loads nothing (no copy left in flight at its exit) and stores zeros.
  if (n_blocks > 0) {
    copy_rows(gmem_copy, tQgQ, tQsQ, tQcQ, q_len - row0);
    copy_rows(gmem_copy, tKgK(_, _, _, 0), tKsK, tKcK, k_len);
    cp_async_fence();
  }

  for (int n = 0; n < n_blocks; ++n) {
    const int key0 = n * kBlockN;
    cp_async_wait<0>();
    __syncthreads();  // K(n) (and Q) landed; every warp is done with V(n-1)
    copy_rows(gmem_copy, tVgV(_, _, _, n), tVsV, tKcK, k_len - key0);
    cp_async_fence();

    Tensor acc_s = partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kBlockN>>{});
    clear(acc_s);
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
      copy(s2r_q, tSsQ(_, _, kb), tSrQ_view(_, _, kb));
      copy(s2r_k, tSsK(_, _, kb), tSrK_view(_, _, kb));
      gemm(mma, tSrQ(_, _, kb), tSrK(_, _, kb), acc_s);
    }

    Tensor s = make_tensor(acc_s.data(), rows_by_cols(acc_s.layout()));
    // Masks: keys past the end, and past the causal diagonal.
    const bool tail = key0 + kBlockN > k_len;
    const bool diagonal = p.causal && key0 + kBlockN - 1 > row0 + p.causal_offset;
    if (tail || diagonal) {
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const std::int64_t row = row0 + get<0>(tScS(r, 0));
        CUTE_UNROLL
        for (int c = 0; c < kCols; ++c) {
          const int key = key0 + get<1>(tScS(r, c));
          if (key >= k_len || (p.causal && key > row + p.causal_offset)) s(r, c) = -INFINITY;
        }
      }
    }
    // Online softmax, a row at a time: rescale what came before by how far
    // the running max rose, then add this tile's exponentials.
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float tile_max = -INFINITY;
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) tile_max = fmaxf(tile_max, s(r, c));
      tile_max = quad_max(tile_max);
      const float new_max = fmaxf(row_max[r], tile_max);
      // With every score so far masked the max is -inf: exponents from 0.
      const float base = new_max == -INFINITY ? 0.0F : new_max * scale_log2;
      const float correction =
          row_max[r] == -INFINITY ? 0.0F : fast_exp2(row_max[r] * scale_log2 - base);
      row_max[r] = new_max;
      float sum = 0.0F;
      CUTE_UNROLL
      for (int c = 0; c < kCols; ++c) {
        s(r, c) = fast_exp2(s(r, c) * scale_log2 - base);
        sum += s(r, c);
      }
      row_sum[r] = row_sum[r] * correction + sum;
      Tensor o = make_tensor(acc_o.data(), rows_by_cols(acc_o.layout()));
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction;
    }

    // P in the operands' type, laid out as the A operand of P V.
    Tensor rP = make_fragment_like<T>(acc_s);
    CUTE_UNROLL
    for (int i = 0; i < size(acc_s); ++i) rP(i) = static_cast<T>(acc_s(i));
    const Tensor tOrP = make_tensor(rP.data(), as_a_operand(rP.layout()));

    cp_async_wait<0>();
    __syncthreads();  // V(n) landed; every warp is done with K(n)
    if (n + 1 < n_blocks) {
      copy_rows(gmem_copy, tKgK(_, _, _, n + 1), tKsK, tKcK, k_len - key0 - kBlockN);
      cp_async_fence();
    }
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tOrP); ++kb) {
      copy(s2r_v, tOsVt(_, _, kb), tOrVt_view(_, _, kb));
      gemm(mma, tOrP(_, _, kb), tOrVt(_, _, kb), acc_o);
    }
  }

  // Normalize, then store O (pairs of neighbouring columns as one 32-bit
  // store) and each row's log-sum-exp (by the quad's first lane).
  const Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<HeadDim>>{});
  const Tensor tOcO_mma = thr_mma.partition_C(cO);
  const Tensor tOcO = make_tensor(tOcO_mma.data(), rows_by_cols(tOcO_mma.layout()));
  Tensor o = make_tensor(acc_o.data(), rows_by_cols(acc_o.layout()));
  T* out = const_cast<T*>(at(p.out));
  float* lse = p.lse.data == nullptr ? nullptr
                                     : const_cast<float*>(static_cast<const float*>(p.lse.data)) +
                                           batch * p.lse.batch_stride + head * p.lse.head_stride;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const float sum = quad_sum(row_sum[r]);
    const int row = row0 + get<0>(tOcO(r, 0));
    const float inverse = sum > 0.0F ? 1.0F / sum : 0.0F;
    if (row < q_len) {
      T* out_row = out + static_cast<std::int64_t>(row) * p.out.row_stride;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); c += 2) {
        const int col = get<1>(tOcO(r, c));
        alignas(4) const T pair[2] = {static_cast<T>(o(r, c) * inverse),
                                      static_cast<T>(o(r, c + 1) * inverse)};
        *reinterpret_cast<std::uint32_t*>(out_row + col) =
            *reinterpret_cast<const std::uint32_t*>(pair);
      }
      if (lse != nullptr && (threadIdx.x & 3) == 0) {
        lse[static_cast<std::int64_t>(row) * p.lse.row_stride] =
            sum > 0.0F ? row_max[r] * p.scale + logf(sum) : -INFINITY;
      }
    }
  }
}

template <class T, int HeadDim>
void launch_head_dim(const AttentionArgs& p, StreamView stream) {
  constexpr auto kernel = flash_fwd_kernel<T, HeadDim>;
  constexpr std::size_t bytes = FlashConfig<T, HeadDim>::kSharedBytes;
  static std::atomic<std::uint64_t> opted_in{0};
  tensor_core::opt_in_shared_memory(kernel, bytes, opted_in);
  const dim3 grid(static_cast<unsigned>((p.q_len + kBlockM - 1) / kBlockM),
                  static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  loom::detail::launch_on_stream(stream, kernel, grid, kThreads, bytes, p);
  LOOM_KERNEL_CHECK_LAUNCH("flash attention forward launch");
}

template <class T>
void launch_flash_fwd(const AttentionArgs& p, StreamView stream) {
  if (p.head_dim == 64) {
    launch_head_dim<T, 64>(p, stream);
  } else {
    launch_head_dim<T, 128>(p, stream);
  }
}

}  // namespace
}  // namespace loom::kernels::attention_detail
