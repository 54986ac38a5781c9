#pragma once
/// @file kernel_task.hpp
/// Your own kernel as a task, in a few lines: a name, the tensors it reads
/// and writes (dependencies follow from them, as for any task), and a
/// callable that launches it. The callable gets a KernelContext: the stream
/// and device (already current), the device's cached properties, scratch
/// memory from loom's pool, and (with loom/cuda_interop.hpp) a checked
/// launch, loom::launch(k, kernel, grid, block, shared_bytes, args...).
/// An optional CPU implementation runs on the CPU backend; without one the
/// CPU backend rejects the graph at submit, naming the task.
///
/// @code
/// __global__ void saxpy(int n, float a, const float* x, float* y) { ... }
///
/// g.add(loom::kernel_task("saxpy", {x}, {y}, [=](loom::KernelContext& k) {
///   const int n = static_cast<int>(y.numel());
///   loom::launch(k, saxpy, dim3((n + 255) / 256), dim3(256), 0,
///                n, 2.0f, x.data_as<float>(), y.data_as<float>());
/// }));
/// @endcode
///
/// Completion and failure are an op's (op.hpp): the task is completed when
/// its device work has finished; a launch error, an exception or a device
/// fault fails it by name.
///
/// In a compiled graph (Runtime::compile) the launcher runs at compile only
/// (once, or more when it enqueues work other than loom::launch, which is
/// then captured as it is), while its launches become nodes of a CUDA
/// graph; a replay repeats those kernels with the arguments they had then,
/// and never calls the launcher again. (The CPU version, on the CPU backend, runs on
/// every replay.) So a launcher whose launches depend on something read at
/// launch time (a host value, a size, a pointer that changes) gives a
/// replay that does not follow it: mark such a task
/// KernelTaskOptions{.capturable = false}, and compile() refuses the graph,
/// naming the task (submit it eagerly instead).

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/tensor.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace loom {

struct DeviceProperties;

/// What a kernel task's launcher gets. Valid only during the call.
class KernelContext {
 public:
  explicit KernelContext(const ExecutionContext& ctx) noexcept : ctx_(ctx) {}
  /// The device the task runs on, already current on the calling thread.
  int device() const noexcept { return ctx_.device(); }
  /// The task's cudaStream_t, type-erased (loom::cuda_stream(k) gives it typed).
  void* native_stream() const noexcept { return ctx_.native_stream(); }
  /// The device's properties (SM count, shared memory, ...), cached.
  const DeviceProperties& properties() const { return ctx_.properties(); }
  /// `bytes` of device scratch memory, valid until the task's device work
  /// has finished, then given back to the pool. @throws OutOfMemory.
  void* workspace(std::size_t bytes) const { return ctx_.workspace(bytes); }
  /// loom's own (loom::launch): see ExecutionContext::describes_launches.
  bool describes_launches() const noexcept { return ctx_.describes_launches(); }
  void describe_launch(detail::LaunchRecord&& record) const {
    ctx_.describe_launch(std::move(record));
  }

 private:
  const ExecutionContext& ctx_;
};

/// Launches the task's kernels on its stream.
using KernelLauncher = std::function<void(KernelContext&)>;

/// How a kernel task may be used.
struct KernelTaskOptions {
  /// Whether compile() may capture the launcher's launches once and replay
  /// them (Op::capturable). False: compile() refuses a graph with the task,
  /// naming it; submit runs it as usual.
  bool capturable = true;
  /// Checks the task's inputs when a graph holding it is submitted or
  /// compiled, before anything runs: throw loom::InvalidArgument (or any
  /// exception) to refuse the graph, and the error names the task, as the
  /// built-in ops' checks do. Called on the submitting thread; may be empty.
  std::function<void()> validate = {};
};

/// A task running `cuda` on the CUDA backend and `cpu` (if given) on the CPU
/// backend. @throws InvalidArgument for an empty name or an empty launcher.
LOOM_API OpPtr kernel_task(std::string name, std::vector<Tensor> reads, std::vector<Tensor> writes,
                           KernelLauncher cuda, std::function<void()> cpu = {});

/// As above, with `options`, e.g. kernel_task("step", {x}, {y}, launch, cpu,
/// {.capturable = false}). @throws as above.
LOOM_API OpPtr kernel_task(std::string name, std::vector<Tensor> reads, std::vector<Tensor> writes,
                           KernelLauncher cuda, std::function<void()> cpu,
                           KernelTaskOptions options);

}  // namespace loom
