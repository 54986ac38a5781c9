// The CPU emulation of CUDA threads that the kernels' emulated tests run on
// (support/emulated_cuda.hpp, over the fibers of emulated_fibers.hpp): each
// thread keeps its own indices across the switches, barriers and shuffles
// exchange what a GPU's would, and a kernel that throws or never meets its
// barrier fails the run instead of hanging it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/emulated_cuda.hpp"

namespace {

namespace emu = loom::emulated;

TEST(EmulatedCuda, EachThreadKeepsItsIndicesAcrossBarriers) {
  const dim3 grid(3, 2);
  const dim3 block(8, 4, 2);  // 64 threads: two warps
  std::vector<int> seen(3 * 2 * 64, -1);
  emu::run_grid(grid, block, [&] {
    const auto before = emu::threadIdx;
    const auto block_before = emu::blockIdx;
    emu::__syncthreads();
    emu::__syncwarp();
    emu::__syncthreads();
    // Every other thread ran in between: the indices must still be ours.
    EXPECT_EQ(before.x, emu::threadIdx.x);
    EXPECT_EQ(before.y, emu::threadIdx.y);
    EXPECT_EQ(before.z, emu::threadIdx.z);
    EXPECT_EQ(block_before.x, emu::blockIdx.x);
    EXPECT_EQ(block_before.y, emu::blockIdx.y);
    const unsigned t = emu::threadIdx.x + 8 * (emu::threadIdx.y + 4 * emu::threadIdx.z);
    const unsigned b = emu::blockIdx.x + 3 * emu::blockIdx.y;
    seen[b * 64 + t] = static_cast<int>(b * 64 + t);
  });
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i));
}

TEST(EmulatedCuda, SharedMemoryIsOrderedByTheBlockBarrier) {
  // Each thread writes its slot, then reads its neighbour's after the
  // barrier: every read sees the write of this block, not the last one's.
  std::vector<unsigned> got(2 * 96);
  emu::run_grid(dim3(2), dim3(96), [&] {
    static std::array<unsigned, 96> slots;
    const unsigned t = emu::threadIdx.x;
    slots[t] = 1000 * emu::blockIdx.x + t;
    emu::__syncthreads();
    got[96 * emu::blockIdx.x + t] = slots[(t + 1) % 96];
    emu::__syncthreads();
  });
  for (unsigned b = 0; b < 2; ++b) {
    for (unsigned t = 0; t < 96; ++t) EXPECT_EQ(got[96 * b + t], 1000 * b + (t + 1) % 96);
  }
}

TEST(EmulatedCuda, ShufflesExchangeWithinEachWarp) {
  std::vector<unsigned> down(64), up(64), any(64), x(64);
  emu::run_grid(dim3(1), dim3(64), [&] {
    const unsigned t = emu::threadIdx.x;
    const unsigned lane = t % 32;
    const unsigned v = 100 * t;
    down[t] = emu::__shfl_down_sync(0xFFFFFFFFU, v, 3);
    up[t] = emu::__shfl_up_sync(0xFFFFFFFFU, v, 5);
    any[t] = emu::__shfl_sync(0xFFFFFFFFU, v, static_cast<int>(31 - lane));
    x[t] = static_cast<unsigned>(emu::__shfl_xor_sync(0xFFFFFFFFU, static_cast<float>(v), 1));
  });
  for (unsigned t = 0; t < 64; ++t) {
    const unsigned lane = t % 32;
    const unsigned warp = t - lane;
    EXPECT_EQ(down[t], 100 * (lane + 3 < 32 ? t + 3 : t)) << t;
    EXPECT_EQ(up[t], 100 * (lane >= 5 ? t - 5 : t)) << t;
    EXPECT_EQ(any[t], 100 * (warp + 31 - lane)) << t;
    EXPECT_EQ(x[t], 100 * (warp + (lane ^ 1U))) << t;
  }
}

TEST(EmulatedCuda, ClusterBarriersOrderTheBlocksOfACluster) {
  // Block r of each cluster writes its value, arrives, waits, and reads
  // the next block's object through map_shared_rank.
  struct Slot {
    unsigned value = 0;
  };
  std::vector<unsigned> got(8);
  emu::run_clusters(dim3(8), dim3(32), 4, [&] {
    LOOM_CLUSTER_BLOCK_SHARED(Slot, mine);
    const auto cluster = emu::cg::this_cluster();
    const unsigned rank = cluster.block_rank();
    if (emu::threadIdx.x == 0) mine.value = 10 * emu::blockIdx.x + rank;
    cluster.barrier_arrive();
    cluster.barrier_wait();
    const unsigned next = (rank + 1) % cluster.num_blocks();
    if (emu::threadIdx.x == 0) got[emu::blockIdx.x] = cluster.map_shared_rank(&mine, next)->value;
    cluster.sync();
  });
  for (unsigned b = 0; b < 8; ++b) {
    const unsigned first = b - b % 4;
    const unsigned next = first + (b % 4 + 1) % 4;
    EXPECT_EQ(got[b], 10 * next + next % 4) << b;
  }
}

TEST(EmulatedCuda, AThrowingThreadFailsTheRunWithItsError) {
  const auto run = [] {
    emu::run_grid(dim3(2), dim3(64), [] {
      emu::__syncthreads();
      if (emu::blockIdx.x == 1 && emu::threadIdx.x == 17) {
        throw std::runtime_error("thread 17 of block 1");
      }
      emu::__syncthreads();
    });
  };
  try {
    run();
    FAIL() << "the run returned";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "thread 17 of block 1");
  }
}

TEST(EmulatedCuda, TheFirstErrorThrownIsTheOneRethrown) {
  // Thread 3 throws after the barrier, thread 40 before it: 40's comes first
  // in time, though 3 is the lower-numbered thread.
  try {
    emu::run_grid(dim3(1), dim3(64), [] {
      if (emu::threadIdx.x == 40) throw std::runtime_error("thread 40");
      emu::__syncthreads();
      if (emu::threadIdx.x == 3) throw std::runtime_error("thread 3");
    });
    FAIL() << "the run returned";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "thread 40");
  }
}

TEST(EmulatedCuda, TheCallersOwnIndicesSurviveARun) {
  // A test may run a kernel's phases thread by thread, setting the indices
  // itself around a run: the run leaves them as they were.
  emu::threadIdx = uint3{7, 1, 0};
  emu::blockIdx = uint3{5, 0, 0};
  emu::run_grid(dim3(2), dim3(64), [] { emu::__syncthreads(); });
  EXPECT_EQ(emu::threadIdx.x, 7U);
  EXPECT_EQ(emu::threadIdx.y, 1U);
  EXPECT_EQ(emu::blockIdx.x, 5U);
  // And outside a run there is still no block to wait with.
  EXPECT_THROW(emu::__syncthreads(), std::logic_error);
  emu::threadIdx = uint3{};
  emu::blockIdx = uint3{};
}

TEST(EmulatedCuda, AShuffleALaneNeverReachesIsADeadlockNotAHang) {
  // Lane 0 leaves before the shuffle its warp waits in: on a GPU, undefined;
  // here, an error once no thread can move.
  try {
    emu::run_grid(dim3(1), dim3(32), [] {
      if (emu::threadIdx.x == 0) return;
      (void)emu::__shfl_down_sync(0xFFFFFFFFU, 1U, 1);
    });
    FAIL() << "the run returned";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("wait at barriers"), std::string::npos) << e.what();
  }
  // The emulation is usable again afterwards.
  unsigned sum = 0;
  emu::run_grid(dim3(1), dim3(32), [&] { sum += emu::__shfl_down_sync(0xFFFFFFFFU, 1U, 1); });
  EXPECT_EQ(sum, 32U);
}

TEST(EmulatedCuda, ABarrierOutsideARunIsAnError) {
  emu::Barrier barrier(2);
  EXPECT_THROW(barrier.arrive_and_wait(), std::logic_error);
}

}  // namespace
