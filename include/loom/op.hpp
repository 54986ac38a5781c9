#pragma once
/// @file op.hpp
/// The interface every built-in kernel op implements, and that users may
/// implement for their own: an op names the tensors it reads and writes,
/// validates them, and carries a CPU implementation and a CUDA one. The
/// graph derives dependencies from reads() and writes(); the executor calls
/// run_cpu() on the CPU backend and run_cuda() on the CUDA backend.

#include <loom/export.hpp>
#include <loom/tensor.hpp>

#include <memory>
#include <string_view>
#include <vector>

namespace loom {

/// Where an op's CUDA implementation runs: a device and a stream. The CUDA
/// stream is available through loom/cuda_interop.hpp (loom::cuda_stream).
class ExecutionContext {
 public:
  ExecutionContext(int device, void* stream) noexcept : device_(device), stream_(stream) {}
  int device() const noexcept { return device_; }
  /// The cudaStream_t, type-erased to keep this header CUDA-free.
  void* native_stream() const noexcept { return stream_; }

 private:
  int device_;
  void* stream_;
};

class LOOM_API Op {
 public:
  virtual ~Op() = default;
  /// The op's name, e.g. "vector_add"; a task's default name.
  virtual std::string_view name() const noexcept = 0;
  /// Tensors read. An in-place op lists the tensor in both reads and writes.
  virtual std::vector<Tensor> reads() const = 0;
  /// Tensors written.
  virtual std::vector<Tensor> writes() const = 0;
  /// Checks shapes and dtypes; @throws InvalidArgument saying what was expected.
  virtual void validate() const = 0;
  /// Runs on the calling thread, on host memory.
  virtual void run_cpu() const = 0;
  /// Enqueues the work on ctx's stream, on device memory; must not block.
  virtual void run_cuda(const ExecutionContext& ctx) const = 0;
};

using OpPtr = std::shared_ptr<const Op>;

}  // namespace loom
