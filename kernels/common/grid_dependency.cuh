#pragma once
// The device side of launch_on_stream_early (launch.hpp): programmatic
// dependent launch, sm_90 and up. Elsewhere (and where the kernel was
// launched the ordinary way) both are no-ops: the stream already ordered it.

namespace loom::kernels {

/// Waits until the stream's previous kernel has finished and its writes are
/// visible. Call before touching anything that kernel writes.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the stream's next kernel, if launched early, begin now rather than
/// when this block exits. It still waits (wait_for_previous_kernel) for all
/// of this kernel's writes.
__device__ __forceinline__ void let_next_kernel_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

}  // namespace loom::kernels
