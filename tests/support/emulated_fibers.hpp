#pragma once
// The threads of an emulated CUDA block (emulated_cuda.hpp), as fibers: n
// bodies run on the calling thread, each on its own stack, one at a time;
// a body that waits at a Barrier hands the thread to the next one.
//
// Why not std::thread: a block's 32 to 1024 threads meet at a barrier every
// shuffle, and on a machine with a few cores (two in CI) each meeting costs
// every thread a trip through the OS scheduler. Fibers switch in user space:
// the same tests, in order, deterministic, many times faster.
//
// Limits, where fibers differ from threads: a body must not wait at a
// barrier inside a catch handler or while unwinding (the C++ runtime keeps
// one stack of caught exceptions a thread, not a fiber); and the fibers a
// failed run leaves waiting are dropped with their stacks, their locals'
// destructors not run.
//
// Under AddressSanitizer and ThreadSanitizer every switch is announced
// (their fiber interfaces), so that both follow the stacks. Each switch
// orders the fibers for ThreadSanitizer, as running them one at a time does:
// it sees no races between emulated threads (compute-sanitizer's racecheck
// covers a kernel's shared memory on the GPU).
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define LOOM_FIBERS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOM_FIBERS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define LOOM_FIBERS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOOM_FIBERS_TSAN 1
#endif
#endif
#if defined(LOOM_FIBERS_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(LOOM_FIBERS_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace loom::emulated::fibers {

// Large enough for the CuTe emulations' register fragments with
// AddressSanitizer's redzones; pages are committed only when touched.
inline constexpr std::size_t kStackBytes = std::size_t{1} << 20;

/// What the caller keeps of a fiber across switches: the thread-local
/// state a body sees (threadIdx and the like) lives in globals of the one
/// real thread, so the team saves it when a fiber leaves and restores it
/// when the fiber comes back.
struct SwitchHooks {
  std::function<void(unsigned)> save;     // after fiber i left
  std::function<void(unsigned)> restore;  // before fiber i resumes
};

namespace detail {

struct Fiber {
  ucontext_t context{};
  void* stack = nullptr;  // the mapping: a guard page, then the stack
  std::size_t mapped = 0;
  bool done = false;
#if defined(LOOM_FIBERS_TSAN)
  void* tsan = nullptr;
#endif
  char* stack_bottom() const { return static_cast<char*>(stack) + page(); }
  std::size_t stack_size() const { return mapped - page(); }
  static std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
};

struct Team {
  const std::function<void(unsigned)>* body = nullptr;
  std::vector<Fiber> fibers;
  unsigned current = 0;
  bool in_fiber = false;
  std::uint64_t progress = 0;  // barrier arrivals, for telling a deadlock
  std::exception_ptr first_error;
  ucontext_t main{};
#if defined(LOOM_FIBERS_ASAN)
  const void* main_bottom = nullptr;
  std::size_t main_size = 0;
#endif
#if defined(LOOM_FIBERS_TSAN)
  void* main_tsan = nullptr;
#endif
};

inline thread_local Team* team = nullptr;

// After a switch into a fiber: tells AddressSanitizer it happened (and
// learns the scheduler's stack, to switch back to).
inline void arrived_in_fiber([[maybe_unused]] void* fake_stack) {
#if defined(LOOM_FIBERS_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack, &team->main_bottom, &team->main_size);
#endif
}

// From the running fiber to the scheduler; `exiting`: never to come back.
inline void switch_to_scheduler(bool exiting) {
  Fiber& self = team->fibers[team->current];
#if defined(LOOM_FIBERS_ASAN)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(exiting ? nullptr : &fake_stack, team->main_bottom,
                                 team->main_size);
#else
  (void)exiting;
#endif
#if defined(LOOM_FIBERS_TSAN)
  __tsan_switch_to_fiber(team->main_tsan, 0);
#endif
  swapcontext(&self.context, &team->main);
#if defined(LOOM_FIBERS_ASAN)
  arrived_in_fiber(fake_stack);
#endif
}

inline void fiber_entry() {
  arrived_in_fiber(nullptr);
  Fiber& self = team->fibers[team->current];
  try {
    (*team->body)(team->current);
  } catch (...) {
    if (!team->first_error) team->first_error = std::current_exception();
  }
  self.done = true;
  switch_to_scheduler(/*exiting=*/true);
}

// From the scheduler into fiber i, until it waits or ends.
inline void resume(unsigned i) {
  Fiber& f = team->fibers[i];
  team->current = i;
  team->in_fiber = true;
#if defined(LOOM_FIBERS_ASAN)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, f.stack_bottom(), f.stack_size());
#endif
#if defined(LOOM_FIBERS_TSAN)
  __tsan_switch_to_fiber(f.tsan, 0);
#endif
  swapcontext(&team->main, &f.context);
#if defined(LOOM_FIBERS_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  team->in_fiber = false;
}

inline void make_fiber(Fiber& f) {
  f.mapped = kStackBytes + Fiber::page();
  f.stack = mmap(nullptr, f.mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (f.stack == MAP_FAILED) {
    f.stack = nullptr;
    throw std::runtime_error("emulated threads: no memory for a fiber's stack");
  }
  // A guard page below the stack: an overflow faults instead of writing on.
  mprotect(f.stack, Fiber::page(), PROT_NONE);
  if (getcontext(&f.context) != 0) throw std::runtime_error("emulated threads: getcontext failed");
  f.context.uc_stack.ss_sp = f.stack_bottom();
  f.context.uc_stack.ss_size = f.stack_size();
  f.context.uc_link = nullptr;  // fiber_entry never returns: it switches out
  makecontext(&f.context, &fiber_entry, 0);
  // The stack stays the fiber's, but the context must not name it: ASan's
  // swapcontext interceptor clears the shadow of the target context's stack,
  // which would wipe the red zones of every frame live on it at each switch.
  f.context.uc_stack = {};
#if defined(LOOM_FIBERS_TSAN)
  f.tsan = __tsan_create_fiber(0);
#endif
}

inline void free_fiber(Fiber& f) {
#if defined(LOOM_FIBERS_TSAN)
  if (f.tsan != nullptr) __tsan_destroy_fiber(f.tsan);
  f.tsan = nullptr;
#endif
  if (f.stack != nullptr) munmap(f.stack, f.mapped);
  f.stack = nullptr;
}

}  // namespace detail

/// Called by a fiber that must wait: the others run until it is resumed.
/// Outside a team there is no one to wait for: that is a deadlock.
inline void yield() {
  if (detail::team == nullptr || !detail::team->in_fiber) {
    throw std::logic_error("emulated threads: a wait outside run_grid would never end");
  }
  detail::switch_to_scheduler(/*exiting=*/false);
}

/// Marks progress (a barrier arrival) for the deadlock check.
inline void made_progress() {
  if (detail::team != nullptr) ++detail::team->progress;
}

/// body(0), ..., body(n - 1), each as a fiber on this thread, round robin
/// from one wait to the next, until all return. The first exception a body
/// throws is rethrown here once every fiber has ended or waits for good;
/// fibers that wait when none can make progress are a deadlock (an error).
inline void run(unsigned n, const std::function<void(unsigned)>& body, const SwitchHooks& hooks) {
  if (detail::team != nullptr) throw std::logic_error("emulated threads: run inside run");
  detail::Team t;
  t.body = &body;
  t.fibers.resize(n);
  struct Cleanup {
    detail::Team& t;
    ~Cleanup() {
      for (auto& f : t.fibers) detail::free_fiber(f);
      detail::team = nullptr;
    }
  } cleanup{t};
  for (auto& f : t.fibers) detail::make_fiber(f);
#if defined(LOOM_FIBERS_TSAN)
  t.main_tsan = __tsan_get_current_fiber();
#endif
  detail::team = &t;
  unsigned live = n;
  bool deadlock = false;
  while (live > 0 && !deadlock) {
    const std::uint64_t before = t.progress;
    bool ended = false;
    for (unsigned i = 0; i < n; ++i) {
      if (t.fibers[i].done) continue;
      if (hooks.restore) hooks.restore(i);
      detail::resume(i);
      if (hooks.save) hooks.save(i);
      if (t.fibers[i].done) {
        --live;
        ended = true;
      }
    }
    deadlock = live > 0 && !ended && t.progress == before;
  }
  if (t.first_error) std::rethrow_exception(t.first_error);
  if (deadlock) {
    throw std::logic_error("emulated threads: " + std::to_string(live) +
                           " threads wait at barriers the others never reach");
  }
}

}  // namespace loom::emulated::fibers
