#pragma once
// CUDA's execution model, emulated on the CPU: for tests that run a kernel's
// own code (its .cuh) without a GPU, checking what a GPU run would of its
// index arithmetic, predicates and exchanges at small shapes. Timing and the
// memory model are not emulated (the GPU tests cover those).
//
//  - Every thread of a block is a fiber (emulated_fibers.hpp: all on the
//    calling thread, one at a time, switching where one waits); blocks run
//    one after another (so a kernel's __shared__ arrays, made static, are
//    its block's).
//  - __syncthreads is a barrier of the block; __syncwarp, of the warp.
//  - Warp shuffles exchange through double-buffered slots of their warp and
//    a barrier of the warp's threads (threads 32 w .. 32 w + 31 of a block):
//    every lane of a warp must reach every shuffle, as __shfl_sync with a
//    full mask requires; the warps of a block need not shuffle together.
//  - atomicAdd is a plain addition: for kernels whose phases a test runs
//    thread by thread, one at a time, never under run_grid.
//  - Thread-block clusters (run_clusters): the blocks of one cluster run at
//    once, each with its own barrier and warps; cooperative_groups'
//    this_cluster() (as `cg`) has block_rank, num_blocks, sync (a barrier
//    of the cluster, also in halves: barrier_arrive, barrier_wait) and
//    map_shared_rank. A cluster kernel declares its
//    shared memory with LOOM_CLUSTER_BLOCK_SHARED, which gives each block of
//    a cluster its own object (a plain __shared__ array is one static for
//    all); clusters run one after another.
//  - LOOM_EMULATED_CUDA is defined, for kernel code that must know.
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
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "support/emulated_fibers.hpp"

#define LOOM_EMULATED_CUDA 1
#define LOOM_CLUSTER_BLOCK_SHARED(type, name) \
  type& name = ::loom::emulated::cluster_block_shared<type>()

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

// A barrier of emulated threads: a thread that arrives before the last
// waits as a fiber (yields) until the last one arrives.
class Barrier {
 public:
  using arrival_token = std::uint64_t;
  explicit Barrier(std::ptrdiff_t count) : count_(count) {}
  arrival_token arrive() {
    const arrival_token token = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
    }
    fibers::made_progress();
    return token;
  }
  void wait(arrival_token token) {
    while (generation_ == token) fibers::yield();
  }
  void arrive_and_wait() { wait(arrive()); }

 private:
  std::ptrdiff_t count_;
  std::ptrdiff_t arrived_ = 0;
  arrival_token generation_ = 0;
};

namespace state {
// This thread's block's barrier and warps (set by run_grid and run_clusters).
inline thread_local Barrier* block_barrier = nullptr;
// A warp of the block: its threads' barrier and exchange slots. Shuffle k
// writes buffer k % 2; a lane can reach shuffle k + 2 only after every lane
// of its warp has passed shuffle k + 1's barrier, so after it read shuffle k.
struct Warp {
  explicit Warp(std::ptrdiff_t lanes) : barrier(lanes) {}
  Barrier barrier;
  std::array<std::array<unsigned, 32>, 2> exchange{};
};
inline thread_local std::vector<std::unique_ptr<Warp>>* warps = nullptr;
inline thread_local unsigned shuffles = 0;
inline thread_local int thread_rank = 0;  // threadIdx linearized, as CUDA numbers a block's threads
// The cluster run_clusters runs: its barrier, its size, and this thread's
// block's rank in it.
inline Barrier* cluster_barrier = nullptr;
inline unsigned cluster_blocks = 1;
inline thread_local unsigned cluster_rank = 0;
// This thread's arrival on the cluster's barrier (barrier_arrive), until it
// waits (barrier_wait).
inline thread_local std::optional<Barrier::arrival_token> cluster_arrival;
// What each emulated thread has of its own: the globals above, while it runs.
struct ThreadState {
  uint3 thread_idx{};
  uint3 block_idx{};
  Barrier* block_barrier = nullptr;
  std::vector<std::unique_ptr<Warp>>* warps = nullptr;
  unsigned shuffles = 0;
  int thread_rank = 0;
  unsigned cluster_rank = 0;
  std::optional<Barrier::arrival_token> cluster_arrival;
};
// Every LOOM_CLUSTER_BLOCK_SHARED object: block r's at base + r * pitch.
struct SharedObjects {
  const char* base;
  std::size_t pitch;
};
inline std::mutex shared_mutex;
inline std::vector<SharedObjects> shared_objects;
}  // namespace state

inline constexpr unsigned kMaxClusterBlocks = 16;

// The objects of one LOOM_CLUSTER_BLOCK_SHARED type, one a block of a cluster.
template <class T>
struct ClusterBlockObjects {
  std::array<T, kMaxClusterBlocks> objects{};
  ClusterBlockObjects() {
    const std::lock_guard lock(state::shared_mutex);
    state::shared_objects.push_back({reinterpret_cast<const char*>(objects.data()), sizeof(T)});
  }
};

template <class T>
T& cluster_block_shared() {
  static ClusterBlockObjects<T> all;
  return all.objects[state::cluster_rank];
}

inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }
inline void __stwb(uint4* p, uint4 v) { *p = v; }

namespace cg {
struct cluster_group {
  unsigned block_rank() const { return state::cluster_rank; }
  unsigned num_blocks() const { return state::cluster_blocks; }
  void sync() const {
    if (state::cluster_arrival) throw std::logic_error("sync: a barrier_arrive has no wait yet");
    state::cluster_barrier->arrive_and_wait();
  }
  /// sync() in two halves, as CUDA's: arrive now, wait later (for the
  /// phase this thread arrived on). Arriving twice before a wait is an
  /// error, as on the device.
  void barrier_arrive() const {
    if (state::cluster_arrival) throw std::logic_error("barrier_arrive: arrived already");
    state::cluster_arrival.emplace(state::cluster_barrier->arrive());
  }
  void barrier_wait() const {
    if (!state::cluster_arrival)
      throw std::logic_error("barrier_wait: no barrier_arrive before it");
    state::cluster_barrier->wait(std::move(*state::cluster_arrival));
    state::cluster_arrival.reset();
  }
  /// `p`, in this block's LOOM_CLUSTER_BLOCK_SHARED object, moved to block
  /// `rank`'s object.
  template <class T>
  T* map_shared_rank(T* p, unsigned rank) const {
    const auto* c = reinterpret_cast<const char*>(p);
    const std::lock_guard lock(state::shared_mutex);
    for (const auto& o : state::shared_objects) {
      if (c >= o.base && c < o.base + o.pitch * kMaxClusterBlocks) {
        const auto offset = static_cast<std::size_t>(c - o.base) % o.pitch;
        return reinterpret_cast<T*>(const_cast<char*>(o.base + rank * o.pitch + offset));
      }
    }
    throw std::logic_error("map_shared_rank: not in a LOOM_CLUSTER_BLOCK_SHARED object");
  }
};
inline cluster_group this_cluster() { return {}; }
}  // namespace cg

inline void __syncthreads() {
  if (state::block_barrier == nullptr) throw std::logic_error("__syncthreads outside run_grid");
  state::block_barrier->arrive_and_wait();
}

// The caller's warp; outside a run there is none.
inline state::Warp& current_warp() {
  if (state::warps == nullptr) throw std::logic_error("a warp operation outside run_grid");
  return *(*state::warps)[static_cast<std::size_t>(state::thread_rank / 32)];
}

inline int lane_id() { return state::thread_rank % 32; }

// `value` as lane `source` of this thread's warp holds it; a source outside
// the warp's lanes reads the caller's own value.
inline unsigned shuffle_from(unsigned value, int source) {
  const int lane = lane_id();
  auto& warp = current_warp();
  auto& slots = warp.exchange[state::shuffles++ % 2];
  slots[static_cast<std::size_t>(lane)] = value;
  warp.barrier.arrive_and_wait();
  return source >= 0 && source < 32 ? slots[static_cast<std::size_t>(source)] : value;
}

// A barrier of the caller's warp (every lane must reach it, as with a full
// mask on a GPU), which orders the warp's shared-memory accesses.
inline void __syncwarp(unsigned /*mask*/ = 0xFFFFFFFFU) {
  current_warp().barrier.arrive_and_wait();
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

/// The warps of a block of `threads` threads.
inline std::unique_ptr<std::vector<std::unique_ptr<state::Warp>>> detail_make_warps(
    unsigned threads) {
  auto warps = std::make_unique<std::vector<std::unique_ptr<state::Warp>>>();
  for (unsigned first = 0; first < threads; first += 32) {
    warps->push_back(
        std::make_unique<state::Warp>(static_cast<std::ptrdiff_t>(std::min(threads - first, 32U))));
  }
  return warps;
}

/// The caller's own thread-local state, put back when a run ends (however
/// it ends): the fibers leave theirs in the globals, pointing at freed
/// barriers.
class KeepCallerThreadState {
 public:
  KeepCallerThreadState() { save(kept_); }
  ~KeepCallerThreadState() { restore(kept_); }
  KeepCallerThreadState(const KeepCallerThreadState&) = delete;
  KeepCallerThreadState& operator=(const KeepCallerThreadState&) = delete;

  static void save(state::ThreadState& s) {
    s.thread_idx = threadIdx;
    s.block_idx = blockIdx;
    s.block_barrier = state::block_barrier;
    s.warps = state::warps;
    s.shuffles = state::shuffles;
    s.thread_rank = state::thread_rank;
    s.cluster_rank = state::cluster_rank;
    s.cluster_arrival = state::cluster_arrival;
  }
  static void restore(const state::ThreadState& s) {
    threadIdx = s.thread_idx;
    blockIdx = s.block_idx;
    state::block_barrier = s.block_barrier;
    state::warps = s.warps;
    state::shuffles = s.shuffles;
    state::thread_rank = s.thread_rank;
    state::cluster_rank = s.cluster_rank;
    state::cluster_arrival = s.cluster_arrival;
  }

 private:
  state::ThreadState kept_;
};

/// The switch hooks that keep each emulated thread's globals its own.
inline fibers::SwitchHooks detail_thread_state_hooks(std::vector<state::ThreadState>& saved) {
  return fibers::SwitchHooks{[&saved](unsigned i) { KeepCallerThreadState::save(saved[i]); },
                             [&saved](unsigned i) { KeepCallerThreadState::restore(saved[i]); }};
}

/// kernel() on every thread of every block of `grid`: one fiber per thread
/// of a block, walking the blocks together, with a barrier between blocks
/// (their static "shared" arrays are reused).
inline void run_grid(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  blockDim = block;
  gridDim = grid;
  const unsigned threads = block.x * block.y * block.z;
  // On the heap: the global the emulated barrier calls reach must not point
  // at a local (g++ 13 rejects that even when it is reset before return).
  auto barrier = std::make_unique<Barrier>(static_cast<std::ptrdiff_t>(threads));
  auto warps = detail_make_warps(threads);
  std::vector<state::ThreadState> saved(threads);
  const KeepCallerThreadState keep;
  fibers::run(
      threads,
      [&](unsigned t) {
        state::block_barrier = barrier.get();
        state::warps = warps.get();
        state::cluster_rank = 0;
        state::cluster_arrival.reset();
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
      },
      detail_thread_state_hooks(saved));
}

/// kernel() on every thread of a one-dimensional grid of thread-block
/// clusters of `cluster` blocks (grid.x a multiple of it): the blocks of a
/// cluster run at once (one fiber per thread of each), clusters one after
/// another, with a barrier of the cluster between them.
inline void run_clusters(dim3 grid, dim3 block, unsigned cluster,
                         const std::function<void()>& kernel) {
  if (cluster == 0 || cluster > kMaxClusterBlocks || grid.x % cluster != 0 || grid.y != 1 ||
      grid.z != 1) {
    throw std::invalid_argument("run_clusters: grid.x must be whole clusters of 1..16 blocks");
  }
  blockDim = block;
  gridDim = grid;
  const unsigned threads = block.x * block.y * block.z;
  std::vector<std::unique_ptr<Barrier>> barriers;
  std::vector<std::unique_ptr<std::vector<std::unique_ptr<state::Warp>>>> warps;
  for (unsigned b = 0; b < cluster; ++b) {
    barriers.push_back(std::make_unique<Barrier>(static_cast<std::ptrdiff_t>(threads)));
    warps.push_back(detail_make_warps(threads));
  }
  auto cluster_barrier = std::make_unique<Barrier>(static_cast<std::ptrdiff_t>(threads * cluster));
  state::cluster_barrier = cluster_barrier.get();
  state::cluster_blocks = cluster;
  struct Reset {
    ~Reset() {
      state::cluster_barrier = nullptr;
      state::cluster_blocks = 1;
    }
  } reset;
  std::vector<state::ThreadState> saved(static_cast<std::size_t>(threads) * cluster);
  const KeepCallerThreadState keep;
  fibers::run(
      threads * cluster,
      [&](unsigned i) {
        const unsigned b = i / threads;
        const unsigned t = i % threads;
        state::block_barrier = barriers[b].get();
        state::warps = warps[b].get();
        state::cluster_rank = b;
        state::cluster_arrival.reset();
        threadIdx = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        state::thread_rank = static_cast<int>(t);
        state::shuffles = 0;
        for (unsigned first = 0; first < grid.x; first += cluster) {
          blockIdx = uint3{first + b, 0, 0};
          kernel();
          cluster_barrier->arrive_and_wait();
        }
      },
      detail_thread_state_hooks(saved));
}

}  // namespace loom::emulated
