#pragma once
// The shared state behind a loom::Completion. Finished either by a producer
// calling finish() (a staging worker, a CUDA host callback, the executor at
// the end of a copy's run) or, for work that is only a stream's, by an event
// whose completion is polled.

#include <loom/completion.hpp>

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>

namespace loom::detail {

struct CompletionState {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  /// For event-backed completions: non-blocking poll, and a blocking wait.
  std::function<bool()> poll;
  std::function<void()> block;
  /// Called once by finish(), on the finishing thread (which may be a CUDA
  /// callback thread: it must not call CUDA) and under `mutex`: whoever sees
  /// `done` afterwards knows the call is over (its target may go away).
  std::function<void()> listener;

  void finish(std::exception_ptr e = nullptr) {
    {
      std::lock_guard lock(mutex);
      if (done) return;
      done = true;
      if (!error) error = std::move(e);
      if (listener) {
        listener();
        listener = nullptr;
      }
    }
    done_cv.notify_all();
  }

  /// Calls `fn` once the state is finished: later from finish(), or now.
  /// A null `fn` cancels the call set before.
  void on_finish(std::function<void()> fn) {
    std::lock_guard lock(mutex);
    if (!done) {
      listener = std::move(fn);
    } else if (fn) {
      fn();
    }
  }
};

/// loom's own way into a Completion's state.
struct CompletionAccess {
  static CompletionState& state(const Completion& c) noexcept { return *c.state_; }
  static Completion make(std::shared_ptr<CompletionState> state) {
    return Completion(std::move(state));
  }
};

}  // namespace loom::detail
