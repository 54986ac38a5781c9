#pragma once
// An owning CUDA event. By default timing is disabled, which makes record and
// wait cheaper; timing events are for the tracer and benchmarks.

#include <loom/cuda_interop.hpp>

namespace loom::detail {

enum class EventTiming { disabled, enabled };

class Event {
 public:
  /// @throws CudaError, NoDevice.
  explicit Event(int device, EventTiming timing = EventTiming::disabled);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  EventView view() const noexcept { return EventView(event_); }
  int device() const noexcept { return device_; }
  bool timing() const noexcept { return timing_ == EventTiming::enabled; }

  /// Captures the work submitted to `stream` so far.
  void record(StreamView stream);
  /// Makes `stream` wait for the captured work, without blocking the host.
  void make_wait(StreamView stream) const;
  /// True when the captured work has completed (or nothing was recorded). Never blocks.
  bool completed() const;
  /// Blocks until the captured work has completed. Not for the scheduling thread.
  void synchronize() const;
  /// Milliseconds between `start` and this event; both must be timing events
  /// that have completed. @throws InvalidArgument for non-timing events.
  float elapsed_ms_since(const Event& start) const;

 private:
  void destroy() noexcept;

  cudaEvent_t event_ = nullptr;
  int device_ = 0;
  EventTiming timing_ = EventTiming::disabled;
};

}  // namespace loom::detail
