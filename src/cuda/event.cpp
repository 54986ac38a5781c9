#include "cuda/event.hpp"

#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/object_counts.hpp"

#include <loom/error.hpp>

#include <utility>

namespace loom::detail {

Event::Event(int device, EventTiming timing) : device_(device), timing_(timing) {
  DeviceGuard guard(device);
  const unsigned flags = timing == EventTiming::enabled ? cudaEventDefault : cudaEventDisableTiming;
  LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
  count_event_created();
}

Event::~Event() { destroy(); }

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(other.device_),
      timing_(other.timing_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    destroy();
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
    timing_ = other.timing_;
  }
  return *this;
}

void Event::destroy() noexcept {
  if (event_ == nullptr) return;
  LOOM_CUDA_ASSERT(cudaEventDestroy(event_));
  event_ = nullptr;
  count_event_destroyed();
}

void Event::record(StreamView stream) { LOOM_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::make_wait(StreamView stream) const {
  LOOM_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

bool Event::completed() const {
  const cudaError_t rc = cudaEventQuery(event_);
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  LOOM_CUDA_CHECK(rc);
  return true;
}

void Event::synchronize() const { LOOM_CUDA_CHECK(cudaEventSynchronize(event_)); }

float Event::elapsed_ms_since(const Event& start) const {
  if (!timing() || !start.timing()) {
    throw InvalidArgument("elapsed time needs two events created with EventTiming::enabled");
  }
  float ms = 0.0F;
  LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace loom::detail
