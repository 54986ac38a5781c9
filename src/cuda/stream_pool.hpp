#pragma once
// Pools of non-blocking streams for one device, one pool per loom priority,
// mapped onto the device's CUDA stream priority range. Steady state creates
// no stream: a released stream is the next one handed out.

#include "core/recycling_pool.hpp"
#include "cuda/stream.hpp"

#include <loom/priority.hpp>

#include <array>
#include <cstddef>
#include <memory>

namespace loom::detail {

class StreamPool {
 public:
  using Lease = RecyclingPool<Stream>::Lease;

  /// @throws NoDevice, CudaError.
  explicit StreamPool(int device);

  /// An exclusive stream of the given priority. Thread-safe.
  Lease acquire(Priority priority = Priority::normal);
  /// Creates streams until `count` of `priority` are cached. Thread-safe.
  void reserve(Priority priority, std::size_t count);

  int device() const noexcept { return device_; }
  /// The CUDA priority that `priority` maps to on this device.
  int cuda_priority(Priority priority) const noexcept {
    return cuda_priorities_[static_cast<std::size_t>(priority_index(priority))];
  }
  /// Streams created, over all priorities.
  std::size_t created() const;
  std::size_t in_use() const;

 private:
  int device_;
  std::array<int, kPriorityLevels> cuda_priorities_{};
  std::array<std::unique_ptr<RecyclingPool<Stream>>, kPriorityLevels> pools_;
};

}  // namespace loom::detail
