#pragma once
// wgmma: bf16/f16 GEMM on Hopper's warpgroup MMA, fed by TMA (hgemm.hpp).
// Compiled for sm_90a only (library.cmake); runs on compute capability 9.0.
//
// Design (CUTLASS's "cooperative" warp-specialized kernel, written over CuTe):
//
//  - A block owns 128 x 256 tiles of C, one after another: the grid is at
//    most one block a multiprocessor, and block b takes tiles b, b + grid,
//    b + 2 grid, ... (persistent), walked in groups of 8 tile rows so that a
//    group's B panel is read while it is still in L2.
//  - 384 threads, three warpgroups. Warpgroup 0 is the producer: it gives
//    registers back (setmaxnreg 40) and one thread of its first warp issues
//    the TMA loads. Warpgroups 1 and 2 are the consumers (setmaxnreg 232):
//    each owns 64 rows of the tile (64 x 256, 128 f32 accumulators a thread)
//    and issues wgmma.m64n256k16 on both operands in shared memory.
//  - K advances 64 at a time through 4 shared-memory stages (48 KiB each:
//    A 128 x 64, B 256 x 64), 128-byte swizzled as GMMA's canonical layouts
//    want them (K-major or MN-major, whichever the operand is in memory; TMA
//    writes either, so nothing is transposed on the way).
//  - The pipeline is two mbarriers a stage. full[s] (arrival count 1): the
//    producer arrives with the stage's byte count and TMA completes the
//    transaction. empty[s] (arrival count 256; 4 in clusters, below): every consumer thread
//    arrives once the wgmma that read the stage has retired. The producer
//    waits on empty before refilling a stage, the consumers on full before
//    reading one; each side tracks the phase parity it waits for, flipping
//    it each time its stage index wraps (the producer starts at parity 1,
//    which an initialised barrier reports complete: every stage starts free).
//  - Consumers keep one k tile of wgmma in flight: they issue tile t, wait
//    until at most that batch is pending (warpgroup_wait<1>), then release
//    tile t - 1's stage.
//  - The epilogue of a whole tile of a row-major C goes through shared
//    memory (a 144-byte-pitch block a consumer warpgroup, synced by its own
//    named barrier): with alpha alone and a 16-bit, 16-byte aligned C, 64
//    columns at a time out in 16-byte stores (wgmma_epilogue_staged);
//    otherwise 32 columns of f32 at a time through the whole epilogue in one
//    shared, short loop (wgmma_epilogue_staged_general). Code run once a
//    tile must stay short: the unrolled epilogue it replaced missed the
//    instruction cache for as long as the tile's main loop took. Edge tiles
//    and other C layouts work from registers, each store predicated on lying
//    inside C: unrolled with alpha alone (pairs of neighbouring columns at
//    once where C is row-major and the pairs aligned), else through a
//    thread-local array walked by a rolled loop (alpha, beta C, bias, the
//    activation, in f32). The producer is already loading the block's next
//    tile meanwhile.
//
// Tails: the TMA descriptors carry the true extents, and TMA fills whatever
// lies outside them with zeros (and still counts the box's full bytes on
// the barrier), so a partial tile in M, N or K multiplies zeros.
//
// Batches: each operand's TMA tensor has the batch as a third mode; a batch
// stride of 0 (one matrix shared by the batch) becomes a batch extent of 1
// that every tile reads at index 0 (TMA takes no zero stride).
//
// The TMA descriptors are built on the host for each call (they hold the
// operands' addresses) and reach the kernel as a __grid_constant__
// parameter, which is where TMA reads them from. A compiled graph cannot
// re-point such a launch: the addresses live inside opaque 128-byte
// descriptors. So the kernel's parameter struct (WgmmaParams) deliberately
// declares no loom_pointer_offsets() and no loom_pointer_free: its
// LaunchRecord is not "plain", the compiled graph captures the task as it
// is (compile/capture.hpp), and a rebinding run copies bound tensors into
// and out of the placeholders instead of re-pointing the node
// (executable.hpp). The static_assert in launch_wgmma_layout keeps it so.
//
// Layouts: TMA + GMMA take A K- or M-contiguous and B K- or N-contiguous
// directly. Three instantiations a type: (A K, B K), (A K, B N), (A M, B N);
// the fourth, (A M, B K), is the transposed problem C^T = B^T A^T, which is
// (A K, B N).
//
// Clusters (wgmma_cluster, ClusterM = 2; a fourth instantiation a type, for
// (A K, B N) only): blocks go in clusters of two along M. A cluster walks
// cluster tiles (two tile rows by one tile column) as a lone block walks
// tiles; its block of rank r takes tile row r, so both need the same B tile.
// Each block's producer loads half of it (SM90_TMA_LOAD_MULTICAST, sliced
// by the rank) into both blocks' stages, and its own A tile. So:
//  - full[s] still expects the whole stage's bytes: its own A, its own half
//    of B and the other block's half (which may land before this block's
//    producer arrives: the pending arrival keeps the phase open).
//  - A stage is written by both blocks, so each block's empty[s] counts the
//    consumers of both (4 arrivals: one thread a consumer warpgroup, after
//    its warpgroup's wgmma on the stage retired, arrives on both blocks'
//    barriers, the remote one through its cluster address).
//  - Barriers are initialised before a cluster-wide sync, and each producer,
//    after its last load, waits until its stages are free again (the other
//    block's last arrivals have come), so that no arrival reaches a block
//    that has exited.
//  - A tile row past M (an odd count of tile rows) is loaded (zeros) and
//    multiplied for its block's share of B, and stores nothing.
// The grid is the clusters that fit at once (cudaOccupancyMaxActiveClusters),
// at most half the multiprocessors.
#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"
#include "common/tensor_core.cuh"
#include "elementwise/functors.hpp"
#include "gemm/hgemm.hpp"

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cute/tensor.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <utility>

namespace loom::kernels::hgemm_detail {
namespace {

using cute::Tensor;  // not loom::Tensor

constexpr int kWgBM = 128;
constexpr int kWgBN = 256;
constexpr int kWgBK = 64;
constexpr int kWgStages = 4;
constexpr int kWgThreads = 384;          // a producer warpgroup and two consumers
constexpr int kWgConsumerThreads = 256;  // the empty barriers' arrival count
constexpr int kWgProducerRegisters = 40;
constexpr int kWgConsumerRegisters = 232;        // 128 x 40 + 256 x 232 <= 64 Ki registers
constexpr int kWgGroupRows = 8;                  // tile rows a group walks before moving along N
constexpr int kWgStageRows = 64;                 // the epilogue's staged block: a warpgroup's rows
constexpr int kWgStageCols = 64;                 //   by 64 columns of C at a time
constexpr int kWgStagePitch = kWgStageCols + 8;  // elements a staged row (144 bytes)
constexpr int kWgStageColsF32 = 32;              // the general path's block: 64 x 32 f32
// Floats a staged f32 row (160 bytes): a half-warp's 8-byte stores (four
// rows, 8 columns each) then start 8 banks apart and never share a bank.
constexpr int kWgStagePitchF32 = kWgStageColsF32 + 8;
/// 16-bit elements a consumer warpgroup's staging takes: the larger block.
constexpr int kWgStageElements =
    std::max(kWgStageRows * kWgStagePitch, kWgStageRows* kWgStagePitchF32 * 2);

/// The kernel's parameters: both TMA descriptors and the problem.
template <class TmaA, class TmaB>
struct WgmmaParams {
  TmaA tma_a;
  TmaB tma_b;
  HgemmArgs args;  ///< m, n, k, batch, the epilogue and C (a's and b's data unused)
  int tiles_m = 0;
  int tiles_n = 0;
  int batches_a = 1;     ///< 1 where A is shared by the batch
  int batches_b = 1;     ///< 1 where B is shared by the batch
  bool c_pairs = false;  ///< C row-major, pairs of columns aligned: stored two at once
  /// C bf16 or f16, row-major, rows and batches on 16 bytes: whole tiles of
  /// the plain epilogue go out through shared memory in 16-byte stores.
  bool c_vectors = false;
};

/// Tiles, shared-memory layouts, the tiled MMA and the TMA types for
/// operand type T and each operand's contiguous dimension.
template <class T_, bool AKMajor, bool BKMajor, int ClusterM = 1>
struct WgmmaConfig {
  using T = T_;
  /// Blocks of a cluster, along M: they share each B tile, which each loads
  /// a part of and multicasts to all (wgmma_cluster); 1: no cluster.
  static constexpr int kClusterM = ClusterM;
  static_assert(ClusterM == 1 || ClusterM == 2, "clusters of one or two blocks along M");
  using TileShape = cute::Shape<cute::Int<kWgBM>, cute::Int<kWgBN>, cute::Int<kWgBK>>;
  static constexpr cute::GMMA::Major kMajorA =
      AKMajor ? cute::GMMA::Major::K : cute::GMMA::Major::MN;
  static constexpr cute::GMMA::Major kMajorB =
      BKMajor ? cute::GMMA::Major::K : cute::GMMA::Major::MN;

  // 128-byte swizzle atoms: 8 rows of 64 K-contiguous elements, or 64
  // MN-contiguous elements by 8 K. An MN-major operand's atoms go along K
  // first (as CUTLASS orders them), so that a TMA box spans a whole 64-wide
  // MN block.
  template <int Rows, bool KMajor>
  using SmemLayout = decltype(cute::tile_to_shape(
      std::conditional_t<KMajor, cute::GMMA::Layout_K_SW128_Atom<T>,
                         cute::GMMA::Layout_MN_SW128_Atom<T>>{},
      cute::Shape<cute::Int<Rows>, cute::Int<kWgBK>, cute::Int<kWgStages>>{},
      std::conditional_t<KMajor, cute::Step<cute::_1, cute::_2, cute::_3>,
                         cute::Step<cute::_2, cute::_1, cute::_3>>{}));
  using SmemLayoutA = SmemLayout<kWgBM, AKMajor>;  // (BM, BK, stages)
  using SmemLayoutB = SmemLayout<kWgBN, BKMajor>;  // (BN, BK, stages)

  using MmaOp = std::conditional_t<std::is_same_v<T, cute::bfloat16_t>,
                                   cute::SM90_64x256x16_F32BF16BF16_SS<kMajorA, kMajorB>,
                                   cute::SM90_64x256x16_F32F16F16_SS<kMajorA, kMajorB>>;
  // Two consumer warpgroups along M: 128 x 256 a k step of 16.
  using TiledMma = decltype(cute::make_tiled_mma(
      MmaOp{}, cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{}));

  /// An operand (rows, K, batches) for TMA: K-major (rows ld apart) or
  /// rows-major (K columns ld apart); loaded a part a block and multicast
  /// to the `Multicast` blocks that share it.
  template <bool KMajor, class SLayout, int Multicast = 1>
  static auto make_tma(const T* data, int rows, int k, int batches, std::int64_t ld,
                       std::int64_t batch_stride) {
    using namespace cute;
    const auto shape = make_shape(rows, k, batches);
    const auto tensor = [&] {
      if constexpr (KMajor) {
        return make_tensor(make_gmem_ptr(data),
                           make_layout(shape, make_stride(ld, _1{}, batch_stride)));
      } else {
        return make_tensor(make_gmem_ptr(data),
                           make_layout(shape, make_stride(_1{}, ld, batch_stride)));
      }
    }();
    if constexpr (Multicast > 1) {
      return make_tma_copy(SM90_TMA_LOAD_MULTICAST{}, tensor, SLayout{}(_, _, Int<0>{}),
                           Int<Multicast>{});
    } else {
      return make_tma_copy(SM90_TMA_LOAD{}, tensor, SLayout{}(_, _, Int<0>{}));
    }
  }
  using TmaA = decltype(make_tma<AKMajor, SmemLayoutA>(nullptr, 0, 0, 0, 0, 0));
  using TmaB = decltype(make_tma<BKMajor, SmemLayoutB, ClusterM>(nullptr, 0, 0, 0, 0, 0));
  using Params = WgmmaParams<TmaA, TmaB>;

  /// Shared memory: the stages (each operand's on 1024 bytes, as 128-byte
  /// swizzles need), the barriers and the epilogue's staging.
  struct Storage {
    alignas(1024) cute::array<T, cute::cosize_v<SmemLayoutA>> a;
    alignas(1024) cute::array<T, cute::cosize_v<SmemLayoutB>> b;
    alignas(8) std::uint64_t full[kWgStages];
    alignas(8) std::uint64_t empty[kWgStages];
    /// The epilogue's staging a consumer warpgroup: a 64 x 64 block of C
    /// (16-bit, rows padded to 144 bytes) or a 64 x 32 block of f32
    /// accumulators (rows padded to 160 bytes); no bank conflicts either way.
    alignas(16) std::uint16_t staged[2][kWgStageElements];
  };
  /// Arrivals that free a stage. Without a cluster, every consumer thread's
  /// (as the kernel was first measured). In a cluster a stage is written by
  /// every block's multicast, so each block's stage waits for the consumers
  /// of all of them: one thread a consumer warpgroup arrives on each block's
  /// barrier, once its warpgroup's wgmma reading the stage have retired.
  static constexpr std::uint32_t kEmptyArrivals =
      ClusterM == 1 ? kWgConsumerThreads : 2U * ClusterM;
  /// The bytes TMA writes into a stage (a partial tile counts whole; in a
  /// cluster, B's parts multicast by the other blocks included).
  static constexpr std::uint32_t kStageBytes =
      static_cast<std::uint32_t>((kWgBM + kWgBN) * kWgBK * sizeof(T));
  /// Dynamic shared memory: the storage, and room to align its start to 1024.
  static constexpr std::size_t kSharedBytes = sizeof(Storage) + 1024;
  static_assert(kSharedBytes <= 227 * 1024, "more shared memory than a Hopper block gets");
};

/// The tile (m, n) and batch entry of the grid's `tile`-th: batch outermost,
/// then groups of kWgGroupRows tile rows walked column by column.
__device__ __forceinline__ void wgmma_tile(int tile, int tiles_m, int tiles_n, int& tm, int& tn,
                                           int& batch) {
  const int per_batch = tiles_m * tiles_n;
  batch = tile / per_batch;
  const int id = tile - batch * per_batch;
  const int per_group = kWgGroupRows * tiles_n;
  const int first_m = (id / per_group) * kWgGroupRows;
  const int rows = min(tiles_m - first_m, kWgGroupRows);
  const int in_group = id % per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

/// act(alpha * acc + beta * c + bias) for element (m, n) of C's batch entry
/// b, c_index its index in C: the order the reference applies them in.
__device__ __forceinline__ float wgmma_epilogue_value(const HgemmArgs& p, float acc, std::int64_t m,
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

/// Two values into C at `at` (element n and n + 1 of a row), one store.
__device__ __forceinline__ void wgmma_store_pair(void* c, DType dtype, std::int64_t at, float v0,
                                                 float v1) {
  if (dtype == DType::f32) {
    *reinterpret_cast<float2*>(static_cast<float*>(c) + at) = make_float2(v0, v1);
  } else if (dtype == DType::bf16) {
    // cvt.rn.bf16x2.f32: the bits of f32_to_bf16_bits (common/convert.hpp).
    *reinterpret_cast<__nv_bfloat162*>(static_cast<std::uint16_t*>(c) + at) =
        __floats2bfloat162_rn(v0, v1);
  } else {
    *reinterpret_cast<__half2*>(static_cast<std::uint16_t*>(c) + at) = __floats2half2_rn(v0, v1);
  }
}

/// Four values into C at `at` (elements n to n + 3 of a row), one store of
/// 16 bytes (f32) or 8 (bf16, f16): C's address there is aligned to it.
__device__ __forceinline__ void wgmma_store_quad(void* c, DType dtype, std::int64_t at,
                                                 const float (&v)[4]) {
  if (dtype == DType::f32) {
    *reinterpret_cast<float4*>(static_cast<float*>(c) + at) = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
  // The conversions of wgmma_store_pair, two pairs in one 8-byte store.
  uint2 bits;
  if (dtype == DType::bf16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
    bits = make_uint2(*reinterpret_cast<const unsigned*>(&lo),
                      *reinterpret_cast<const unsigned*>(&hi));
  } else {
    const __half2 lo = __floats2half2_rn(v[0], v[1]);
    const __half2 hi = __floats2half2_rn(v[2], v[3]);
    bits = make_uint2(*reinterpret_cast<const unsigned*>(&lo),
                      *reinterpret_cast<const unsigned*>(&hi));
  }
  *reinterpret_cast<uint2*>(static_cast<std::uint16_t*>(c) + at) = bits;
}

/// One consumer thread's accumulators into C, each element inside C. An
/// element's address is its offset (dr, dc) from the thread's first
/// element, so the pass needs a base address and C's strides, never an
/// index an element (128 64-bit indices would not fit in registers).
///
/// Plain (alpha alone: beta 0, no bias, no activation), unrolled from the
/// registers, where the offsets are compile-time constants: where C's pairs
/// are aligned (c_pairs: row-major, even strides, data on two elements),
/// accumulators 2j and 2j + 1, which wgmma puts in neighbouring columns of
/// one row (checked through the coordinates, at compile time), go out as
/// one store.
///
/// Otherwise (beta, bias or an activation) the accumulators are copied to a
/// thread-local array and walked by a loop that is not unrolled, one element
/// at a time: 128 unrolled copies of C's and bias's loads, conversions and
/// the activation would cost minutes of compile time for a few percent of a
/// tile's time (the local array stays in L1).
template <bool Plain, class Accumulators, class Coordinates>
__device__ __forceinline__ void wgmma_epilogue(const HgemmArgs& p, bool c_pairs,
                                               const Accumulators& acc, const Coordinates& coords,
                                               std::int64_t m0, std::int64_t n0, int batch) {
  using cute::get;
  constexpr int kValues = decltype(cute::size(acc))::value;
  const int row0 = get<0>(coords(0));
  const int col0 = get<1>(coords(0));
  const std::int64_t m_base = m0 + row0;
  const std::int64_t n_base = n0 + col0;
  // An offset (dr, dc) lies inside C when dr < rows_left and dc < cols_left
  // (the tile overhangs C by less than a tile: both above -256).
  const int rows_left = static_cast<int>(cute::min(p.m - m_base, std::int64_t{kWgBM}));
  const int cols_left = static_cast<int>(cute::min(p.n - n_base, std::int64_t{kWgBN}));
  const std::int64_t rs = p.c.row_stride;
  const std::int64_t cs = p.c.col_stride;
  const std::int64_t base = batch * p.c.batch_stride + m_base * rs + n_base * cs;
  void* c = const_cast<void*>(p.c.data);
  if constexpr (Plain) {
    const bool pairs = c_pairs && n_base % 2 == 0;
    CUTE_UNROLL
    for (int i = 0; i < kValues; i += 2) {
      const int dr = get<0>(coords(i)) - row0;
      const int dc = get<1>(coords(i)) - col0;
      const bool neighbours = get<0>(coords(i + 1)) - row0 == dr &&
                              get<1>(coords(i + 1)) - col0 == dc + 1 && dc % 2 == 0;
      if (pairs && neighbours) {
        if (dr >= rows_left || dc >= cols_left) continue;
        const std::int64_t at = base + dr * rs + dc;  // cs == 1
        if (dc + 1 < cols_left) {
          wgmma_store_pair(c, p.c.dtype, at, p.alpha * acc(i), p.alpha * acc(i + 1));
        } else {
          store_from_f32(c, p.c.dtype, at, p.alpha * acc(i));
        }
        continue;
      }
      CUTE_UNROLL
      for (int j = 0; j < 2; ++j) {
        const int drj = get<0>(coords(i + j)) - row0;
        const int dcj = get<1>(coords(i + j)) - col0;
        if (drj >= rows_left || dcj >= cols_left) continue;
        store_from_f32(c, p.c.dtype, base + drj * rs + dcj * cs, p.alpha * acc(i + j));
      }
    }
  } else {
    float staged[kValues];
    CUTE_UNROLL
    for (int i = 0; i < kValues; ++i) staged[i] = acc(i);
#pragma unroll 1
    for (int i = 0; i < kValues; ++i) {
      const int dr = get<0>(coords(i)) - row0;
      const int dc = get<1>(coords(i)) - col0;
      if (dr >= rows_left || dc >= cols_left) continue;
      const std::int64_t at = base + dr * rs + dc * cs;
      store_from_f32(c, p.c.dtype, at,
                     wgmma_epilogue_value(p, staged[i], m_base + dr, n_base + dc, at, batch));
    }
  }
}

/// A consumer warpgroup's bar.sync (ids 1 and 2; 0 is __syncthreads).
__device__ __forceinline__ void wgmma_group_sync(int group) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + group) : "memory");
}

/// The plain epilogue (alpha alone) of a tile (tails included) with C
/// 16-bit, row-major and on 16 bytes (c_vectors): each consumer warpgroup
/// passes its 64 rows through shared memory 64 columns at a time, its
/// accumulators converted into a padded block (4-byte stores, no bank
/// conflicts), then out in 16-byte stores, a row's 128 bytes by 8 threads
/// (bounds-checked where a tail tile passes C's edge). Why: stored straight from
/// registers, a tile's 128 predicated, dtype-switched stores a thread made
/// the epilogue a long run of code executed once a tile, whose instruction
/// fetches (Nsight Compute: "no instruction" the first stall) cost as much
/// as the tile's main loop at 4096^3; this one is a short loop.
template <class Out, class Accumulators, class Coordinates>
__device__ __forceinline__ void wgmma_epilogue_staged(const HgemmArgs& p, const Accumulators& acc,
                                                      const Coordinates& coords,
                                                      std::uint16_t* staged, int group,
                                                      int group_thread, std::int64_t m0,
                                                      std::int64_t n0, int batch) {
  using cute::get;
  constexpr int kValues = decltype(cute::size(acc))::value;
  const int row0 = get<0>(coords(0));  // the thread's first row in the tile
  const int col0 = get<1>(coords(0));
  const int group_row0 = row0 - kWgStageRows * group;  // in the warpgroup's 64 rows
  auto* c = static_cast<Out*>(const_cast<void*>(p.c.data)) + batch * p.c.batch_stride +
            (m0 + kWgStageRows * group) * p.c.row_stride + n0;
  // A tail tile stores only what lies inside C (its other rows and columns
  // are TMA's zero fill, staged and left).
  const std::int64_t rows_left = p.m - (m0 + kWgStageRows * group);
  const std::int64_t cols_left = p.n - n0;
  CUTE_UNROLL
  for (int block = 0; block < kWgBN / kWgStageCols; ++block) {
    wgmma_group_sync(group);  // the block before has been read out
    CUTE_UNROLL
    for (int i = 0; i < kValues; i += 2) {
      const int dr = get<0>(coords(i)) - row0;  // compile-time once unrolled
      const int dc = get<1>(coords(i)) - col0;
      if (dc / kWgStageCols != block) continue;
      const int at = (group_row0 + dr) * kWgStagePitch + col0 + dc - kWgStageCols * block;
      // The conversions wgmma_store_pair makes (common/convert.hpp's bits).
      if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
        *reinterpret_cast<__nv_bfloat162*>(staged + at) =
            __floats2bfloat162_rn(p.alpha * acc(i), p.alpha * acc(i + 1));
      } else {
        *reinterpret_cast<__half2*>(staged + at) =
            __floats2half2_rn(p.alpha * acc(i), p.alpha * acc(i + 1));
      }
    }
    wgmma_group_sync(group);                              // the block is whole
    constexpr int kChunksPerRow = kWgStageCols * 2 / 16;  // 16-byte chunks: 8
    constexpr int kPasses = kWgStageRows * kChunksPerRow / 128;
#pragma unroll 1
    for (int pass = 0; pass < kPasses; ++pass) {
      const int chunk = pass * 128 + group_thread;
      const int row = chunk / kChunksPerRow;
      const int col = (chunk % kChunksPerRow) * 8;
      const int tile_col = kWgStageCols * block + col;
      if (row >= rows_left || tile_col >= cols_left) continue;  // a tail tile's outside
      const uint4 v = *reinterpret_cast<const uint4*>(staged + row * kWgStagePitch + col);
      Out* to = c + row * p.c.row_stride + tile_col;
      if (tile_col + 8 <= cols_left) {
        *reinterpret_cast<uint4*>(to) = v;
      } else {
        const auto* values = reinterpret_cast<const Out*>(&v);
        for (int e = 0; e < cols_left - tile_col; ++e) to[e] = values[e];
      }
    }
  }
}

/// One staged 64 x 32 block of f32 accumulators out to C, each element
/// through the whole epilogue (alpha, beta C, bias, the activation) and
/// stored in C's dtype: four consecutive elements a thread and pass, a row
/// by 8 threads. Not inlined: the 8 blocks of a tile share its code.
__device__ __noinline__ void wgmma_write_block(const HgemmArgs& p, const float* staged,
                                               int group_thread, std::int64_t m_first,
                                               std::int64_t n_first, int batch) {
  constexpr int kQuadsPerRow = kWgStageColsF32 / 4;
  constexpr int kPasses = kWgStageRows * kQuadsPerRow / 128;
  void* c = const_cast<void*>(p.c.data);
#pragma unroll 1
  for (int pass = 0; pass < kPasses; ++pass) {
    const int quad = pass * 128 + group_thread;
    const int row = quad / kQuadsPerRow;
    const int col = (quad % kQuadsPerRow) * 4;
    const float4 v = *reinterpret_cast<const float4*>(staged + row * kWgStagePitchF32 + col);
    const float values[4] = {v.x, v.y, v.z, v.w};
    const std::int64_t m = m_first + row;
    const std::int64_t n = n_first + col;
    if (m >= p.m || n >= p.n) continue;  // a tail tile's outside
    const std::int64_t at = batch * p.c.batch_stride + m * p.c.row_stride + n;  // col_stride 1
    const int inside = p.n - n < 4 ? static_cast<int>(p.n - n) : 4;
    float out[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      // Past N (a tail) the value is never stored: bias[n] is not read.
      out[e] = e < inside ? wgmma_epilogue_value(p, values[e], m, n + e, at + e, batch) : 0.0F;
    }
    // Four elements in one store where C's address allows it.
    const std::size_t element = p.c.dtype == DType::f32 ? 4U : 2U;
    if (inside == 4 &&
        (reinterpret_cast<std::uintptr_t>(c) + static_cast<std::uintptr_t>(at) * element) %
                (4 * element) ==
            0) {
      wgmma_store_quad(c, p.c.dtype, at, out);
    } else {
      for (int e = 0; e < inside; ++e) store_from_f32(c, p.c.dtype, at + e, out[e]);
    }
  }
}

/// Whole tiles of a row-major C that the 16-bit path does not take (f32 C,
/// or beta, a bias or an activation): the accumulators through shared
/// memory 32 columns at a time (8-byte stores; rows padded to 160 bytes),
/// then the epilogue a row at a time by wgmma_write_block. Why: as the
/// 16-bit path's comment says, a tile's 128 accumulators walked in one long
/// run of code cost instruction fetches a tile; here the code executed a
/// tile is short and reused.
template <class Accumulators, class Coordinates>
__device__ __forceinline__ void wgmma_epilogue_staged_general(
    const HgemmArgs& p, const Accumulators& acc, const Coordinates& coords, float* staged,
    int group, int group_thread, std::int64_t m0, std::int64_t n0, int batch) {
  using cute::get;
  constexpr int kValues = decltype(cute::size(acc))::value;
  const int row0 = get<0>(coords(0));
  const int col0 = get<1>(coords(0));
  const int group_row0 = row0 - kWgStageRows * group;
  CUTE_UNROLL
  for (int block = 0; block < kWgBN / kWgStageColsF32; ++block) {
    wgmma_group_sync(group);  // the block before has been read out
    CUTE_UNROLL
    for (int i = 0; i < kValues; i += 2) {
      const int dr = get<0>(coords(i)) - row0;  // compile-time once unrolled
      const int dc = get<1>(coords(i)) - col0;
      if (dc / kWgStageColsF32 != block) continue;
      *reinterpret_cast<float2*>(staged + (group_row0 + dr) * kWgStagePitchF32 + col0 + dc -
                                 kWgStageColsF32 * block) = make_float2(acc(i), acc(i + 1));
    }
    wgmma_group_sync(group);  // the block is whole
    wgmma_write_block(p, staged, group_thread, m0 + kWgStageRows * group,
                      n0 + kWgStageColsF32 * block, batch);
  }
}

template <class Cfg>
__global__ void __launch_bounds__(kWgThreads, 1)
    hgemm_wgmma_kernel(const __grid_constant__ typename Cfg::Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  using Storage = typename Cfg::Storage;
  using TileShape = typename Cfg::TileShape;

  // The storage on 1024 bytes (the host asked for 1024 bytes more).
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  const std::uint32_t raw_address = cast_smem_ptr_to_uint(shared_raw);
  Storage& smem =
      *reinterpret_cast<Storage*>(shared_raw + ((1024U - (raw_address & 1023U)) & 1023U));

  const int warp = cutlass::canonical_warp_idx_sync();
  const int warp_group = cutlass::canonical_warp_group_idx();
  const bool elected = elect_one_sync() != 0;

  if (warp == 0 && elected) {
    prefetch_tma_descriptor(p.tma_a.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_b.get_tma_descriptor());
    CUTE_UNROLL
    for (int s = 0; s < kWgStages; ++s) {
      FullBarrier::init(&smem.full[s], 1);
      EmptyBarrier::init(&smem.empty[s], Cfg::kEmptyArrivals);
    }
  }
  cutlass::arch::fence_barrier_init();
  if constexpr (Cfg::kClusterM > 1) {
    // The other blocks arrive on these barriers and multicast into this
    // block's stages: none may start before all are initialised.
    cute::cluster_sync();
  } else {
    __syncthreads();
  }

  const HgemmArgs& args = p.args;
  const int M = static_cast<int>(args.m);
  const int N = static_cast<int>(args.n);
  const int K = static_cast<int>(args.k);
  const int k_tiles = (K + kWgBK - 1) / kWgBK;
  // A cluster walks cluster tiles (kClusterM tile rows by one tile column)
  // as a lone block walks tiles, and its block of rank r takes tile row r of
  // each: the blocks of a cluster share B's tile. A tile row past M (tiles_m
  // not a multiple) is still loaded (zeros) and multiplied, for its block's
  // part of B; its epilogue stores nothing.
  constexpr int kClusterM = Cfg::kClusterM;
  const int cluster_rows = (p.tiles_m + kClusterM - 1) / kClusterM;
  const int tiles = cluster_rows * p.tiles_n * static_cast<int>(args.batch);
  const int first_tile = static_cast<int>(blockIdx.x) / kClusterM;
  const int tile_stride = static_cast<int>(gridDim.x) / kClusterM;
  const int rank = kClusterM > 1 ? static_cast<int>(cute::block_rank_in_cluster()) : 0;

  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename Cfg::SmemLayoutA{});  // (BM,BK,P)
  Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename Cfg::SmemLayoutB{});  // (BN,BK,P)

  if (warp_group == 0) {
    // Producer.
    cutlass::arch::warpgroup_reg_dealloc<kWgProducerRegisters>();
    if (warp != 0 || !elected) return;
    // The operands as TMA coordinate tensors, tiled: (BM,BK,m,k,l), (BN,BK,n,k,l).
    const Tensor mA = p.tma_a.get_tma_tensor(make_shape(M, K, p.batches_a));
    const Tensor mB = p.tma_b.get_tma_tensor(make_shape(N, K, p.batches_b));
    const Tensor gA = local_tile(mA, TileShape{}, make_coord(_, _, _), Step<_1, X, _1>{});
    const Tensor gB = local_tile(mB, TileShape{}, make_coord(_, _, _), Step<X, _1, _1>{});
    auto tma_a = p.tma_a.get_slice(Int<0>{});
    auto tma_b = p.tma_b.get_slice(rank);  // this block's part of B (all of it alone)
    Tensor tAsA = tma_a.partition_D(sA);   // (TMA,TMA_M,TMA_K,P)
    Tensor tBsB = tma_b.partition_D(sB);   // (TMA,TMA_N,TMA_K,P)
    constexpr auto kEveryBlock = static_cast<std::uint16_t>((1U << kClusterM) - 1U);
    int stage = 0;
    std::uint32_t phase = 1;  // every stage starts free
    for (int tile = first_tile; tile < tiles; tile += tile_stride) {
      int tm = 0;
      int tn = 0;
      int batch = 0;
      wgmma_tile(tile, cluster_rows, p.tiles_n, tm, tn, batch);
      tm = tm * kClusterM + rank;
      const Tensor tAgA =
          tma_a.partition_S(gA(_, _, tm, _, p.batches_a == 1 ? 0 : batch));  // (TMA,TMA_M,TMA_K,k)
      const Tensor tBgB =
          tma_b.partition_S(gB(_, _, tn, _, p.batches_b == 1 ? 0 : batch));  // (TMA,TMA_N,TMA_K,k)
      for (int kt = 0; kt < k_tiles; ++kt) {
        EmptyBarrier::wait(&smem.empty[stage], phase);
        FullBarrier::arrive_and_expect_tx(&smem.full[stage], Cfg::kStageBytes);
        copy(p.tma_a.with(smem.full[stage]), tAgA(_, _, _, kt), tAsA(_, _, _, stage));
        if constexpr (kClusterM > 1) {
          copy(p.tma_b.with(smem.full[stage], kEveryBlock), tBgB(_, _, _, kt),
               tBsB(_, _, _, stage));
        } else {
          copy(p.tma_b.with(smem.full[stage]), tBgB(_, _, _, kt), tBsB(_, _, _, stage));
        }
        if (++stage == kWgStages) {
          stage = 0;
          phase ^= 1U;
        }
      }
    }
    if constexpr (kClusterM > 1) {
      // The other blocks' consumers arrive on this block's barriers until
      // they have read the last stages: the block stays until every stage
      // is free again, so that no arrival reaches a block that has exited.
      for (int s = 0; s < kWgStages; ++s) {
        EmptyBarrier::wait(&smem.empty[stage], phase);
        if (++stage == kWgStages) {
          stage = 0;
          phase ^= 1U;
        }
      }
    }
    return;
  }

  // Consumers: warpgroups 1 and 2, threads 0..255 of the tiled MMA.
  cutlass::arch::warpgroup_reg_alloc<kWgConsumerRegisters>();
  const int mma_thread = static_cast<int>(threadIdx.x) - 128;
  typename Cfg::TiledMma mma;
  auto thr_mma = mma.get_slice(mma_thread);
  const Tensor tCsA = thr_mma.partition_A(sA);                      // (MMA,MMA_M,MMA_K,P)
  const Tensor tCsB = thr_mma.partition_B(sB);                      // (MMA,MMA_N,MMA_K,P)
  const Tensor tCrA = thr_mma.make_fragment_A(tCsA);                // GMMA descriptors
  const Tensor tCrB = thr_mma.make_fragment_B(tCsB);                // GMMA descriptors
  Tensor acc = partition_fragment_C(mma, take<0, 2>(TileShape{}));  // (MMA,MMA_M,MMA_N) f32
  const Tensor tCcC = thr_mma.partition_C(make_identity_tensor(take<0, 2>(TileShape{})));
  static_assert(decltype(size<2>(tCrA))::value == kWgBK / 16, "four k steps of 16 a stage");

  // A stage is free once the wgmma reading it have retired: every consumer
  // thread says so alone, or, in a cluster, one thread a warpgroup on every
  // block's barrier (a warpgroup's wgmma retire together).
  const bool releases = kClusterM == 1 || mma_thread % 128 == 0;
  const auto release_stage = [&](int s) {
    if constexpr (kClusterM == 1) {
      EmptyBarrier::arrive(&smem.empty[s]);
    } else {
      CUTE_UNROLL
      for (int block = 0; block < kClusterM; ++block) {
        EmptyBarrier::arrive(&smem.empty[s], static_cast<std::uint32_t>(block),
                             static_cast<std::uint32_t>(releases));
      }
    }
  };
  int stage = 0;
  std::uint32_t phase = 0;
  for (int tile = first_tile; tile < tiles; tile += tile_stride) {
    int tm = 0;
    int tn = 0;
    int batch = 0;
    wgmma_tile(tile, cluster_rows, p.tiles_n, tm, tn, batch);
    tm = tm * kClusterM + rank;

    // The first k tile overwrites the accumulators (scale-out zero on its
    // first k step), the others add to them.
    mma.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(acc);
    FullBarrier::wait(&smem.full[stage], phase);
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
      gemm(mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), acc);
      mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    int release = stage;
    if (++stage == kWgStages) {
      stage = 0;
      phase ^= 1U;
    }
    warpgroup_fence_operand(acc);
    for (int kt = 1; kt < k_tiles; ++kt) {
      FullBarrier::wait(&smem.full[stage], phase);
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      gemm(mma, tCrA(_, _, _, stage), tCrB(_, _, _, stage), acc);
      warpgroup_commit_batch();
      // The previous k tile's wgmma have retired: its stage is free.
      warpgroup_wait<1>();
      warpgroup_fence_operand(acc);
      release_stage(release);
      release = stage;
      if (++stage == kWgStages) {
        stage = 0;
        phase ^= 1U;
      }
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    release_stage(release);

    const std::int64_t m0 = static_cast<std::int64_t>(tm) * kWgBM;
    const std::int64_t n0 = static_cast<std::int64_t>(tn) * kWgBN;
    const bool plain =
        args.beta == 0.0F && args.bias.data == nullptr && args.activation == SgemmActivation::none;
    if (plain && p.c_vectors) {
      const int group = mma_thread / 128;
      if (args.c.dtype == DType::bf16) {
        wgmma_epilogue_staged<__nv_bfloat16>(args, acc, tCcC, smem.staged[group], group,
                                             mma_thread % 128, m0, n0, batch);
      } else {
        wgmma_epilogue_staged<__half>(args, acc, tCcC, smem.staged[group], group, mma_thread % 128,
                                      m0, n0, batch);
      }
    } else if (args.c.col_stride == 1) {
      const int group = mma_thread / 128;
      wgmma_epilogue_staged_general(args, acc, tCcC, reinterpret_cast<float*>(smem.staged[group]),
                                    group, mma_thread % 128, m0, n0, batch);
    } else if (plain) {
      wgmma_epilogue<true>(args, p.c_pairs, acc, tCcC, m0, n0, batch);
    } else {
      wgmma_epilogue<false>(args, p.c_pairs, acc, tCcC, m0, n0, batch);
    }
  }
#elif defined(__CUDA_ARCH__)
  // This image was compiled without sm_90a's features (the fatbinary holds
  // an sm_90a image too, which the driver takes on a 9.0 device): stop
  // loudly rather than leave C unwritten.
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    printf("loom hgemm wgmma: kernel image without sm_90a features; not built for this device\n");
  }
  __trap();
#endif
}

/// The clusters of `kernel` that fit on the current device at once (a
/// cluster's blocks share a GPC), asked once an instantiation and device;
/// `fallback` if the driver cannot say.
template <class Cfg, class Kernel>
int co_resident_clusters(Kernel kernel, int fallback) {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices]{};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return fallback;
  }
  const bool cached = device >= 0 && device < kDevices;
  if (cached) {
    if (const int n = known[device].load(std::memory_order_relaxed); n > 0) return n;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(Cfg::kClusterM * std::max(fallback, 1)));
  config.blockDim = dim3(kWgThreads);
  config.dynamicSmemBytes = Cfg::kSharedBytes;
  cudaLaunchAttribute shape{};
  shape.id = cudaLaunchAttributeClusterDimension;
  shape.val.clusterDim.x = static_cast<unsigned>(Cfg::kClusterM);
  shape.val.clusterDim.y = 1;
  shape.val.clusterDim.z = 1;
  config.attrs = &shape;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess || clusters <= 0) {
    (void)cudaGetLastError();
    return fallback;
  }
  if (cached) known[device].store(clusters, std::memory_order_relaxed);
  return clusters;
}

/// Launches one instantiation: the descriptors, the grid, the launch.
template <class T, bool AKMajor, bool BKMajor, int ClusterM = 1>
void launch_wgmma_layout(const HgemmArgs& p, StreamView stream, int sm_count) {
  using Cfg = WgmmaConfig<T, AKMajor, BKMajor, ClusterM>;
  using Params = typename Cfg::Params;
  // Not re-pointable (see the top of the file): the compiled graph must
  // capture this launch and copy bindings, never re-point it.
  static_assert(
      !loom::detail::declares_its_pointers<Params> && !loom::detail::pointer_free_class<Params>,
      "a TMA descriptor holds pointers that a compiled graph cannot re-point");
  static_assert(sizeof(Params) <= 4096, "kernel parameters are limited to 4 KiB");

  const int M = static_cast<int>(p.m);
  const int N = static_cast<int>(p.n);
  const int K = static_cast<int>(p.k);
  const int batch = static_cast<int>(p.batch);
  // A (M, K): K-major when row-major. B as (N, K): K-major when column-major.
  const std::int64_t lda = AKMajor ? p.a.row_stride : p.a.col_stride;
  const std::int64_t ldb = BKMajor ? p.b.col_stride : p.b.row_stride;
  // A batch extent of 1 for a shared operand; its stride is then never
  // applied, but TMA wants it a nonzero multiple of 16 bytes: one matrix.
  const auto batch_stride = [&](const BatchedMatrix& m, std::int64_t ld, std::int64_t outer) {
    return m.batch_stride != 0 ? m.batch_stride : ld * outer;
  };

  Params params;
  params.args = p;
  params.tiles_m = (M + kWgBM - 1) / kWgBM;
  params.tiles_n = (N + kWgBN - 1) / kWgBN;
  params.batches_a = p.a.batch_stride == 0 ? 1 : batch;
  params.batches_b = p.b.batch_stride == 0 ? 1 : batch;
  params.tma_a = Cfg::template make_tma<AKMajor, typename Cfg::SmemLayoutA>(
      static_cast<const T*>(p.a.data), M, K, params.batches_a, lda,
      batch_stride(p.a, lda, AKMajor ? M : K));
  params.tma_b = Cfg::template make_tma<BKMajor, typename Cfg::SmemLayoutB, ClusterM>(
      static_cast<const T*>(p.b.data), N, K, params.batches_b, ldb,
      batch_stride(p.b, ldb, BKMajor ? N : K));
  const std::size_t element = p.c.dtype == DType::f32 ? 4U : 2U;
  params.c_pairs = p.c.col_stride == 1 && p.c.row_stride % 2 == 0 && p.c.batch_stride % 2 == 0 &&
                   reinterpret_cast<std::uintptr_t>(p.c.data) % (2 * element) == 0;
  params.c_vectors = (p.c.dtype == DType::bf16 || p.c.dtype == DType::f16) && p.c.col_stride == 1 &&
                     p.c.row_stride % 8 == 0 && p.c.batch_stride % 8 == 0 &&
                     reinterpret_cast<std::uintptr_t>(p.c.data) % 16 == 0;

  constexpr auto kernel = hgemm_wgmma_kernel<Cfg>;
  static std::atomic<std::uint64_t> opted_in{0};
  tensor_core::opt_in_shared_memory(kernel, Cfg::kSharedBytes, opted_in);
  if constexpr (ClusterM == 1) {
    const std::int64_t tiles = static_cast<std::int64_t>(params.tiles_m) * params.tiles_n *
                               static_cast<std::int64_t>(batch);
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(tiles, std::max(sm_count, 1)));
    loom::detail::launch_on_stream(stream, kernel, dim3(blocks), dim3(kWgThreads),
                                   Cfg::kSharedBytes, params);
  } else {
    const std::int64_t cluster_tiles =
        static_cast<std::int64_t>((params.tiles_m + ClusterM - 1) / ClusterM) * params.tiles_n *
        static_cast<std::int64_t>(batch);
    const int most = std::max(sm_count / ClusterM, 1);
    const int fit = std::min(co_resident_clusters<Cfg>(kernel, most), most);
    const auto clusters = std::min<std::int64_t>(cluster_tiles, fit);
    loom::detail::launch_on_stream_in_clusters(dim3(ClusterM, 1, 1), stream, kernel,
                                               dim3(static_cast<unsigned>(clusters * ClusterM)),
                                               dim3(kWgThreads), Cfg::kSharedBytes, params);
  }
}

/// The registers a thread of one instantiation takes in the image loaded
/// for the current device (hgemm.hpp, wgmma_kernel_registers).
template <class T>
int wgmma_registers() {
  cudaFuncAttributes attributes{};
  LOOM_KERNEL_CHECK(
      cudaFuncGetAttributes(&attributes, hgemm_wgmma_kernel<WgmmaConfig<T, true, false>>));
  return attributes.numRegs;
}

/// Launches the kernel for operand type T (hgemm_wgmma_fits holds): an A
/// whose contiguous dimension is M with a K-contiguous B runs as the
/// transposed problem C^T = B^T A^T, whose A is K-contiguous and whose B is
/// N-contiguous. `cluster`: in clusters of two blocks sharing B's tiles,
/// for A K-contiguous and B N-contiguous (both row-major, or both
/// column-major through the transposed problem) only, one instantiation a
/// type; the other layouts run without clusters.
template <class T>
void launch_wgmma(HgemmArgs p, StreamView stream, int sm_count, bool cluster) {
  const bool a_k = wgmma_contiguous(p.a) == WgmmaContiguous::cols;  // A (M, K)
  const bool b_k = wgmma_contiguous(p.b) == WgmmaContiguous::rows;  // B (K, N)
  if (!a_k && b_k) {
    std::swap(p.m, p.n);
    std::swap(p.a, p.b);
    std::swap(p.a.row_stride, p.a.col_stride);
    std::swap(p.b.row_stride, p.b.col_stride);
    std::swap(p.c.row_stride, p.c.col_stride);
    std::swap(p.bias.row_stride, p.bias.col_stride);
    if (cluster) {
      launch_wgmma_layout<T, true, false, 2>(p, stream, sm_count);
    } else {
      launch_wgmma_layout<T, true, false>(p, stream, sm_count);
    }
  } else if (a_k && b_k) {
    launch_wgmma_layout<T, true, true>(p, stream, sm_count);
  } else if (a_k && cluster) {
    launch_wgmma_layout<T, true, false, 2>(p, stream, sm_count);
  } else if (a_k) {
    launch_wgmma_layout<T, true, false>(p, stream, sm_count);
  } else {
    launch_wgmma_layout<T, false, false>(p, stream, sm_count);
  }
  LOOM_KERNEL_CHECK_LAUNCH("hgemm wgmma kernel launch");
}

}  // namespace
}  // namespace loom::kernels::hgemm_detail
