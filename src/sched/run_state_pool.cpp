// Recycling RunStates (run_state.hpp: make_run_state). A run's state is
// shared with the Futures of the run, which may live anywhere and as long as
// they like, so it cannot belong to a runtime: a process-wide pool keeps
// spare states, with the capacity of their vectors (a run's reports, its
// continuations), and spare shared_ptr control blocks. Both are bounded;
// past the bound a state is freed as usual. The pools are never destroyed
// (a Future may be dropped during static destruction).

#include "sched/run_state.hpp"

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace loom::detail {
namespace {

constexpr std::size_t kMaxSpare = 256;

// Up to kMaxSpare spare pointers under a mutex. Its room is reserved up
// front, so keeping one never allocates.
template <class T>
class SpareList {
 public:
  SpareList() { free_.reserve(kMaxSpare); }
  /// A spare one, or null.
  T* take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return nullptr;
    T* spare = free_.back();
    free_.pop_back();
    return spare;
  }
  /// Keeps `spare`, unless the list is full (false: the caller frees it).
  bool keep(T* spare) noexcept {
    std::lock_guard lock(mutex_);
    if (free_.size() == free_.capacity()) return false;
    free_.push_back(spare);
    return true;
  }

 private:
  std::mutex mutex_;
  std::vector<T*> free_;
};

// Spare blocks of one size and alignment (one per control-block type).
template <std::size_t Size, std::size_t Align>
class BlockPool {
  static_assert(Align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "plain operator new aligns it");

 public:
  static BlockPool& instance() {
    static auto* pool = new BlockPool;  // never destroyed: see above
    return *pool;
  }
  void* take() {
    if (void* block = spare_.take()) return block;
    return ::operator new(Size);
  }
  void give(void* block) noexcept {
    if (!spare_.keep(block)) ::operator delete(block, Size);
  }

 private:
  BlockPool() = default;
  SpareList<void> spare_;
};

// The allocator of the control blocks (allocate(1) of one type only).
template <class T>
struct PooledAllocator {
  using value_type = T;
  PooledAllocator() noexcept = default;
  template <class U>
  PooledAllocator(const PooledAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(BlockPool<sizeof(T), alignof(T)>::instance().take());
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1) {
      ::operator delete(p, n * sizeof(T));
      return;
    }
    BlockPool<sizeof(T), alignof(T)>::instance().give(p);
  }
  template <class U>
  bool operator==(const PooledAllocator<U>&) const noexcept {
    return true;
  }
};

// Spare states, emptied but with their vectors' capacity.
class StatePool {
 public:
  static StatePool& instance() {
    static auto* pool = new StatePool;  // never destroyed: see above
    return *pool;
  }
  RunState* take() {
    if (RunState* state = spare_.take()) return state;
    auto* state = new RunState;
    // Room for the runs it follows, now: the pool is the process's, so a
    // state that has only ever led may come back as a follower at any time,
    // and would allocate then, in steady state.
    state->follows.reserve(kRoomForLeaders);
    return state;
  }
  // The last reference went: nothing else can see the state now.
  void give(RunState* state) noexcept {
    // What it holds goes now (errors, names, continuations' captures), on
    // the thread that dropped the last reference, as it would have.
    state->done = false;
    state->published.store(false, std::memory_order_relaxed);
    state->waits_on_device = false;
    state->error = nullptr;
    state->reports.clear();
    state->names.reset();
    state->cancel_requested.store(false, std::memory_order_relaxed);
    state->continuations.clear();
    state->lifecycle.reset();
    state->wake_scheduler = nullptr;
    state->follows.clear();
    state->parked_ends = nullptr;
    state->end_handoff.store(RunState::kNoEndWaiter, std::memory_order_relaxed);
    state->end_run = nullptr;
    state->end_machine = nullptr;
    state->end_of = nullptr;
    if (!spare_.keep(state)) delete state;
  }

 private:
  StatePool() = default;
  SpareList<RunState> spare_;
};

struct GiveBack {
  void operator()(RunState* state) const noexcept { StatePool::instance().give(state); }
};

}  // namespace

std::shared_ptr<RunState> make_run_state() {
  // Should the control block's allocation throw, the constructor gives the
  // state back itself (it calls the deleter).
  return std::shared_ptr<RunState>(StatePool::instance().take(), GiveBack{},
                                   PooledAllocator<RunState>{});
}

}  // namespace loom::detail
