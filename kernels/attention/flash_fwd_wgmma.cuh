#pragma once
// flash_fwd_wgmma: the attention forward on Hopper's warpgroup MMA, fed by
// TMA (the op: attention.hpp). Compiled for sm_90a only (library.cmake);
// runs on compute capability 9.0.
//
// Design (FA3's, without its ping-pong scheduling):
//
//  - A block owns 64 query rows a consumer warpgroup of one (batch, head)
//    and walks the keys 128 at a time. Warpgroup 0 is the producer
//    (setmaxnreg 24; one thread issues the TMA loads). At d = 128 two
//    consumers (128 rows, 384 threads, setmaxnreg 240); at d = 64 three
//    (192 rows, 512 threads, setmaxnreg 160): the products are half as
//    long there, and a third warpgroup's products cover the other two's
//    softmax (two: 411 TFLOP/s at 16k on an H100, three: 530).
//  - Q (BlockM x D) loads once; K and V tiles (128 x D) go through two stages
//    each, 128-byte swizzled as GMMA's canonical layouts want them: Q and K
//    K-major (D contiguous), V read as P V's B operand (D, keys), which is
//    MN-major in memory, so nothing is transposed on the way.
//  - Barriers: q_full, and a full and an empty mbarrier a stage for K and
//    for V. The producer arrives on full with the tile's bytes and TMA
//    completes the transaction; every consumer thread arrives on empty once
//    the wgmma that read the tile have retired. Stage s of block n is
//    n % 2, its phase parity (n / 2) % 2 (the producer waits for the
//    opposite parity on empty: every stage starts free).
//  - Each consumer step: S = Q K^T (wgmma from shared memory, 64 x 128 a
//    warpgroup, f32 in registers) is issued before the previous step's
//    O += P V has retired, so the tensor cores always have the next product;
//    then the masks, the online softmax (as flash_fwd's: base 2, the scale
//    folded in, O rescaled when a row's max grows), and P, converted to the
//    operand type in registers, is the A operand of O += P V (wgmma with A
//    from registers). The consumer warpgroups run side by side, so one's
//    softmax overlaps the others' products.
//  - S's accumulator holds, for a thread, values (c, r, g) at row 8 r and
//    column c + 8 g of its quad's 2 x 8 corner (wgmma's C layout); the A
//    operand of a k step of 16 holds (c, r, h) at row 8 r and column
//    c + 8 h of it. So P's A fragment for k step kb is S's column groups
//    2 kb and 2 kb + 1, element for element.
//  - The output leaves from registers (two neighbouring columns a 32-bit
//    store) and the log-sum-exp from each quad's first lane.
//
// Tails: the TMA descriptors carry the true lengths and fill rows past them
// with zeros; keys past Sk are masked out of the softmax, rows past Sq not
// stored. Causal blocks stop at their last row's diagonal and mask only the
// key blocks that cross it; the grid walks query blocks from the last (the
// longest) to the first.
//
// The TMA descriptors hold the tensors' addresses and reach the kernel as a
// __grid_constant__ parameter: a compiled graph cannot re-point such a
// launch, so its parameter struct declares no loom_pointer_offsets() (the
// graph captures the task and copies bindings, as for hgemm's wgmma).
#include "attention/attention.hpp"
#include "attention/flash_common.cuh"
#include "common/check.hpp"
#include "common/launch.hpp"
#include "common/tensor_core.cuh"

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cute/tensor.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace loom::kernels::attention_detail {
namespace {

using cute::Layout;  // not loom::Layout
using cute::Shape;   // not loom::Shape
using cute::Stride;
using cute::Tensor;  // not loom::Tensor

constexpr int kWgBlockN = 128;  // keys a step
constexpr int kWgStages = 2;    // K and V tiles in flight
// Two consumer warpgroups (the backward's, and the forward's at d = 128).
constexpr int kWgThreads = 384;
constexpr int kWgConsumerThreads = 256;  // the empty barriers' arrival count
constexpr int kWgProducerRegisters = 24;
constexpr int kWgConsumerRegisters = 240;  // 128 x 24 + 256 x 240 <= 64 Ki registers

/// The kernel's parameters: the three TMA descriptors and the problem.
template <class TmaQ, class TmaK, class TmaV>
struct FlashWgmmaParams {
  TmaQ tma_q;
  TmaK tma_k;
  TmaV tma_v;
  AttentionArgs args;
};

/// `Consumers` warpgroups of 64 query rows each: two at d = 128 (240
/// registers a thread), three at d = 64, whose smaller products leave the
/// softmax a larger share of each step (160 registers: 128 x 24 + 384 x 160
/// <= 64 Ki).
template <class T_, int HeadDim, int Consumers = 2>
struct FlashWgmmaConfig {
  using T = T_;
  static_assert(HeadDim % 64 == 0, "rows of 64-element swizzle atoms");
  static_assert(Consumers == 2 || Consumers == 3, "two or three consumer warpgroups");
  static constexpr int kBlockM = 64 * Consumers;  // query rows a block
  static constexpr int kThreads = 128 * (Consumers + 1);
  static constexpr int kConsumerThreads = 128 * Consumers;
  static constexpr int kConsumerRegisters = Consumers == 2 ? 240 : 160;
  static_assert(128 * kWgProducerRegisters + kConsumerThreads * kConsumerRegisters <= 65536,
                "registers of one block an SM");
  using BlockM = cute::Int<kBlockM>;
  using BlockN = cute::Int<kWgBlockN>;
  using Dim = cute::Int<HeadDim>;
  using Stages = cute::Int<kWgStages>;

  using SmemQ = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<T>{},
                                             cute::Shape<BlockM, Dim>{}));
  using SmemK = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<T>{},
                                             cute::Shape<BlockN, Dim, Stages>{}));
  // V as P V's B operand, (D, keys, stages): D contiguous, the MN-major
  // atoms going along the keys first, so that a TMA box spans 64 of D.
  using SmemV = decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<T>{},
                                             cute::Shape<Dim, BlockN, Stages>{},
                                             cute::Step<cute::_2, cute::_1, cute::_3>{}));

  using MmaS =
      decltype(cute::SM90::GMMA::ss_op_selector<T, T, float, cute::Shape<cute::_64, BlockN, Dim>,
                                                cute::GMMA::Major::K, cute::GMMA::Major::K>());
  using MmaO =
      decltype(cute::SM90::GMMA::rs_op_selector<T, T, float, cute::Shape<cute::_64, Dim, BlockN>,
                                                cute::GMMA::Major::K, cute::GMMA::Major::MN>());
  // The consumer warpgroups along M.
  using TiledMmaS = decltype(cute::make_tiled_mma(
      MmaS{}, cute::Layout<cute::Shape<cute::Int<Consumers>, cute::_1, cute::_1>>{}));
  using TiledMmaO = decltype(cute::make_tiled_mma(
      MmaO{}, cute::Layout<cute::Shape<cute::Int<Consumers>, cute::_1, cute::_1>>{}));

  /// Q or K as (rows, D, heads, batch), D contiguous, loaded in tiles of
  /// `SLayout`; V as (D, rows, heads, batch).
  template <bool DFirst, class SLayout>
  static auto make_tma(const T* data, int rows, int heads, int batch, const AttentionTensor& t) {
    using namespace cute;
    const std::int64_t head_stride = t.head_stride;
    const std::int64_t batch_stride = t.batch_stride;
    if constexpr (DFirst) {
      const auto tensor =
          make_tensor(make_gmem_ptr(data),
                      make_layout(make_shape(Dim{}, rows, heads, batch),
                                  make_stride(_1{}, t.row_stride, head_stride, batch_stride)));
      return make_tma_copy(SM90_TMA_LOAD{}, tensor, SLayout{});
    } else {
      const auto tensor =
          make_tensor(make_gmem_ptr(data),
                      make_layout(make_shape(rows, Dim{}, heads, batch),
                                  make_stride(t.row_stride, _1{}, head_stride, batch_stride)));
      return make_tma_copy(SM90_TMA_LOAD{}, tensor, SLayout{});
    }
  }
  using SmemKTile = decltype(SmemK{}(cute::_, cute::_, cute::Int<0>{}));
  using SmemVTile = decltype(SmemV{}(cute::_, cute::_, cute::Int<0>{}));
  using TmaQ = decltype(make_tma<false, SmemQ>(nullptr, 0, 0, 0, AttentionTensor{}));
  using TmaK = decltype(make_tma<false, SmemKTile>(nullptr, 0, 0, 0, AttentionTensor{}));
  using TmaV = decltype(make_tma<true, SmemVTile>(nullptr, 0, 0, 0, AttentionTensor{}));
  using Params = FlashWgmmaParams<TmaQ, TmaK, TmaV>;

  struct Storage {
    alignas(1024) cute::array<T, cute::cosize_v<SmemQ>> q;
    alignas(1024) cute::array<T, cute::cosize_v<SmemK>> k;
    alignas(1024) cute::array<T, cute::cosize_v<SmemV>> v;
    alignas(8) std::uint64_t q_full;
    alignas(8) std::uint64_t k_full[kWgStages];
    alignas(8) std::uint64_t k_empty[kWgStages];
    alignas(8) std::uint64_t v_full[kWgStages];
    alignas(8) std::uint64_t v_empty[kWgStages];
  };
  static constexpr std::uint32_t kQBytes =
      static_cast<std::uint32_t>(kBlockM * HeadDim * sizeof(T));
  static constexpr std::uint32_t kTileBytes =
      static_cast<std::uint32_t>(kWgBlockN * HeadDim * sizeof(T));
  /// Dynamic shared memory: the storage, and room to align its start to 1024.
  static constexpr std::size_t kSharedBytes = sizeof(Storage) + 1024;
  static_assert(kSharedBytes <= 227 * 1024, "more shared memory than a Hopper block gets");
};

/// The key blocks query block m_block sees: all, or up to the causal
/// diagonal of its last row that exists (none where that row sees no key).
template <int BlockM>
__device__ __forceinline__ int key_blocks_seen(const AttentionArgs& p, int row0) {
  const int q_len = static_cast<int>(p.q_len);
  const int k_len = static_cast<int>(p.k_len);
  int n_blocks = (k_len + kWgBlockN - 1) / kWgBlockN;
  if (p.causal) {
    const int last_row = (row0 + BlockM < q_len ? row0 + BlockM : q_len) - 1;
    const std::int64_t last_key = last_row + p.causal_offset;
    const std::int64_t limit = last_key < 0 ? 0 : (last_key + kWgBlockN) / kWgBlockN;
    n_blocks = static_cast<int>(limit < n_blocks ? limit : n_blocks);
  }
  return n_blocks;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_fwd_wgmma_kernel(const __grid_constant__ typename Cfg::Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  using T = typename Cfg::T;
  using Storage = typename Cfg::Storage;
  using BlockM = typename Cfg::BlockM;
  using BlockN = typename Cfg::BlockN;
  using Dim = typename Cfg::Dim;

  extern __shared__ __align__(1024) unsigned char shared_raw[];
  const std::uint32_t raw_address = cast_smem_ptr_to_uint(shared_raw);
  Storage& smem =
      *reinterpret_cast<Storage*>(shared_raw + ((1024U - (raw_address & 1023U)) & 1023U));

  const AttentionArgs& args = p.args;
  // The last query block first: under a causal mask it has the most keys.
  const int m_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const int q_len = static_cast<int>(args.q_len);
  const int k_len = static_cast<int>(args.k_len);
  const int row0 = m_block * Cfg::kBlockM;
  const int n_blocks = key_blocks_seen<Cfg::kBlockM>(args, row0);

  const int warp = cutlass::canonical_warp_idx_sync();
  const int warp_group = cutlass::canonical_warp_group_idx();
  const bool elected = elect_one_sync() != 0;
  if (warp == 0 && elected) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
    FullBarrier::init(&smem.q_full, 1);
    CUTE_UNROLL
    for (int s = 0; s < kWgStages; ++s) {
      FullBarrier::init(&smem.k_full[s], 1);
      FullBarrier::init(&smem.v_full[s], 1);
      EmptyBarrier::init(&smem.k_empty[s], Cfg::kConsumerThreads);
      EmptyBarrier::init(&smem.v_empty[s], Cfg::kConsumerThreads);
    }
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Cfg::SmemQ{});  // (BM, D)
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Cfg::SmemK{});  // (BN, D, P)
  Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Cfg::SmemV{});  // (D, BN, P)

  if (warp_group == 0) {
    // Producer. A block with no key to see loads nothing.
    cutlass::arch::warpgroup_reg_dealloc<kWgProducerRegisters>();
    if (warp != 0 || !elected || n_blocks == 0) return;
    const int heads = static_cast<int>(args.heads);
    const int batches = static_cast<int>(args.batch);
    const Tensor mQ = p.tma_q.get_tma_tensor(make_shape(q_len, Dim{}, heads, batches));
    const Tensor mK = p.tma_k.get_tma_tensor(make_shape(k_len, Dim{}, heads, batches));
    const Tensor mV = p.tma_v.get_tma_tensor(make_shape(Dim{}, k_len, heads, batches));
    const Tensor gQ =
        local_tile(mQ(_, _, head, batch), Shape<BlockM, Dim>{}, make_coord(m_block, 0));  // (BM, D)
    const Tensor gK =
        local_tile(mK(_, _, head, batch), Shape<BlockN, Dim>{}, make_coord(_, 0));  // (BN, D, n)
    const Tensor gV =
        local_tile(mV(_, _, head, batch), Shape<Dim, BlockN>{}, make_coord(0, _));  // (D, BN, n)
    auto tma_q = p.tma_q.get_slice(Int<0>{});
    auto tma_k = p.tma_k.get_slice(Int<0>{});
    auto tma_v = p.tma_v.get_slice(Int<0>{});
    const Tensor tQgQ = tma_q.partition_S(gQ);
    Tensor tQsQ = tma_q.partition_D(sQ);
    const Tensor tKgK = tma_k.partition_S(gK);  // (TMA, TMA_N, TMA_D, n)
    Tensor tKsK = tma_k.partition_D(sK);        // (TMA, TMA_N, TMA_D, P)
    const Tensor tVgV = tma_v.partition_S(gV);  // (TMA, TMA_D, TMA_N, n)
    Tensor tVsV = tma_v.partition_D(sV);        // (TMA, TMA_D, TMA_N, P)

    FullBarrier::arrive_and_expect_tx(&smem.q_full, Cfg::kQBytes);
    copy(p.tma_q.with(smem.q_full), tQgQ, tQsQ);
    for (int n = 0; n < n_blocks; ++n) {
      const int s = n & 1;
      const auto free_phase = static_cast<std::uint32_t>(((n >> 1) & 1) ^ 1);
      EmptyBarrier::wait(&smem.k_empty[s], free_phase);
      FullBarrier::arrive_and_expect_tx(&smem.k_full[s], Cfg::kTileBytes);
      copy(p.tma_k.with(smem.k_full[s]), tKgK(_, _, _, n), tKsK(_, _, _, s));
      EmptyBarrier::wait(&smem.v_empty[s], free_phase);
      FullBarrier::arrive_and_expect_tx(&smem.v_full[s], Cfg::kTileBytes);
      copy(p.tma_v.with(smem.v_full[s]), tVgV(_, _, _, n), tVsV(_, _, _, s));
    }
    return;
  }

  // Consumers: warpgroups 1 and up, threads 0.. of the tiled MMAs.
  cutlass::arch::warpgroup_reg_alloc<Cfg::kConsumerRegisters>();
  const int mma_thread = static_cast<int>(threadIdx.x) - 128;
  typename Cfg::TiledMmaS mma_s;
  typename Cfg::TiledMmaO mma_o;
  auto thr_s = mma_s.get_slice(mma_thread);
  auto thr_o = mma_o.get_slice(mma_thread);
  const Tensor tSrQ = thr_s.make_fragment_A(thr_s.partition_A(sQ));  // (MMA, 1, D/16) descriptors
  const Tensor tSrK = thr_s.make_fragment_B(thr_s.partition_B(sK));  // (MMA, 1, D/16, P)
  const Tensor tOrV = thr_o.make_fragment_B(thr_o.partition_B(sV));  // (MMA, 1, BN/16, P)
  Tensor acc_s = partition_fragment_C(mma_s, Shape<BlockM, BlockN>{});  // ((2, 2, BN/8), 1, 1)
  Tensor acc_o = partition_fragment_C(mma_o, Shape<BlockM, Dim>{});     // ((2, 2, D/8), 1, 1)
  Tensor tOrP =
      make_tensor<T>(partition_shape_A(mma_o, Shape<BlockM, BlockN>{}));  // ((2,2,2),1,BN/16)
  const Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<BlockM, BlockN>{}));
  const Tensor tOcO = thr_o.partition_C(make_identity_tensor(Shape<BlockM, Dim>{}));
  constexpr int kGroupsS = kWgBlockN / 8;
  constexpr int kGroupsO = Dim::value / 8;
  static_assert(decltype(size(acc_s))::value == 4 * kGroupsS, "wgmma's C: (2, 2, N / 8) a thread");
  static_assert(decltype(size(acc_o))::value == 4 * kGroupsO, "wgmma's C: (2, 2, N / 8) a thread");
  static_assert(decltype(size(tOrP))::value == 4 * kGroupsS, "P's A fragment: S's elements");
  static_assert(decltype(size<2>(tOrP))::value == kWgBlockN / 16, "a k step of 16 keys");
  const auto s_at = [&](int c, int r, int g) -> float& {
    return acc_s(make_coord(make_coord(c, r, g), 0, 0));
  };
  const auto o_at = [&](int c, int r, int g) -> float& {
    return acc_o(make_coord(make_coord(c, r, g), 0, 0));
  };

  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0F, 0.0F};
  clear(acc_o);
  const float scale_log2 = args.scale * flash::kLog2e;
  if (n_blocks > 0) FullBarrier::wait(&smem.q_full, 0);

  for (int n = 0; n < n_blocks; ++n) {
    const int s = n & 1;
    const auto phase = static_cast<std::uint32_t>((n >> 1) & 1);
    const int key0 = n * kWgBlockN;

    // S = Q K^T, issued while the previous step's P V may still run.
    FullBarrier::wait(&smem.k_full[s], phase);
    warpgroup_fence_operand(acc_s);
    warpgroup_arrive();
    mma_s.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
      gemm(mma_s, tSrQ(_, _, kb), tSrK(_, _, kb, s), acc_s);
      mma_s.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    if (n > 0) {
      // The previous P V has retired: its V stage is free, O and P may change.
      warpgroup_wait<1>();
      warpgroup_fence_operand(acc_o);
      warpgroup_fence_operand(tOrP);
      EmptyBarrier::arrive(&smem.v_empty[s ^ 1]);
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_s);
    EmptyBarrier::arrive(&smem.k_empty[s]);

    // Masks: keys past the end, and past the causal diagonal.
    const bool tail = key0 + kWgBlockN > k_len;
    const bool diagonal = args.causal && key0 + kWgBlockN - 1 > row0 + args.causal_offset;
    if (tail || diagonal) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc_s); ++i) {
        const std::int64_t row = row0 + get<0>(tScS(i));
        const int key = key0 + get<1>(tScS(i));
        if (key >= k_len || (args.causal && key > row + args.causal_offset)) acc_s(i) = -INFINITY;
      }
    }
    // Online softmax, a row at a time (two a thread, each shared by a quad).
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
      CUTE_UNROLL
      for (int g = 0; g < kGroupsS; ++g)
        tile_max = fmaxf(tile_max, fmaxf(s_at(0, r, g), s_at(1, r, g)));
      tile_max = flash::quad_max(tile_max);
      const float new_max = fmaxf(row_max[r], tile_max);
      // With every score so far masked the max is -inf: exponents from 0.
      const float base = new_max == -INFINITY ? 0.0F : new_max * scale_log2;
      const float correction =
          row_max[r] == -INFINITY ? 0.0F : flash::fast_exp2(row_max[r] * scale_log2 - base);
      row_max[r] = new_max;
      float sum = 0.0F;
      CUTE_UNROLL
      for (int g = 0; g < kGroupsS; ++g) {
        CUTE_UNROLL
        for (int c = 0; c < 2; ++c) {
          const float e = flash::fast_exp2(s_at(c, r, g) * scale_log2 - base);
          s_at(c, r, g) = e;
          sum += e;
        }
      }
      row_sum[r] = row_sum[r] * correction + sum;
      CUTE_UNROLL
      for (int g = 0; g < kGroupsO; ++g) {
        o_at(0, r, g) *= correction;
        o_at(1, r, g) *= correction;
      }
    }
    // P in the operand type: k step kb's A fragment is S's column groups
    // 2 kb and 2 kb + 1 (the top of the file).
    CUTE_UNROLL
    for (int kb = 0; kb < kWgBlockN / 16; ++kb) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          CUTE_UNROLL
          for (int c = 0; c < 2; ++c) {
            tOrP(make_coord(make_coord(c, r, h), 0, kb)) = static_cast<T>(s_at(c, r, 2 * kb + h));
          }
        }
      }
    }

    // O += P V.
    FullBarrier::wait(&smem.v_full[s], phase);
    warpgroup_fence_operand(tOrP);
    warpgroup_fence_operand(acc_o);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tOrP); ++kb) {
      gemm(mma_o, tOrP(_, _, kb), tOrV(_, _, kb, s), acc_o);
    }
    warpgroup_commit_batch();
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc_o);

  // Normalize, then store O and each row's log-sum-exp.
  T* out = const_cast<T*>(static_cast<const T*>(args.out.data)) + batch * args.out.batch_stride +
           head * args.out.head_stride;
  float* lse = args.lse.data == nullptr
                   ? nullptr
                   : const_cast<float*>(static_cast<const float*>(args.lse.data)) +
                         batch * args.lse.batch_stride + head * args.lse.head_stride;
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float sum = flash::quad_sum(row_sum[r]);
    const int row = row0 + get<0>(tOcO(make_coord(make_coord(0, r, 0), 0, 0)));
    const float inverse = sum > 0.0F ? 1.0F / sum : 0.0F;
    if (row >= q_len) continue;
    T* out_row = out + static_cast<std::int64_t>(row) * args.out.row_stride;
    CUTE_UNROLL
    for (int g = 0; g < kGroupsO; ++g) {
      const int col = get<1>(tOcO(make_coord(make_coord(0, r, g), 0, 0)));
      alignas(4) const T pair[2] = {static_cast<T>(o_at(0, r, g) * inverse),
                                    static_cast<T>(o_at(1, r, g) * inverse)};
      *reinterpret_cast<std::uint32_t*>(out_row + col) =
          *reinterpret_cast<const std::uint32_t*>(pair);
    }
    if (lse != nullptr && (threadIdx.x & 3) == 0) {
      lse[static_cast<std::int64_t>(row) * args.lse.row_stride] =
          sum > 0.0F ? row_max[r] * args.scale + logf(sum) : -INFINITY;
    }
  }
#elif defined(__CUDA_ARCH__)
  // This image was compiled without sm_90a's features (the fatbinary holds
  // an sm_90a image too, which the driver takes on a 9.0 device): stop
  // loudly rather than leave the output unwritten.
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    printf("loom flash attention wgmma: kernel image without sm_90a features\n");
  }
  __trap();
#endif
}

/// t's strides as TMA takes them: a mode of one element is never stepped,
/// and gets a contiguous tensor's stride (TMA takes no zero stride; the op
/// passes 0 for a dimension of one element).
AttentionTensor tma_strides(AttentionTensor t, std::int64_t rows, std::int64_t heads,
                            std::int64_t batch, std::int64_t head_dim) {
  if (rows == 1) t.row_stride = head_dim;
  if (heads == 1) t.head_stride = rows * t.row_stride;
  if (batch == 1) t.batch_stride = heads * t.head_stride;
  return t;
}

template <class T, int HeadDim, int Consumers>
void launch_wgmma_head_dim(const AttentionArgs& p, StreamView stream) {
  using Cfg = FlashWgmmaConfig<T, HeadDim, Consumers>;
  using Params = typename Cfg::Params;
  // Not re-pointable (the top of the file): the compiled graph must capture
  // this launch and copy bindings, never re-point it.
  static_assert(
      !loom::detail::declares_its_pointers<Params> && !loom::detail::pointer_free_class<Params>,
      "a TMA descriptor holds pointers that a compiled graph cannot re-point");
  static_assert(sizeof(Params) <= 4096, "kernel parameters are limited to 4 KiB");
  const int heads = static_cast<int>(p.heads);
  const int batch = static_cast<int>(p.batch);
  const int q_len = static_cast<int>(p.q_len);
  const int k_len = static_cast<int>(p.k_len);
  Params params;
  params.args = p;
  params.tma_q = Cfg::template make_tma<false, typename Cfg::SmemQ>(
      static_cast<const T*>(p.q.data), q_len, heads, batch,
      tma_strides(p.q, q_len, heads, batch, HeadDim));
  params.tma_k = Cfg::template make_tma<false, typename Cfg::SmemKTile>(
      static_cast<const T*>(p.k.data), k_len, heads, batch,
      tma_strides(p.k, k_len, heads, batch, HeadDim));
  params.tma_v = Cfg::template make_tma<true, typename Cfg::SmemVTile>(
      static_cast<const T*>(p.v.data), k_len, heads, batch,
      tma_strides(p.v, k_len, heads, batch, HeadDim));
  constexpr auto kernel = flash_fwd_wgmma_kernel<Cfg>;
  static std::atomic<std::uint64_t> opted_in{0};
  tensor_core::opt_in_shared_memory(kernel, Cfg::kSharedBytes, opted_in);
  const dim3 grid(static_cast<unsigned>((p.q_len + Cfg::kBlockM - 1) / Cfg::kBlockM),
                  static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  loom::detail::launch_on_stream(stream, kernel, grid, dim3(Cfg::kThreads), Cfg::kSharedBytes,
                                 params);
  LOOM_KERNEL_CHECK_LAUNCH("flash attention wgmma forward launch");
}

/// The registers a thread of the d = 128 instantiation takes in the image
/// loaded for the current device (a stub image takes far fewer).
template <class T>
int flash_wgmma_registers() {
  cudaFuncAttributes attributes{};
  LOOM_KERNEL_CHECK(
      cudaFuncGetAttributes(&attributes, flash_fwd_wgmma_kernel<FlashWgmmaConfig<T, 128>>));
  return attributes.numRegs;
}

template <class T>
void launch_flash_fwd_wgmma(const AttentionArgs& p, StreamView stream) {
  if (p.head_dim == 64) {
    launch_wgmma_head_dim<T, 64, 3>(p, stream);
  } else {
    launch_wgmma_head_dim<T, 128, 2>(p, stream);
  }
}

}  // namespace
}  // namespace loom::kernels::attention_detail
