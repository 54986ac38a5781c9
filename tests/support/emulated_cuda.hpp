#pragma once
// CUDA's execution model, emulated on the CPU: for tests that run a kernel's
// own code (its .cuh) without a GPU, checking what a GPU run would of its
// index arithmetic, predicates and exchanges at small shapes. Timing and the
// memory model are not emulated (the GPU tests cover those).
//
//  - Every thread of a block is a std::thread; blocks run one after another
//    (so a kernel's __shared__ arrays, made static, are its block's).
//  - __syncthreads is a barrier of the block.
//  - Warp shuffles exchange through double-buffered slots of their warp and
//    a barrier of the warp's threads (threads 32 w .. 32 w + 31 of a block):
//    every lane of a warp must reach every shuffle, as __shfl_sync with a
//    full mask requires; the warps of a block need not shuffle together.
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

#include <algorithm>
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
// A warp of the block: its threads' barrier and exchange slots. Shuffle k
// writes buffer k % 2; a lane can reach shuffle k + 2 only after every lane
// of its warp has passed shuffle k + 1's barrier, so after it read shuffle k.
struct Warp {
  explicit Warp(std::ptrdiff_t lanes) : barrier(lanes) {}
  std::barrier<> barrier;
  std::array<std::array<unsigned, 32>, 2> exchange{};
};
inline std::vector<std::unique_ptr<Warp>>* warps = nullptr;
inline thread_local unsigned shuffles = 0;
inline thread_local int thread_rank = 0;  // threadIdx linearized, as CUDA numbers a block's threads
}  // namespace state

inline void __syncthreads() { state::block_barrier->arrive_and_wait(); }

inline int lane_id() { return state::thread_rank % 32; }

// `value` as lane `source` of this thread's warp holds it; a source outside
// the warp's lanes reads the caller's own value.
inline unsigned shuffle_from(unsigned value, int source) {
  const int lane = lane_id();
  auto& warp = *(*state::warps)[static_cast<std::size_t>(state::thread_rank / 32)];
  auto& slots = warp.exchange[state::shuffles++ % 2];
  slots[static_cast<std::size_t>(lane)] = value;
  warp.barrier.arrive_and_wait();
  return source >= 0 && source < 32 ? slots[static_cast<std::size_t>(source)] : value;
}

inline unsigned __shfl_up_sync(unsigned /*mask*/, unsigned value, int delta) {
  const int lane = lane_id();
  return shuffle_from(value, lane - delta >= 0 ? lane - delta : lane);
}

inline unsigned __shfl_down_sync(unsigned /*mask*/, unsigned value, int delta) {
  const int lane = lane_id();
  return shuffle_from(value, lane + delta < 32 ? lane + delta : lane);
}

// As CUDA's (width 32): a source lane outside 0..31 is taken modulo 32.
inline unsigned __shfl_sync(unsigned /*mask*/, unsigned value, int source) {
  return shuffle_from(value, ((source % 32) + 32) % 32);
}

inline float __shfl_xor_sync(unsigned /*mask*/, float value, int lane_mask) {
  const int lane = lane_id();
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
  auto warps = std::make_unique<std::vector<std::unique_ptr<state::Warp>>>();
  for (unsigned first = 0; first < threads; first += 32) {
    warps->push_back(
        std::make_unique<state::Warp>(static_cast<std::ptrdiff_t>(std::min(threads - first, 32U))));
  }
  state::warps = warps.get();
  std::vector<std::thread> team;
  team.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      threadIdx = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
      state::thread_rank = static_cast<int>(t);
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
  state::warps = nullptr;
}

}  // namespace loom::emulated
