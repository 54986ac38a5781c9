#pragma once
// fused softmax, long rows on compute capability 9.0 and later, where x and
// y rows start on 16-byte boundaries and hold a whole number of 16 bytes:
// persistent clusters that stream rows through shared memory.
//
// A row is split into `cluster` slices, one a block of the cluster. Each
// cluster takes rows cluster_id, cluster_id + clusters, ... in turn, and
// each block keeps kStreamStages slices of its rows in shared memory: while
// it reduces and writes one row, bulk copies (cp.async.bulk) bring in the
// next two. The slice is read from global memory once; the maximum and the
// sum take two passes over shared memory, the blocks' (max, sum) pairs meet
// through distributed shared memory as the cluster-row kernel's do, and the
// output is written over the slice in shared memory and leaves by one bulk
// copy. So an SM's loads of later rows overlap its stores of earlier ones,
// where the one-row-a-cluster kernel loaded, reduced, then stored with
// nothing in flight between (0.72 of a copy at 64 x 262144 on an H100).
//
// Included by softmax.cu only (not the CPU emulation): its device code is
// bulk copies and transaction barriers.
#include "softmax/softmax_kernels.cuh"

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_tma.hpp>

#include <cstdint>

namespace loom::kernels::softmax_detail {
namespace {

constexpr int kStreamStages = 3;
constexpr int kStreamThreads = 512;
constexpr int kStreamMaxCluster = 16;  // a non-portable cluster size
// A slice is at most this many bytes: clusters grow (4, 8, 16 blocks) to
// bring it under kStreamSliceAim, and rows whose slice at 16 blocks is over
// kStreamMaxSlice take the cluster-row or online kernels.
constexpr std::int64_t kStreamSliceAim = 32 * 1024;
constexpr std::int64_t kStreamMaxSlice = 64 * 1024;
constexpr int kStreamMinCluster = 4;
// Stages start on 128-byte boundaries.
constexpr std::int64_t kStreamStageAlign = 128;

// Dynamic shared memory a block needs for slices of `slice_bytes`.
__host__ __device__ inline std::int64_t stream_stage_bytes(std::int64_t slice_bytes) {
  return (slice_bytes + kStreamStageAlign - 1) / kStreamStageAlign * kStreamStageAlign;
}

// The largest element of a 16-byte pack, and the pack's elements as floats.
template <class T>
__device__ __forceinline__ void unpack(const uint4& w, float (&v)[kVectorBytes / sizeof(T)]) {
  if constexpr (std::is_same_v<T, float>) {
    v[0] = __uint_as_float(w.x);
    v[1] = __uint_as_float(w.y);
    v[2] = __uint_as_float(w.z);
    v[3] = __uint_as_float(w.w);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = bf16_of(w, i);
  }
}

template <class T>
__device__ __forceinline__ uint4 pack(const float (&v)[kVectorBytes / sizeof(T)]) {
  if constexpr (std::is_same_v<T, float>) {
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]),
                      __float_as_uint(v[3]));
  } else {
    return make_uint4(bf16_pair_bits(v[0], v[1]), bf16_pair_bits(v[2], v[3]),
                      bf16_pair_bits(v[4], v[5]), bf16_pair_bits(v[6], v[7]));
  }
}

// The shared memory beside the stages.
struct StreamShared {
  std::uint64_t full[kStreamStages];   // a stage's bytes have landed
  MaxSum warps[kMaxThreads / kWarp];   // block_merge's partials
  MaxSum parts[2][kStreamMaxCluster];  // the cluster's pairs, by rank, a row of two alternating
};

// Grid: `clusters` clusters of `cluster` blocks (the launch's cluster
// shape), kStreamThreads threads a block, kStreamStages stages of
// stream_stage_bytes(slice_bytes) of dynamic shared memory. Block b of a
// cluster holds bytes [b * slice_bytes, (b + 1) * slice_bytes) of each of
// its rows (fewer in the last); the host makes every block's share
// non-empty and a multiple of 16 bytes.
template <class T>
__global__ void __launch_bounds__(kStreamThreads)
    softmax_streamed_rows(const T* gX, T* gY, std::int64_t rows, std::int64_t cols,
                          std::int64_t x_stride, std::int64_t y_stride, int slice_bytes) {
#if LOOM_SOFTMAX_CLUSTERS && !defined(LOOM_EMULATED_CUDA)
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kVec = kVectorBytes / static_cast<int>(sizeof(T));
  extern __shared__ __align__(kStreamStageAlign) unsigned char sStages[];
  __shared__ StreamShared shared;

  cg::cluster_group cluster = cg::this_cluster();
  // Waited for before the first remote write: by then every block of the
  // cluster runs, so its shared memory may be written.
  (void)cluster.barrier_arrive();
  const unsigned blocks = cluster.num_blocks();
  const unsigned rank = cluster.block_rank();
  const std::int64_t first_row = blockIdx.x / blocks;
  const std::int64_t row_step = gridDim.x / blocks;
  const std::int64_t row_bytes = cols * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t offset = static_cast<std::int64_t>(rank) * slice_bytes;
  const auto bytes = static_cast<std::uint32_t>(
      row_bytes - offset < slice_bytes ? row_bytes - offset : slice_bytes);
  const int packs = static_cast<int>(bytes / kVectorBytes);
  const std::int64_t stage_bytes = stream_stage_bytes(slice_bytes);
  const auto stage = [&](int it) {
    return reinterpret_cast<uint4*>(sStages + (it % kStreamStages) * stage_bytes);
  };
  const auto x_of = [&](std::int64_t r) {
    return reinterpret_cast<const unsigned char*>(gX + r * x_stride) + offset;
  };
  const auto y_of = [&](std::int64_t r) {
    return reinterpret_cast<unsigned char*>(gY + r * y_stride) + offset;
  };
  // Thread 0 alone issues the copies and waits on its own stores.
  const auto load = [&](int it, std::int64_t r) {
    std::uint64_t* full = &shared.full[it % kStreamStages];
    Barrier::arrive_and_expect_tx(full, bytes);
    cute::SM90_BULK_COPY_G2S::copy(x_of(r), full, stage(it), static_cast<std::int32_t>(bytes));
  };

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < kStreamStages; ++s) Barrier::init(&shared.full[s], 1);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  // Two rows ahead: the third stage is the one whose store may still be
  // reading it.
  if (threadIdx.x == 0) {
    for (int it = 0; it < kStreamStages - 1; ++it) {
      if (first_row + it * row_step < rows) load(it, first_row + it * row_step);
    }
  }

  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  int it = 0;
  for (std::int64_t r = first_row; r < rows; r += row_step, ++it) {
    Barrier::wait(&shared.full[it % kStreamStages],
                  static_cast<std::uint32_t>((it / kStreamStages) & 1));
    uint4* slice = stage(it);
    // This block's maximum, then its sum of exponentials shifted by it (0
    // where the block holds only -inf: its exponentials are 0, or NaN for a
    // NaN, which fmaxf passed over).
    float m = -INFINITY;
#pragma unroll 4
    for (int p = tid; p < packs; p += threads) {
      float v[kVec];
      unpack<T>(slice[p], v);
#pragma unroll
      for (int i = 0; i < kVec; ++i) m = fmaxf(m, v[i]);
    }
    const float shift = m == -INFINITY ? 0.0F : m * kLog2e;
    float s = 0.0F;
#pragma unroll 4
    for (int p = tid; p < packs; p += threads) {
      float v[kVec];
      unpack<T>(slice[p], v);
#pragma unroll
      for (int i = 0; i < kVec; ++i) s += exp_shifted(v[i], shift);
    }
    const MaxSum part = block_merge(MaxSum{m, s}, shared.warps);

    // The cluster's pairs: each block writes its own into every block's
    // shared memory, then one barrier; every block merges them in rank
    // order, so the row's (M, S) has the same bits in all. The pairs
    // alternate between two arrays: a block may still read this row's
    // while another writes the next row's.
    if (it == 0) cluster.barrier_wait();
    MaxSum* parts = shared.parts[it & 1];
    if (threadIdx.x == 0) {
      for (unsigned b = 0; b < blocks; ++b) cluster.map_shared_rank(parts, b)[rank] = part;
    }
    cluster.sync();
    MaxSum row{-INFINITY, 0.0F};
    for (unsigned b = 0; b < blocks; ++b) row = merge(row, parts[b]);
    // A row of -inf only has no distribution: NaN (as 0 * NaN below).
    const float factor = row.m == -INFINITY ? __int_as_float(0x7FC00000) : 1.0F / row.s;
    const float row_shift = row.m == -INFINITY ? 0.0F : row.m * kLog2e;

#pragma unroll 4
    for (int p = tid; p < packs; p += threads) {
      float v[kVec];
      unpack<T>(slice[p], v);
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[i] = exp_shifted(v[i], row_shift) * factor;
      slice[p] = pack<T>(v);
    }
    // The outputs leave by a bulk copy: make this thread's writes visible
    // to it, and wait for every thread's.
    cute::tma_store_fence();
    __syncthreads();
    if (threadIdx.x == 0) {
      cute::SM90_BULK_COPY_S2G::copy(slice, y_of(r), static_cast<std::int32_t>(bytes));
      cute::tma_store_arrive();
      // The row two ahead goes into the stage of the row before this one,
      // once that row's store has read it (all stores but this one).
      const std::int64_t ahead = r + (kStreamStages - 1) * row_step;
      if (ahead < rows) {
        cute::tma_store_wait<1>();
        load(it + kStreamStages - 1, ahead);
      }
    }
  }
  // The stores must have read shared memory before the block leaves, and
  // written global memory before the kernel ends.
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" : : : "memory");
    // After the last cluster barrier no block writes another's shared memory.
#else
  (void)gX;
  (void)gY;
  (void)rows;
  (void)cols;
  (void)x_stride;
  (void)y_stride;
  (void)slice_bytes;
  __trap();  // never launched: the host picks this kernel on 9.0 and later only
#endif
}

}  // namespace
}  // namespace loom::kernels::softmax_detail
