#pragma once
// A kernel fault (an illegal address, a device-side assert) leaves the CUDA
// context unusable: every later call fails with the same error. The first
// such error poisons the runtime; from then on submits rethrow it, and work
// that may never report its end (a staged copy) is given up on with it.
//
// Thread-safety: every member from any thread.

#include <atomic>
#include <exception>
#include <mutex>

namespace loom::detail {

class Poison {
 public:
  bool poisoned() const noexcept { return poisoned_.load(std::memory_order_acquire); }
  /// The poisoning error; null while there is none.
  std::exception_ptr error() const;
  /// Rethrows the poisoning error, if there is one.
  void throw_if_poisoned() const;
  /// Records `error` as poisoning when it is a sticky CUDA error (the first one wins).
  void note(const std::exception_ptr& error);

 private:
  mutable std::mutex mutex_;
  std::atomic<bool> poisoned_{false};
  std::exception_ptr error_;  // under mutex_
};

}  // namespace loom::detail
