#pragma once
// flash_bwd_wgmma: the attention backward's key-block launch on Hopper's
// warpgroup MMA, fed by TMA, at head dim 128 (the op: attention.hpp; the
// delta and dq launches around it are flash_bwd.cuh's). Compiled for
// sm_90a only (library.cmake); runs on compute capability 9.0.
//
// Design (FlashAttention-3's backward, simplified):
//
//  - A block owns 128 keys of one (batch, head) and walks the query blocks
//    of 64 rows that see them, each from its own starting block (as
//    flash_bwd's: the key blocks running side by side add into different dq
//    rows). 384 threads: a producer warpgroup (one thread issues the TMA
//    loads: K and V once, then Q and dO of each query block through two
//    stages) and two consumer warpgroups of 64 keys each.
//  - The products are taken transposed, keys along M, so that what one
//    product leaves in registers is the next one's A operand:
//      S^T  = K Q^T      and  dP^T = V dO^T     (64 x 64 a warpgroup, from shared memory)
//      P^T  = 2^(scale S^T - lse), dS^T = P^T (dP^T - delta)   (registers; lse and delta by column)
//      dV  += P^T dO     and  dK  += dS^T Q     (64 x 128, A from registers)
//      dQ   = dS K                              (64 queries x 64 columns a warpgroup)
//    dS^T leaves through shared memory for dQ (its A operand, queries
//    contiguous), which each warpgroup computes for half the head dim and
//    adds into the f32 dq_accum with 8-byte atomics. Q and dO serve as B
//    both K-major (S^T, dP^T) and MN-major (dV, dK): the same swizzled
//    memory seen through a transposed layout, as K is for dQ.
//  - P^T's A fragment for k step kb is S^T's column groups 2 kb and
//    2 kb + 1, element for element (flash_fwd_wgmma.cuh says why).
//  - Each query block's lse and delta (64 floats each) are read into shared
//    memory by the first consumer threads one step ahead; a named barrier
//    of the 256 consumer threads, twice a step, orders them and dS^T.
//  - Masks: keys past Sk and past the causal diagonal get P = 0; query rows
//    past Sq (loaded as zeros by TMA) and rows that keep no key get lse =
//    +inf, so P = 0 and no gradient.
//  - dK (times the scale) and dV leave from registers at the end, two
//    neighbouring columns a 32-bit store; a block no query sees writes
//    zeros.
//
// As for the forward, the TMA descriptors make the launch one a compiled
// graph captures rather than re-points.
#include "attention/flash_fwd_wgmma.cuh"

namespace loom::kernels::attention_detail {
namespace {

constexpr int kWgBwdBlockM = 64;   // query rows a step
constexpr int kWgBwdBlockN = 128;  // keys a block: 64 a consumer warpgroup
constexpr int kWgBwdStages = 2;    // Q and dO of the query blocks in flight

/// The kernel's parameters: the four TMA descriptors and the problem.
template <class TmaQ, class TmaK>
struct FlashBwdWgmmaParams {
  TmaQ tma_q;
  TmaQ tma_do;
  TmaK tma_k;
  TmaK tma_v;
  AttentionBackwardArgs args;
};

template <class T_, int HeadDim>
struct FlashBwdWgmmaConfig {
  using T = T_;
  static_assert(HeadDim == 128, "two warpgroups take dQ's columns 64 at a time");
  using BlockM = cute::Int<kWgBwdBlockM>;
  using BlockN = cute::Int<kWgBwdBlockN>;
  using Dim = cute::Int<HeadDim>;
  using Stages = cute::Int<kWgBwdStages>;
  using Half = cute::Int<HeadDim / 2>;

  // K and V (keys, D), Q and dO (queries, D, stages): K-major, 128-byte swizzle.
  using SmemK = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<T>{},
                                             cute::Shape<BlockN, Dim>{}));
  using SmemQ = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<T>{},
                                             cute::Shape<BlockM, Dim, Stages>{}));
  // The same memory as (D, keys) and (D, queries, stages): MN-major operands.
  using SmemKt = decltype(cute::composition(
      SmemK{},
      cute::make_ordered_layout(cute::Shape<Dim, BlockN>{}, cute::Step<cute::_2, cute::_1>{})));
  using SmemQt = decltype(cute::composition(
      SmemQ{}, cute::make_ordered_layout(cute::Shape<Dim, BlockM, Stages>{},
                                         cute::Step<cute::_2, cute::_1, cute::_3>{})));
  // dS (queries, keys) with the queries contiguous: dQ's A operand.
  using SmemdS = decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<T>{},
                                              cute::Shape<BlockM, BlockN>{}));

  using MmaSdP =
      decltype(cute::SM90::GMMA::ss_op_selector<T, T, float, cute::Shape<cute::_64, BlockM, Dim>,
                                                cute::GMMA::Major::K, cute::GMMA::Major::K>());
  using MmadKV =
      decltype(cute::SM90::GMMA::rs_op_selector<T, T, float, cute::Shape<cute::_64, Dim, BlockM>,
                                                cute::GMMA::Major::K, cute::GMMA::Major::MN>());
  using MmadQ =
      decltype(cute::SM90::GMMA::ss_op_selector<T, T, float, cute::Shape<cute::_64, Half, BlockN>,
                                                cute::GMMA::Major::MN, cute::GMMA::Major::MN>());
  // S^T, dP^T, dK and dV: the two warpgroups along M (keys); dQ: along N.
  using TiledMmaSdP = decltype(cute::make_tiled_mma(
      MmaSdP{}, cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{}));
  using TiledMmadKV = decltype(cute::make_tiled_mma(
      MmadKV{}, cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{}));
  using TiledMmadQ = decltype(cute::make_tiled_mma(
      MmadQ{}, cute::Layout<cute::Shape<cute::_1, cute::_2, cute::_1>>{}));

  using SmemQTile = decltype(SmemQ{}(cute::_, cute::_, cute::Int<0>{}));
  using TmaQ = decltype(FlashWgmmaConfig<T, HeadDim>::template make_tma<false, SmemQTile>(
      nullptr, 0, 0, 0, AttentionTensor{}));
  using TmaK = decltype(FlashWgmmaConfig<T, HeadDim>::template make_tma<false, SmemK>(
      nullptr, 0, 0, 0, AttentionTensor{}));
  using Params = FlashBwdWgmmaParams<TmaQ, TmaK>;

  struct Storage {
    alignas(1024) cute::array<T, cute::cosize_v<SmemK>> k;
    alignas(1024) cute::array<T, cute::cosize_v<SmemK>> v;
    alignas(1024) cute::array<T, cute::cosize_v<SmemQ>> q;
    alignas(1024) cute::array<T, cute::cosize_v<SmemQ>> d_o;
    alignas(1024) cute::array<T, cute::cosize_v<SmemdS>> ds;
    alignas(16) float lse[kWgBwdBlockM];  ///< log2 units; +inf: no gradient from the row
    alignas(16) float delta[kWgBwdBlockM];
    alignas(8) std::uint64_t kv_full;
    alignas(8) std::uint64_t q_full[kWgBwdStages];
    alignas(8) std::uint64_t q_empty[kWgBwdStages];
  };
  static constexpr std::uint32_t kKVBytes =
      static_cast<std::uint32_t>(2 * kWgBwdBlockN * HeadDim * sizeof(T));
  static constexpr std::uint32_t kQBytes =
      static_cast<std::uint32_t>(2 * kWgBwdBlockM * HeadDim * sizeof(T));
  static constexpr std::size_t kSharedBytes = sizeof(Storage) + 1024;
  static_assert(kSharedBytes <= 227 * 1024, "more shared memory than a Hopper block gets");
};

template <class Cfg>
__global__ void __launch_bounds__(kWgThreads, 1)
    flash_bwd_wgmma_kernel(const __grid_constant__ typename Cfg::Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  using T = typename Cfg::T;
  using Storage = typename Cfg::Storage;
  using BlockM = typename Cfg::BlockM;
  using BlockN = typename Cfg::BlockN;
  using Dim = typename Cfg::Dim;
  constexpr int kD = Dim::value;

  extern __shared__ __align__(1024) unsigned char shared_raw[];
  const std::uint32_t raw_address = cast_smem_ptr_to_uint(shared_raw);
  Storage& smem =
      *reinterpret_cast<Storage*>(shared_raw + ((1024U - (raw_address & 1023U)) & 1023U));

  const AttentionBackwardArgs& args = p.args;
  const int n_block = static_cast<int>(blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int q_len = static_cast<int>(args.q_len);
  const int k_len = static_cast<int>(args.k_len);
  const int key0 = n_block * kWgBwdBlockN;
  const int m_blocks = (q_len + kWgBwdBlockM - 1) / kWgBwdBlockM;
  // Causal: the query blocks before the first that keeps key0 see none of
  // this block's keys.
  int m_begin = 0;
  if (args.causal) {
    const std::int64_t first = key0 - args.causal_offset;
    m_begin = first <= 0 ? 0 : (first >= q_len ? m_blocks : static_cast<int>(first / kWgBwdBlockM));
  }
  const int steps = m_blocks - m_begin;
  const int first_step = steps > 0 ? n_block % steps : 0;
  const auto query_block = [&](int step) {
    const int s = step + first_step;
    return m_begin + (s < steps ? s : s - steps);
  };

  const int warp = cutlass::canonical_warp_idx_sync();
  const int warp_group = cutlass::canonical_warp_group_idx();
  const bool elected = elect_one_sync() != 0;
  if (warp == 0 && elected) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_do.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
    FullBarrier::init(&smem.kv_full, 1);
    CUTE_UNROLL
    for (int s = 0; s < kWgBwdStages; ++s) {
      FullBarrier::init(&smem.q_full[s], 1);
      EmptyBarrier::init(&smem.q_empty[s], kWgConsumerThreads);
    }
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Cfg::SmemK{});     // (BN, D)
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Cfg::SmemK{});     // (BN, D)
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Cfg::SmemQ{});     // (BM, D, P)
  Tensor sdO = make_tensor(make_smem_ptr(smem.d_o.data()), typename Cfg::SmemQ{});  // (BM, D, P)
  Tensor sKt = make_tensor(make_smem_ptr(smem.k.data()), typename Cfg::SmemKt{});   // (D, BN)
  Tensor sQt = make_tensor(make_smem_ptr(smem.q.data()), typename Cfg::SmemQt{});   // (D, BM, P)
  Tensor sdOt = make_tensor(make_smem_ptr(smem.d_o.data()), typename Cfg::SmemQt{});
  Tensor sdS = make_tensor(make_smem_ptr(smem.ds.data()), typename Cfg::SmemdS{});  // (BM, BN)

  if (warp_group == 0) {
    // Producer. A block no query sees loads nothing.
    cutlass::arch::warpgroup_reg_dealloc<kWgProducerRegisters>();
    if (warp != 0 || !elected || steps == 0) return;
    const int heads = static_cast<int>(args.heads);
    const int batches = static_cast<int>(args.batch);
    const Tensor mQ = p.tma_q.get_tma_tensor(make_shape(q_len, Dim{}, heads, batches));
    const Tensor mdO = p.tma_do.get_tma_tensor(make_shape(q_len, Dim{}, heads, batches));
    const Tensor mK = p.tma_k.get_tma_tensor(make_shape(k_len, Dim{}, heads, batches));
    const Tensor mV = p.tma_v.get_tma_tensor(make_shape(k_len, Dim{}, heads, batches));
    const auto q_tile = Shape<BlockM, Dim>{};
    const auto k_tile = Shape<BlockN, Dim>{};
    const Tensor gQ = local_tile(mQ(_, _, head, batch), q_tile, make_coord(_, 0));  // (BM, D, m)
    const Tensor gdO = local_tile(mdO(_, _, head, batch), q_tile, make_coord(_, 0));
    const Tensor gK = local_tile(mK(_, _, head, batch), k_tile, make_coord(n_block, 0));
    const Tensor gV = local_tile(mV(_, _, head, batch), k_tile, make_coord(n_block, 0));
    auto tma_q = p.tma_q.get_slice(Int<0>{});
    auto tma_do = p.tma_do.get_slice(Int<0>{});
    auto tma_k = p.tma_k.get_slice(Int<0>{});
    auto tma_v = p.tma_v.get_slice(Int<0>{});
    const Tensor tQgQ = tma_q.partition_S(gQ);  // (TMA, TMA_M, TMA_D, m)
    Tensor tQsQ = tma_q.partition_D(sQ);        // (TMA, TMA_M, TMA_D, P)
    const Tensor tdOgdO = tma_do.partition_S(gdO);
    Tensor tdOsdO = tma_do.partition_D(sdO);

    FullBarrier::arrive_and_expect_tx(&smem.kv_full, Cfg::kKVBytes);
    copy(p.tma_k.with(smem.kv_full), tma_k.partition_S(gK), tma_k.partition_D(sK));
    copy(p.tma_v.with(smem.kv_full), tma_v.partition_S(gV), tma_v.partition_D(sV));
    for (int step = 0; step < steps; ++step) {
      const int s = step & 1;
      const int m = query_block(step);
      EmptyBarrier::wait(&smem.q_empty[s], static_cast<std::uint32_t>(((step >> 1) & 1) ^ 1));
      FullBarrier::arrive_and_expect_tx(&smem.q_full[s], Cfg::kQBytes);
      copy(p.tma_q.with(smem.q_full[s]), tQgQ(_, _, _, m), tQsQ(_, _, _, s));
      copy(p.tma_do.with(smem.q_full[s]), tdOgdO(_, _, _, m), tdOsdO(_, _, _, s));
    }
    return;
  }

  // Consumers: warpgroups 1 and 2, threads 0..255 of the tiled MMAs.
  cutlass::arch::warpgroup_reg_alloc<kWgConsumerRegisters>();
  const int mma_thread = static_cast<int>(threadIdx.x) - 128;
  typename Cfg::TiledMmaSdP mma_sdp;
  typename Cfg::TiledMmadKV mma_dkv;
  typename Cfg::TiledMmadQ mma_dq;
  auto thr_sdp = mma_sdp.get_slice(mma_thread);
  auto thr_dkv = mma_dkv.get_slice(mma_thread);
  auto thr_dq = mma_dq.get_slice(mma_thread);
  const Tensor tSrK = thr_sdp.make_fragment_A(thr_sdp.partition_A(sK));       // (MMA, 1, D/16)
  const Tensor tSrV = thr_sdp.make_fragment_A(thr_sdp.partition_A(sV));       // (MMA, 1, D/16)
  const Tensor tSrQ = thr_sdp.make_fragment_B(thr_sdp.partition_B(sQ));       // (MMA, 1, D/16, P)
  const Tensor tSrdO = thr_sdp.make_fragment_B(thr_sdp.partition_B(sdO));     // (MMA, 1, D/16, P)
  const Tensor tKVrQt = thr_dkv.make_fragment_B(thr_dkv.partition_B(sQt));    // (MMA, 1, BM/16, P)
  const Tensor tKVrdOt = thr_dkv.make_fragment_B(thr_dkv.partition_B(sdOt));  // (MMA, 1, BM/16, P)
  const Tensor tQrdS = thr_dq.make_fragment_A(thr_dq.partition_A(sdS));       // (MMA, 1, BN/16)
  const Tensor tQrKt = thr_dq.make_fragment_B(thr_dq.partition_B(sKt));       // (MMA, 1, BN/16)
  Tensor acc_dk = partition_fragment_C(mma_dkv, Shape<BlockN, Dim>{});        // ((2, 2, D/8), 1, 1)
  Tensor acc_dv = partition_fragment_C(mma_dkv, Shape<BlockN, Dim>{});
  clear(acc_dk);
  clear(acc_dv);
  // (key, query) of S^T's elements, (key, col) of dK's and dV's, (query, col) of dQ's.
  const Tensor tScS = thr_sdp.partition_C(make_identity_tensor(Shape<BlockN, BlockM>{}));
  const Tensor tKVc = thr_dkv.partition_C(make_identity_tensor(Shape<BlockN, Dim>{}));
  const Tensor tQc = thr_dq.partition_C(make_identity_tensor(Shape<BlockM, Dim>{}));
  constexpr int kGroupsS = kWgBwdBlockM / 8;
  static_assert(
      decltype(size(partition_fragment_C(mma_sdp, Shape<BlockN, BlockM>{})))::value == 4 * kGroupsS,
      "wgmma's C: (2, 2, N / 8) a thread");

  const float scale_log2 = args.scale * flash::kLog2e;
  const float* lse_base = static_cast<const float*>(args.lse.data) + batch * args.lse.batch_stride +
                          head * args.lse.head_stride;
  const std::int64_t bh_row0 = (static_cast<std::int64_t>(batch) * args.heads + head) * q_len;
  // The first 64 consumer threads read a query block's lse (in log2 units;
  // +inf for rows past Sq and rows that keep no key) and delta.
  const auto stage_row_stats = [&](int m) {
    if (mma_thread < kWgBwdBlockM) {
      const int row = m * kWgBwdBlockM + mma_thread;
      const float l = row < q_len ? lse_base[row * args.lse.row_stride] : -INFINITY;
      smem.lse[mma_thread] = l == -INFINITY ? INFINITY : l * flash::kLog2e;
      smem.delta[mma_thread] = row < q_len ? args.delta[bh_row0 + row] : 0.0F;
    }
  };
  constexpr std::uint32_t kConsumers = kWgConsumerThreads;
  if (steps > 0) {
    stage_row_stats(query_block(0));
    cutlass::arch::NamedBarrier::sync(kConsumers, 0);
    FullBarrier::wait(&smem.kv_full, 0);
  }

  for (int step = 0; step < steps; ++step) {
    const int s = step & 1;
    const int m = query_block(step);
    const int q0 = m * kWgBwdBlockM;

    // S^T = K Q^T and dP^T = V dO^T, one batch.
    Tensor acc_s = partition_fragment_C(mma_sdp, Shape<BlockN, BlockM>{});  // ((2, 2, 8), 1, 1)
    Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<BlockN, BlockM>{});
    FullBarrier::wait(&smem.q_full[s], static_cast<std::uint32_t>((step >> 1) & 1));
    warpgroup_fence_operand(acc_s);
    warpgroup_fence_operand(acc_dp);
    warpgroup_arrive();
    mma_sdp.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrK); ++kb) {
      gemm(mma_sdp, tSrK(_, _, kb), tSrQ(_, _, kb, s), acc_s);
      gemm(mma_sdp, tSrV(_, _, kb), tSrdO(_, _, kb, s), acc_dp);
      mma_sdp.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();

    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_s);
    warpgroup_fence_operand(acc_dp);

    // P^T and dS^T in registers; masked keys get P = 0.
    const bool tail = key0 + kWgBwdBlockN > k_len;
    const bool diagonal = args.causal && key0 + kWgBwdBlockN - 1 > q0 + args.causal_offset;
    Tensor tdVrP = make_tensor<T>(partition_shape_A(mma_dkv, Shape<BlockN, BlockM>{}));
    Tensor tdKrdS = make_tensor<T>(partition_shape_A(mma_dkv, Shape<BlockN, BlockM>{}));
    static_assert(decltype(size(tdVrP))::value == 4 * kGroupsS, "P's A fragment: S's elements");
    // A thread's columns come in neighbouring pairs: each pair's lse and
    // delta are one 8-byte shared load, read where used (16 columns' worth
    // held at once would not fit beside the accumulators).
    CUTE_UNROLL
    for (int g = 0; g < kGroupsS; ++g) {
      const int col = get<1>(tScS(make_coord(make_coord(0, 0, g), 0, 0)));
      const float2 lse2 = *reinterpret_cast<const float2*>(&smem.lse[col]);
      const float2 delta2 = *reinterpret_cast<const float2*>(&smem.delta[col]);
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        CUTE_UNROLL
        for (int c = 0; c < 2; ++c) {
          const auto at = make_coord(make_coord(c, r, g), 0, 0);
          bool masked = false;
          if (tail || diagonal) {
            const int key = key0 + get<0>(tScS(at));
            const std::int64_t query = q0 + get<1>(tScS(at));
            masked = key >= k_len || (args.causal && key > query + args.causal_offset);
          }
          const float lse = c == 0 ? lse2.x : lse2.y;
          const float delta = c == 0 ? delta2.x : delta2.y;
          const float prob = masked ? 0.0F : flash::fast_exp2(acc_s(at) * scale_log2 - lse);
          const auto a_at = make_coord(make_coord(c, r, g % 2), 0, g / 2);
          tdVrP(a_at) = static_cast<T>(prob);
          tdKrdS(a_at) = static_cast<T>(prob * (acc_dp(at) - delta));
        }
      }
    }

    // dV += P^T dO, issued first: it runs under dS's stores.
    warpgroup_fence_operand(tdVrP);
    warpgroup_fence_operand(acc_dv);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tdVrP); ++kb) {
      gemm(mma_dkv, tdVrP(_, _, kb), tKVrdOt(_, _, kb, s), acc_dv);
    }
    warpgroup_commit_batch();

    // dS^T into shared memory as dS (queries contiguous), two neighbouring
    // queries a 32-bit store, for dQ's A operand: before dK's wgmma is
    // issued, since no register of an A operand in flight may be touched.
    CUTE_UNROLL
    for (int g = 0; g < kGroupsS; ++g) {
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        const auto at0 = make_coord(make_coord(0, r, g), 0, 0);
        const auto a_at0 = make_coord(make_coord(0, r, g % 2), 0, g / 2);
        const auto a_at1 = make_coord(make_coord(1, r, g % 2), 0, g / 2);
        alignas(4) const T pair[2] = {tdKrdS(a_at0), tdKrdS(a_at1)};
        *reinterpret_cast<std::uint32_t*>(&sdS(get<1>(tScS(at0)), get<0>(tScS(at0)))) =
            *reinterpret_cast<const std::uint32_t*>(pair);
      }
    }
    // dK += dS^T Q.
    warpgroup_fence_operand(tdKrdS);
    warpgroup_fence_operand(acc_dk);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tdKrdS); ++kb) {
      gemm(mma_dkv, tdKrdS(_, _, kb), tKVrQt(_, _, kb, s), acc_dk);
    }
    warpgroup_commit_batch();

    // The stores above are read by wgmma (the async proxy); every consumer
    // thread's must land before either warpgroup's dQ.
    cutlass::arch::fence_view_async_shared();
    cutlass::arch::NamedBarrier::sync(kConsumers, 0);
    // The next query block's lse and delta: every thread has read this one's.
    if (step + 1 < steps) stage_row_stats(query_block(step + 1));

    // dV and dK have retired (P^T's and dS^T's registers are free for dQ's
    // accumulators), then dQ = dS K, this warpgroup's half of the head dim.
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dv);
    warpgroup_fence_operand(acc_dk);
    Tensor acc_dq = partition_fragment_C(mma_dq, Shape<BlockM, Dim>{});  // ((2, 2, 8), 1, 1)
    warpgroup_fence_operand(acc_dq);
    warpgroup_arrive();
    mma_dq.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tQrdS); ++kb) {
      gemm(mma_dq, tQrdS(_, _, kb), tQrKt(_, _, kb), acc_dq);
      mma_dq.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dq);
    EmptyBarrier::arrive(&smem.q_empty[s]);  // this step's Q and dO are read

    CUTE_UNROLL
    for (int i = 0; i < size(acc_dq); i += 2) {
      const int row = q0 + get<0>(tQc(i));
      if (row < q_len) {
        float* to = args.dq_accum + (bh_row0 + row) * kD + get<1>(tQc(i));
        atomicAdd(reinterpret_cast<float2*>(to), make_float2(acc_dq(i), acc_dq(i + 1)));
      }
    }
    // Every consumer is done with dS before the next step writes it, and
    // the next lse and delta are in place.
    cutlass::arch::NamedBarrier::sync(kConsumers, 0);
  }

  // dK (times the scale) and dV, rows inside Sk.
  const auto store = [&](const auto& acc, const AttentionTensor& t, float scale) {
    T* base = const_cast<T*>(static_cast<const T*>(t.data)) + batch * t.batch_stride +
              head * t.head_stride;
    CUTE_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
      const int key = key0 + get<0>(tKVc(i));
      if (key < k_len) {
        alignas(4)
            const T pair[2] = {static_cast<T>(acc(i) * scale), static_cast<T>(acc(i + 1) * scale)};
        *reinterpret_cast<std::uint32_t*>(base + static_cast<std::int64_t>(key) * t.row_stride +
                                          get<1>(tKVc(i))) =
            *reinterpret_cast<const std::uint32_t*>(pair);
      }
    }
  };
  store(acc_dk, args.dk, args.scale);
  store(acc_dv, args.dv, 1.0F);
#elif defined(__CUDA_ARCH__)
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    printf("loom flash attention wgmma backward: kernel image without sm_90a features\n");
  }
  __trap();
#endif
}

/// The key-block launch of the backward (delta's launch before it, dq's
/// after: flash_bwd.cuh).
template <class T>
void launch_bwd_wgmma_key_blocks(const AttentionBackwardArgs& p, StreamView stream) {
  using Cfg = FlashBwdWgmmaConfig<T, 128>;
  using Params = typename Cfg::Params;
  static_assert(
      !loom::detail::declares_its_pointers<Params> && !loom::detail::pointer_free_class<Params>,
      "a TMA descriptor holds pointers that a compiled graph cannot re-point");
  static_assert(sizeof(Params) <= 4096, "kernel parameters are limited to 4 KiB");
  using Fwd = FlashWgmmaConfig<T, 128>;
  const int heads = static_cast<int>(p.heads);
  const int batch = static_cast<int>(p.batch);
  const int q_len = static_cast<int>(p.q_len);
  const int k_len = static_cast<int>(p.k_len);
  Params params;
  params.args = p;
  params.tma_q = Fwd::template make_tma<false, typename Cfg::SmemQTile>(
      static_cast<const T*>(p.q.data), q_len, heads, batch,
      tma_strides(p.q, q_len, heads, batch, 128));
  params.tma_do = Fwd::template make_tma<false, typename Cfg::SmemQTile>(
      static_cast<const T*>(p.dout.data), q_len, heads, batch,
      tma_strides(p.dout, q_len, heads, batch, 128));
  params.tma_k = Fwd::template make_tma<false, typename Cfg::SmemK>(
      static_cast<const T*>(p.k.data), k_len, heads, batch,
      tma_strides(p.k, k_len, heads, batch, 128));
  params.tma_v = Fwd::template make_tma<false, typename Cfg::SmemK>(
      static_cast<const T*>(p.v.data), k_len, heads, batch,
      tma_strides(p.v, k_len, heads, batch, 128));
  constexpr auto kernel = flash_bwd_wgmma_kernel<Cfg>;
  static std::atomic<std::uint64_t> opted_in{0};
  tensor_core::opt_in_shared_memory(kernel, Cfg::kSharedBytes, opted_in);
  const dim3 grid(static_cast<unsigned>((p.k_len + kWgBwdBlockN - 1) / kWgBwdBlockN),
                  static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  loom::detail::launch_on_stream(stream, kernel, grid, dim3(kWgThreads), Cfg::kSharedBytes, params);
  LOOM_KERNEL_CHECK_LAUNCH("flash attention wgmma backward launch");
}

}  // namespace
}  // namespace loom::kernels::attention_detail
