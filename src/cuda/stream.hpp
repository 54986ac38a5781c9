#pragma once
// An owning CUDA stream. Non-blocking (it never synchronizes with the legacy
// default stream), bound to one device, with a CUDA priority.

#include <loom/cuda_interop.hpp>

namespace loom::detail {

/// True when all work submitted to `stream` so far has completed. Never
/// blocks. @throws CudaError for a failure the query reports.
bool stream_idle(StreamView stream);

class Stream {
 public:
  /// Creates a non-blocking stream on `device` with CUDA priority `cuda_priority`
  /// (clamped by CUDA to the device's range). @throws CudaError, NoDevice.
  Stream(int device, int cuda_priority);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  StreamView view() const noexcept { return StreamView(stream_); }
  int device() const noexcept { return device_; }
  int cuda_priority() const noexcept { return priority_; }

  /// True when all work submitted so far has completed. Never blocks.
  bool idle() const;
  /// Blocks until the stream's work is done. Not for the scheduling thread.
  void synchronize() const;

 private:
  void destroy() noexcept;

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  int priority_ = 0;
};

}  // namespace loom::detail
