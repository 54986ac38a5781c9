#pragma once
// How the executor copies: the runtime's copy paths, behind an interface so
// that the scheduler (which decides when a copy runs, and on which stream)
// knows nothing of how the bytes move.

#include <loom/completion.hpp>
#include <loom/cuda_interop.hpp>
#include <loom/tensor.hpp>

#include <cstddef>
#include <memory>

namespace loom::detail {

struct Storage;

/// The copy paths a run's copy tasks take, on a given stream.
class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  /// A stream-ordered copy (pinned <-> device, device <-> device) on `stream`.
  virtual void enqueue(const Tensor& src, const Tensor& dst, StreamView stream) = 0;
  /// A staged copy (pageable <-> device), completing on its own.
  virtual Completion start(const Tensor& src, const Tensor& dst) = 0;
  /// Refuses a copy no path can make (mismatched tensors, layouts the path
  /// cannot take), saying what was expected. @throws InvalidArgument.
  virtual void check(const Tensor& src, const Tensor& dst) const = 0;
  /// A copy between host spaces, on the calling thread.
  virtual void host_copy(const Tensor& src, const Tensor& dst) = 0;
  /// Device scratch memory for work on `stream`, given back when released.
  virtual std::shared_ptr<Storage> workspace(std::size_t bytes, StreamView stream) = 0;
};

}  // namespace loom::detail
