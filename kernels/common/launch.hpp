#pragma once
// How loom's own kernels are launched: launch_on_stream() is
// kernel<<<grid, block, shared_bytes, stream>>>(args...), or, while a
// compiled graph describes a task on this thread, the launch's description
// (loom/op.hpp, LaunchRecord), which the graph adds as a kernel node and a
// binding may re-point. An op whose run_cuda() launches only through here
// may claim Op::launches_through_loom().

#include <loom/cuda_interop.hpp>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace loom::detail {

/// Where this thread's launches go while a compiled graph describes a task;
/// null otherwise.
TaskResources* thread_launch_describer() noexcept;

/// Makes `resources` the describer of this thread's launches for its scope.
class ThreadLaunchDescriber {
 public:
  explicit ThreadLaunchDescriber(TaskResources* resources) noexcept;
  ~ThreadLaunchDescriber();
  ThreadLaunchDescriber(const ThreadLaunchDescriber&) = delete;
  ThreadLaunchDescriber& operator=(const ThreadLaunchDescriber&) = delete;

 private:
  TaskResources* previous_;
};

/// A launch error throws a loom::CudaError naming the task.
template <class... Params, class... Args>
void launch_on_stream(cudaStream_t stream, void (*kernel)(Params...), dim3 grid, dim3 block,
                      std::size_t shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "launch_on_stream: the kernel takes a different number of arguments");
  const void* function = reinterpret_cast<const void*>(kernel);
  std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
  if (TaskResources* describer = thread_launch_describer(); describer != nullptr) {
    describer->describe_launch(record_launch(function, grid, block, shared_bytes, values));
    return;
  }
  const cudaError_t rc = launch_values(function, grid, block, shared_bytes, stream, values);
  if (rc != cudaSuccess) throw_launch_error(rc, "cudaLaunchKernelEx");
}

}  // namespace loom::detail
