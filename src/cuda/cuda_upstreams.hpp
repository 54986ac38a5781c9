#pragma once
// The CUDA upstreams of the caching pools, and the CUDA event source that
// gates cross-stream reuse.

#include "cuda/event_pool.hpp"
#include "memory/event_source.hpp"
#include "memory/upstream.hpp"

#include <memory>
#include <mutex>
#include <vector>

namespace loom::detail {

/// cudaMalloc on `device`; nullptr when the device is out of memory.
std::unique_ptr<Upstream> make_device_upstream(int device);
/// cudaHostAlloc (portable: usable from every device); nullptr when out of memory.
std::unique_ptr<Upstream> make_pinned_upstream();

/// Markers are pooled CUDA events, recorded on the stream's own device.
/// Thread-safe: one mutex around the marker table.
class CudaEventSource final : public EventSource {
 public:
  CudaEventSource();
  Marker record(StreamKey stream) override;
  bool completed(Marker marker) override;
  void release(Marker marker) noexcept override;
  bool stream_idle(StreamKey stream) override;

 private:
  EventPool& pool_for(int device);

  std::mutex mutex_;
  std::vector<std::unique_ptr<EventPool>> pools_;  // one a device, made on first use
  std::vector<EventPool::Lease> slots_;            // marker - 1 indexes a slot
  std::vector<std::size_t> free_slots_;
};

}  // namespace loom::detail
