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

#include <loom/op.hpp>

namespace loom {

/// The CUDA stream an op's run_cuda() must enqueue its work on.
inline cudaStream_t cuda_stream(const ExecutionContext& ctx) noexcept {
  return static_cast<cudaStream_t>(ctx.native_stream());
}

}  // namespace loom
