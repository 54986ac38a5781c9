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

/// As launch_on_stream, but the kernel may begin while the stream's previous
/// kernel still runs (programmatic dependent launch, sm_90 and up): it must
/// execute griddepcontrol.wait (wait_for_previous_kernel()) before it touches
/// anything that kernel writes. What the previous kernel itself waited for is
/// visible from the start. `early` false launches as launch_on_stream does
/// (a device without it). A compiled graph describes it as an ordinary node,
/// whose edge waits for the whole previous kernel: the wait returns at once.
template <class... Params, class... Args>
void launch_on_stream_early(bool early, cudaStream_t stream, void (*kernel)(Params...), dim3 grid,
                            dim3 block, std::size_t shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "launch_on_stream_early: the kernel takes a different number of arguments");
  if (!early || thread_launch_describer() != nullptr) {
    launch_on_stream(stream, kernel, grid, block, shared_bytes, std::forward<Args>(args)...);
    return;
  }
  std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  const cudaError_t rc = launch_values(reinterpret_cast<const void*>(kernel), grid, block,
                                       shared_bytes, stream, values, &overlap);
  if (rc != cudaSuccess) throw_launch_error(rc, "cudaLaunchKernelEx");
}

/// As launch_on_stream, in thread-block clusters of `cluster` blocks (sm_90
/// and up; grid a multiple of it). A compiled graph cannot add such a launch
/// as a kernel node (a node's parameters hold no cluster shape): described,
/// it is marked not plain, so that the graph captures the task instead, and
/// the capture keeps the launch's attribute.
template <class... Params, class... Args>
void launch_on_stream_in_clusters(dim3 cluster, cudaStream_t stream, void (*kernel)(Params...),
                                  dim3 grid, dim3 block, std::size_t shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "launch_on_stream_in_clusters: the kernel takes a different number of arguments");
  const void* function = reinterpret_cast<const void*>(kernel);
  std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
  if (TaskResources* describer = thread_launch_describer(); describer != nullptr) {
    LaunchRecord record = record_launch(function, grid, block, shared_bytes, values);
    record.plain = false;
    describer->describe_launch(std::move(record));
    return;
  }
  cudaLaunchAttribute shape{};
  shape.id = cudaLaunchAttributeClusterDimension;
  shape.val.clusterDim.x = cluster.x;
  shape.val.clusterDim.y = cluster.y;
  shape.val.clusterDim.z = cluster.z;
  const cudaError_t rc = launch_values(function, grid, block, shared_bytes, stream, values, &shape);
  if (rc != cudaSuccess) throw_launch_error(rc, "cudaLaunchKernelEx");
}

}  // namespace loom::detail
