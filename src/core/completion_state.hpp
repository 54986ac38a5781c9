#pragma once
// The shared state behind a loom::Completion. Finished either by a producer
// calling finish() (a staging worker, a CUDA host callback) or, for work that
// is only a stream's, by an event whose completion is polled.

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>

namespace loom::detail {

struct CompletionState {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  /// For event-backed completions: non-blocking poll, and a blocking wait.
  std::function<bool()> poll;
  std::function<void()> block;

  void finish(std::exception_ptr e = nullptr) {
    {
      std::lock_guard lock(mutex);
      if (done) return;
      done = true;
      if (!error) error = std::move(e);
    }
    done_cv.notify_all();
  }
};

}  // namespace loom::detail
