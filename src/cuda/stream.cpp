#include "cuda/stream.hpp"

#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/object_counts.hpp"

#include <utility>

namespace loom::detail {

Stream::Stream(int device, int cuda_priority) : device_(device) {
  DeviceGuard guard(device);
  LOOM_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, cuda_priority));
  LOOM_CUDA_CHECK(cudaStreamGetPriority(stream_, &priority_));
  count_stream_created();
}

Stream::~Stream() { destroy(); }

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)),
      device_(other.device_),
      priority_(other.priority_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    destroy();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
    priority_ = other.priority_;
  }
  return *this;
}

void Stream::destroy() noexcept {
  if (stream_ == nullptr) return;
  // cudaStreamDestroy returns at once; work already queued still completes.
  LOOM_CUDA_ASSERT(cudaStreamDestroy(stream_));
  stream_ = nullptr;
  count_stream_destroyed();
}

bool Stream::idle() const { return stream_idle(view()); }

bool stream_idle(StreamView stream) {
  const cudaError_t rc = cudaStreamQuery(stream.native());
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  LOOM_CUDA_CHECK(rc);
  return true;
}

void Stream::synchronize() const { LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

}  // namespace loom::detail
