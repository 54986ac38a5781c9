#pragma once
// A pool of events for one device. Events are recycled: re-recording an
// event that has been waited on is legal, so a steady state creates none.

#include "core/recycling_pool.hpp"
#include "cuda/event.hpp"

#include <cstddef>

namespace loom::detail {

class EventPool {
 public:
  using Lease = RecyclingPool<Event>::Lease;

  explicit EventPool(int device, EventTiming timing = EventTiming::disabled)
      : device_(device), pool_([device, timing] { return Event(device, timing); }) {}

  /// An exclusive event. Thread-safe. @throws CudaError, NoDevice.
  Lease acquire() { return pool_.acquire(); }
  /// Creates events until `count` are cached. Thread-safe.
  void reserve(std::size_t count) { pool_.reserve(count); }

  int device() const noexcept { return device_; }
  std::size_t created() const { return pool_.created(); }
  std::size_t in_use() const { return pool_.in_use(); }

 private:
  int device_;
  RecyclingPool<Event> pool_;
};

}  // namespace loom::detail
