#pragma once
/// @file completion.hpp
/// The completion of an asynchronous operation (a copy, later a task run):
/// poll it, wait for it, and learn its error.
///
/// Thread-safety: every member may be called from any thread, concurrently.

#include <loom/export.hpp>

#include <chrono>
#include <exception>
#include <memory>

namespace loom {

namespace detail {
struct CompletionState;
struct CompletionAccess;
}  // namespace detail

class LOOM_API Completion {
 public:
  /// An already-completed completion.
  Completion();

  /// True once the operation has finished (successfully or not). Never blocks.
  bool ready() const;
  /// Blocks until the operation finishes; rethrows its error as a loom::Error.
  void wait() const;
  /// Waits at most `timeout`; true if it finished. Does not throw the error.
  bool wait_for(std::chrono::nanoseconds timeout) const;
  /// The operation's error, or null. Only meaningful once ready().
  std::exception_ptr error() const;

 private:
  friend struct detail::CompletionAccess;  // loom's way in (the constructor below, the state)
  explicit Completion(std::shared_ptr<detail::CompletionState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::CompletionState> state_;
};

}  // namespace loom
