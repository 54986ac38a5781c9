#include "cuda/cuda_upstreams.hpp"

#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/stream.hpp"

#include <loom/device.hpp>
#include <loom/error.hpp>

#include <string>

namespace loom::detail {
namespace {

class DeviceUpstream final : public Upstream {
 public:
  explicit DeviceUpstream(int device) : device_(device) {}
  void* allocate(std::size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    LOOM_CUDA_CHECK(rc);
    return p;
  }
  void deallocate(void* p, std::size_t /*bytes*/) noexcept override {
    try {
      DeviceGuard guard(device_);
      LOOM_CUDA_ASSERT(cudaFree(p));
    } catch (...) {
      // The device is gone; there is nothing left to free.
    }
  }
  std::string name() const override { return "device " + std::to_string(device_); }

 private:
  int device_;
};

class PinnedUpstream final : public Upstream {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t rc = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    LOOM_CUDA_CHECK(rc);
    return p;
  }
  void deallocate(void* p, std::size_t /*bytes*/) noexcept override {
    LOOM_CUDA_ASSERT(cudaFreeHost(p));
  }
  std::string name() const override { return "pinned host"; }
};

}  // namespace

std::unique_ptr<Upstream> make_device_upstream(int device) {
  return std::make_unique<DeviceUpstream>(device);
}

std::unique_ptr<Upstream> make_pinned_upstream() { return std::make_unique<PinnedUpstream>(); }

CudaEventSource::CudaEventSource() { pools_.resize(static_cast<std::size_t>(device_count())); }

EventPool& CudaEventSource::pool_for(int device) {
  auto& pool = pools_.at(static_cast<std::size_t>(device));
  if (!pool) pool = std::make_unique<EventPool>(device);
  return *pool;
}

EventSource::Marker CudaEventSource::record(StreamKey stream) {
  auto native = reinterpret_cast<cudaStream_t>(stream);
  int device = 0;
  LOOM_CUDA_CHECK(cudaStreamGetDevice(native, &device));
  std::lock_guard lock(mutex_);
  auto lease = pool_for(device).acquire();
  lease->record(StreamView(native));
  std::size_t slot = 0;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(lease);
  } else {
    slot = slots_.size();
    slots_.push_back(std::move(lease));
    free_slots_.reserve(slots_.size());
  }
  return slot + 1;
}

bool CudaEventSource::completed(Marker marker) {
  std::lock_guard lock(mutex_);
  return slots_.at(marker - 1)->completed();
}

bool CudaEventSource::stream_idle(StreamKey stream) {
  return detail::stream_idle(StreamView(reinterpret_cast<cudaStream_t>(stream)));
}

void CudaEventSource::release(Marker marker) noexcept {
  std::lock_guard lock(mutex_);
  slots_[marker - 1].release();
  free_slots_.push_back(marker - 1);
}

}  // namespace loom::detail
