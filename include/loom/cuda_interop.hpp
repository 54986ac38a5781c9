#pragma once
/// @file cuda_interop.hpp
/// The one public header that includes CUDA: for users who bring their own
/// kernels and need loom's streams and events as CUDA handles. Everything
/// else in include/loom/ is CUDA-free. Link loom::cuda_interop to use it.

#include <cuda_runtime_api.h>

// libloom.so uses the shared CUDA runtime, and a program must have one
// runtime. loom::cuda_interop tells a .cu file whether its target links
// CMake's default, the static one, instead (src/CMakeLists.txt). The fix:
// set the target's CUDA_RUNTIME_LIBRARY to Shared (find_package(loom) makes
// that the default for targets created after it, unless
// CMAKE_CUDA_RUNTIME_LIBRARY is set).
#if defined(LOOM_CUDA_RUNTIME_IS_STATIC) && LOOM_CUDA_RUNTIME_IS_STATIC
#error "static CUDA runtime linked, libloom.so uses the shared one: set CUDA_RUNTIME_LIBRARY Shared"
#endif

#include <cstddef>

namespace loom {

/// A non-owning view of a CUDA stream. It cannot be built from the literal
/// 0 or nullptr by accident: the default (legacy) stream has to be asked for
/// by name, StreamView::legacy_default(). Cheap to copy. Thread-safe as a value.
class StreamView {
 public:
  constexpr explicit StreamView(cudaStream_t stream) noexcept : stream_(stream) {}
  StreamView(int) = delete;
  StreamView(std::nullptr_t) = delete;

  /// The legacy default stream, which synchronizes with every blocking stream.
  static constexpr StreamView legacy_default() noexcept { return StreamView(cudaStream_t{}); }

  constexpr cudaStream_t native() const noexcept { return stream_; }
  constexpr operator cudaStream_t() const noexcept { return stream_; }
  friend constexpr bool operator==(StreamView a, StreamView b) noexcept {
    return a.stream_ == b.stream_;
  }

 private:
  cudaStream_t stream_;
};

/// A non-owning view of a CUDA event. Cheap to copy.
class EventView {
 public:
  constexpr explicit EventView(cudaEvent_t event) noexcept : event_(event) {}
  EventView(int) = delete;
  EventView(std::nullptr_t) = delete;

  constexpr cudaEvent_t native() const noexcept { return event_; }
  constexpr operator cudaEvent_t() const noexcept { return event_; }
  friend constexpr bool operator==(EventView a, EventView b) noexcept {
    return a.event_ == b.event_;
  }

 private:
  cudaEvent_t event_;
};

}  // namespace loom

#include <loom/kernel_task.hpp>
#include <loom/op.hpp>

#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

namespace loom {

/// The CUDA stream an op's run_cuda() must enqueue its work on.
inline cudaStream_t cuda_stream(const ExecutionContext& ctx) noexcept {
  return static_cast<cudaStream_t>(ctx.native_stream());
}

/// The CUDA stream of a kernel task.
inline cudaStream_t cuda_stream(const KernelContext& k) noexcept {
  return static_cast<cudaStream_t>(k.native_stream());
}

/// Throws the loom::CudaError for a failed launch, naming the running task
/// (launch() calls it; so may a user's own launch wrapper).
[[noreturn]] LOOM_API void throw_launch_error(cudaError_t code, const char* call);
/// The same, naming the source file and line of the failed call too.
[[noreturn]] LOOM_API void throw_launch_error(cudaError_t code, const char* call, const char* file,
                                              int line);

namespace detail {

/// A class parameter that declares `static constexpr bool loom_pointer_free
/// = true` holds no pointer: a launch that takes it can still be re-pointed
/// completely (LaunchRecord::plain).
template <class T>
inline constexpr bool pointer_free_class = std::is_empty_v<T>;
template <class T>
requires requires { T::loom_pointer_free; }
inline constexpr bool pointer_free_class<T> = T::loom_pointer_free;

/// A class parameter that declares `static constexpr auto
/// loom_pointer_offsets()` (the byte offsets of the pointers it holds, each
/// a pointer-sized member) can be re-pointed too.
template <class T>
concept declares_its_pointers = requires {
  T::loom_pointer_offsets();
};

// A launch's kernel, configuration and parameters (bytes and kinds), for a
// compiled graph (LaunchRecord).
template <class... Params>
LaunchRecord record_launch(const void* function, dim3 grid, dim3 block, std::size_t shared_bytes,
                           const std::tuple<Params...>& values) {
  LaunchRecord record;
  record.function = function;
  record.grid[0] = grid.x;
  record.grid[1] = grid.y;
  record.grid[2] = grid.z;
  record.block[0] = block.x;
  record.block[1] = block.y;
  record.block[2] = block.z;
  record.shared_bytes = shared_bytes;
  record.plain =
      ((std::is_pointer_v<Params> || std::is_arithmetic_v<Params> || std::is_enum_v<Params> ||
        pointer_free_class<Params> || declares_its_pointers<Params>)&&...);
  // Sized once: a compile describes every task's launches (no regrowth).
  record.params.reserve(sizeof...(Params));
  record.bytes.reserve((std::size_t{0} + ... + (sizeof(Params) + alignof(Params))));
  std::apply(
      [&](const auto&... v) {
        const auto append = [&](const auto& value) {
          using V = std::decay_t<decltype(value)>;
          const std::size_t offset =
              (record.bytes.size() + alignof(V) - 1) / alignof(V) * alignof(V);
          record.bytes.resize(offset + sizeof(V));
          std::memcpy(record.bytes.data() + offset, &value, sizeof(V));
          record.params.push_back({offset, sizeof(V), std::is_pointer_v<V>});
          if constexpr (declares_its_pointers<V>) {
            for (const std::size_t inner : V::loom_pointer_offsets()) {
              record.inner_pointers.push_back(offset + inner);
            }
          }
        };
        (append(v), ...);
        (void)append;  // a kernel without parameters
      },
      values);
  return record;
}

/// Makes a launch of `function` with `values` as its arguments (and
/// `attribute`, if given: loom's own kernels' early launches).
template <class... Params>
cudaError_t launch_values(const void* function, dim3 grid, dim3 block, std::size_t shared_bytes,
                          cudaStream_t stream, std::tuple<Params...>& values,
                          cudaLaunchAttribute* attribute = nullptr) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = attribute != nullptr ? 1 : 0;
  if constexpr (sizeof...(Params) == 0) {
    return cudaLaunchKernelExC(&config, function, nullptr);
  } else {
    return std::apply(
        [&](auto&... v) {
          void* pointers[] = {static_cast<void*>(&v)...};
          return cudaLaunchKernelExC(&config, function, pointers);
        },
        values);
  }
}

}  // namespace detail

/// Launches `kernel<<<grid, block, shared_bytes, task stream>>>(args...)`
/// through cudaLaunchKernelEx. A launch error (a bad configuration, too much
/// shared memory) throws a loom::CudaError naming the task, which fails it.
/// The arguments convert to the kernel's parameter types.
template <class... Params, class... Args>
void launch(const KernelContext& k, void (*kernel)(Params...), dim3 grid, dim3 block,
            std::size_t shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "loom::launch: the kernel takes a different number of arguments");
  const void* function = reinterpret_cast<const void*>(kernel);
  std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
  if (k.describes_launches()) {
    // A compiled graph being built: it adds the kernel node itself.
    k.describe_launch(detail::record_launch(function, grid, block, shared_bytes, values));
    return;
  }
  const cudaError_t rc =
      detail::launch_values(function, grid, block, shared_bytes, cuda_stream(k), values);
  if (rc != cudaSuccess) throw_launch_error(rc, "cudaLaunchKernelEx");
}

}  // namespace loom
