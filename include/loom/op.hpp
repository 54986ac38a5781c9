#pragma once
/// @file op.hpp
/// The interface every built-in kernel op implements, and that users may
/// implement for their own (or, simpler, write a loom::kernel_task: see
/// kernel_task.hpp): an op names the tensors it reads and writes, validates
/// them, and carries a CUDA implementation and, optionally, a CPU one. The
/// graph derives dependencies from reads() and writes(); the executor calls
/// run_cpu() on the CPU backend and run_cuda() on the CUDA backend.
///
/// Completion and failure. run_cuda() runs on loom's scheduling thread with
/// the device already current; it only enqueues work on the context's stream
/// and must not block or wait (Future::wait there throws). A device task
/// counts as completed when its device work has finished, as seen through an
/// event on its stream, not when run_cuda() returns. It fails, by name, when
/// run_cuda() throws (a loom::Error keeps its type; any other exception
/// becomes a loom::Error), when its launch left an error (loom reads
/// cudaGetLastError() after every run_cuda()), or when its device work
/// faults; its dependants are then cancelled and independent tasks go on.
/// Work enqueued before a failure is still watched to its end. run_cpu()
/// runs on a host worker; an exception from it fails the task likewise.

#include <loom/export.hpp>
#include <loom/tensor.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

struct DeviceProperties;

namespace detail {
/// One kernel launch as loom::launch describes it: the kernel, its
/// configuration and each parameter's bytes. While a compiled graph is
/// built, a task whose op launches through loom::launch only
/// (Op::launches_through_loom) is described instead of captured: each
/// record becomes a kernel node added directly to the graph, and stays
/// beside it, so that a rebinding run can point the node at the caller's
/// tensors (a parameter that is a pointer into a placeholder is moved to the
/// same place in the bound tensor) instead of copying into the placeholder.
struct LaunchRecord {
  struct Param {
    std::size_t offset = 0;  ///< into bytes
    std::size_t size = 0;
    bool pointer = false;  ///< a pointer type (the only parameters ever re-pointed)
  };
  const void* function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  std::size_t shared_bytes = 0;
  std::vector<Param> params;
  std::vector<unsigned char> bytes;
  /// Offsets into bytes of the pointers inside class parameters, which the
  /// class declares (loom_pointer_offsets()): re-pointed like pointer parameters.
  std::vector<std::size_t> inner_pointers;
  /// Every parameter is a pointer, an arithmetic type, an enum, a class
  /// that holds no pointer (empty, or declaring loom_pointer_free) or one
  /// that declares where its pointers are: no parameter hides a pointer, so
  /// re-pointing is complete.
  bool plain = true;
};

/// What the executor lends a running device task (scratch memory, cached
/// device properties). Implemented by loom.
class TaskResources {
 public:
  virtual void* workspace(std::size_t bytes) = 0;
  virtual const DeviceProperties& properties() = 0;
  /// True while a compiled graph describes a task: loom::launch hands each
  /// launch to describe_launch() instead of making it.
  virtual bool describes_launches() const noexcept { return false; }
  virtual void describe_launch(LaunchRecord&& /*record*/) {}

 protected:
  ~TaskResources() = default;
};
}  // namespace detail

/// Where an op's CUDA implementation runs: a device and a stream. The CUDA
/// stream is available through loom/cuda_interop.hpp (loom::cuda_stream).
class LOOM_API ExecutionContext {
 public:
  ExecutionContext(int device, void* stream, detail::TaskResources* resources = nullptr) noexcept
      : device_(device), stream_(stream), resources_(resources) {}
  /// The device, already current on the calling thread.
  int device() const noexcept { return device_; }
  /// The cudaStream_t, type-erased to keep this header CUDA-free.
  void* native_stream() const noexcept { return stream_; }
  /// `bytes` of device memory from loom's pool for this task's stream,
  /// valid until the task's device work has finished, then given back.
  /// @throws OutOfMemory; InvalidArgument outside a running task.
  void* workspace(std::size_t bytes) const;
  /// The device's properties, read once and cached. @throws as device_properties().
  const DeviceProperties& properties() const;
  /// loom's own (loom::launch): whether launches are described rather than
  /// made (a compiled graph being built), and where a description goes.
  bool describes_launches() const noexcept {
    return resources_ != nullptr && resources_->describes_launches();
  }
  void describe_launch(detail::LaunchRecord&& record) const {
    if (resources_ != nullptr) resources_->describe_launch(std::move(record));
  }

 private:
  int device_;
  void* stream_;
  detail::TaskResources* resources_;
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
  /// Checks shapes and dtypes; @throws InvalidArgument saying what was
  /// expected. The default accepts everything.
  virtual void validate() const {}
  /// False when the op has no CPU implementation: the CPU backend then
  /// rejects a graph holding it at submit, naming the task. The default is
  /// true; an op that does not override run_cpu() should return false.
  virtual bool has_cpu() const noexcept { return true; }
  /// Runs on the calling thread, on host memory. The default throws
  /// InvalidArgument (no CPU implementation).
  virtual void run_cpu() const;
  /// Enqueues the work on ctx's stream, on device memory; must not block.
  virtual void run_cuda(const ExecutionContext& ctx) const = 0;
  /// True when run_cuda() may be captured into a CUDA graph (Runtime::compile):
  /// it enqueues only stream-ordered work on ctx's stream (kernel launches,
  /// cudaMemcpyAsync, cudaMemsetAsync, event records and waits), makes no
  /// synchronizing call (no cudaStreamSynchronize, cudaDeviceSynchronize,
  /// cudaMalloc or cudaFree, no synchronous cudaMemcpy), reads no result
  /// back, and enqueues the same work with the same arguments each time for
  /// the same tensors (a capture is replayed as recorded). Setting function
  /// attributes or asking the occupancy calculator is fine; so is
  /// ctx.workspace(), which a compiled graph gives the task once and keeps.
  /// An op that returns false makes compile() fail, naming the task; it
  /// still runs in graphs submitted eagerly. The default is true.
  virtual bool capturable() const noexcept { return true; }
  /// True when run_cuda() launches its work through loom::launch only
  /// (loom/cuda_interop.hpp), nothing else on the stream: a compiled graph
  /// then asks run_cuda() to describe its launches and adds their kernel
  /// nodes itself (cheaper than a capture), and a rebinding run can re-point
  /// them at the bound tensors without a copy. An op that claims it and
  /// enqueues other work is found out at compile and captured instead. Kernel
  /// tasks and most built-in ops (their kernels go through
  /// detail::launch_on_stream) return true; the default is false.
  virtual bool launches_through_loom() const noexcept { return false; }
  /// Non-null for a collective (loom/collective.hpp): the communicator it
  /// belongs to (and for the replay of a compiled CUDA graph that holds
  /// collectives: the first one's). A collective is an op like any other (it reads and writes
  /// tensors, runs on the CPU or enqueues on a stream), except that it runs
  /// on the communication stream, where the collectives of every
  /// communicator are issued in the order they were submitted, overlapping
  /// compute. The default is null: an ordinary op.
  virtual const void* communicator() const noexcept { return nullptr; }
  /// True when the op runs on a host worker even on the CUDA backend:
  /// run_cpu() is called there once the tasks it depends on have finished,
  /// device work included, and it may block (a collective of the mpi
  /// backend waits there for the other processes, staging device tensors
  /// through host memory). Such an op cannot be compiled. The default is
  /// false.
  virtual bool runs_on_host() const noexcept { return false; }
  /// For device work that waits on other processes (a collective): asked by
  /// the scheduling thread, without blocking for long, while the task's
  /// device work has not finished, `waited` since it was issued. An op that
  /// gives up returns why, having made its device work end (a collective
  /// aborts its communicator); the task then fails with a CommError saying
  /// so. The default never gives up.
  virtual std::string overdue(std::chrono::nanoseconds /*waited*/) const { return {}; }
};

using OpPtr = std::shared_ptr<const Op>;

}  // namespace loom
