#pragma once
// CUDA's execution model, emulated on the CPU: for tests that run a kernel's
// own code (its .cuh) without a GPU, checking what a GPU run would of its
// index arithmetic, predicates and exchanges at small shapes. Timing and the
// memory model are not emulated (the GPU tests cover those).
//
//  - Every thread of a block is a std::thread; blocks run one after another
//    (so a kernel's __shared__ arrays, made static, are its block's).
//  - __syncthreads is a barrier of the block.
//  - Warp shuffles exchange through double-buffered slots and the block's
//    barrier: blocks of one warp (32 threads) only.
//  - atomicAdd is a plain addition: for kernels whose phases a test runs
//    thread by thread, one at a time, never under run_grid.
//
// Use: include the kernel's header first (it brings CUDA's, which define the
// qualifiers redefined here), then this, then put the kernel's namespace over
// these names before including its code:
//
//   #include "image/blur.hpp"
//   #include "support/emulated_cuda.hpp"
//   namespace loom::kernels::blur_detail { using namespace loom::emulated; }
//   #include "image/blur_stream.cuh"

#include <cuda_runtime.h>

#include <array>
#include <barrier>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

namespace loom::emulated {

inline thread_local uint3 threadIdx{};
inline thread_local uint3 blockIdx{};
inline dim3 blockDim;
inline dim3 gridDim;

namespace state {
inline std::barrier<>* block_barrier = nullptr;
// Shuffle k writes buffer k % 2; a lane can reach shuffle k + 2 only after
// every lane has passed shuffle k + 1's barrier, so after it read shuffle k.
inline std::array<std::array<unsigned, 32>, 2> exchange{};
inline thread_local unsigned shuffles = 0;
}  // namespace state

inline void __syncthreads() { state::block_barrier->arrive_and_wait(); }

inline unsigned shuffle_from(unsigned value, int source) {
  const auto lane = static_cast<int>(threadIdx.x);
  auto& slots = state::exchange[state::shuffles++ % 2];
  slots[static_cast<std::size_t>(lane)] = value;
  state::block_barrier->arrive_and_wait();
  return source >= 0 && source < 32 ? slots[static_cast<std::size_t>(source)] : value;
}

inline unsigned __shfl_up_sync(unsigned /*mask*/, unsigned value, int delta) {
  const int lane = static_cast<int>(threadIdx.x);
  return shuffle_from(value, lane - delta >= 0 ? lane - delta : lane);
}

inline unsigned __shfl_down_sync(unsigned /*mask*/, unsigned value, int delta) {
  const int lane = static_cast<int>(threadIdx.x);
  return shuffle_from(value, lane + delta < 32 ? lane + delta : lane);
}

inline float __shfl_xor_sync(unsigned /*mask*/, float value, int lane_mask) {
  const int lane = static_cast<int>(threadIdx.x);
  return std::bit_cast<float>(shuffle_from(std::bit_cast<unsigned>(value), lane ^ lane_mask));
}

// Byte i of the result is byte (selector nibble i) of the 8 bytes y:x.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned selector) {
  const std::uint64_t bytes = (static_cast<std::uint64_t>(y) << 32) | x;
  unsigned out = 0;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned pick = (selector >> (4 * i)) & 7U;
    out |= static_cast<unsigned>((bytes >> (8 * pick)) & 0xFFU) << (8 * i);
  }
  return out;
}

inline unsigned atomicAdd(unsigned* address, unsigned value) {
  const unsigned old = *address;
  *address = old + value;
  return old;
}

inline int atomicAdd(int* address, int value) {
  const int old = *address;
  *address = old + value;
  return old;
}

/// kernel() on every thread of every block of `grid`: one std::thread per
/// thread of a block, walking the blocks together, with a barrier between
/// blocks (their static "shared" arrays are reused).
inline void run_grid(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  blockDim = block;
  gridDim = grid;
  const unsigned threads = block.x * block.y * block.z;
  // On the heap: the global the emulated barrier calls reach must not point
  // at a local (g++ 13 rejects that even when it is reset before return).
  auto barrier = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(threads));
  state::block_barrier = barrier.get();
  std::vector<std::thread> team;
  team.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      threadIdx = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
      state::shuffles = 0;
      for (unsigned bz = 0; bz < grid.z; ++bz) {
        for (unsigned by = 0; by < grid.y; ++by) {
          for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx = uint3{bx, by, bz};
            kernel();
            barrier->arrive_and_wait();
          }
        }
      }
    });
  }
  for (auto& th : team) th.join();
  state::block_barrier = nullptr;
}

}  // namespace loom::emulated
