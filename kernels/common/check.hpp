#pragma once
// Error checks for kernels' host code. Kernels depend on the public CUDA
// interop header only, never on the runtime's internals (src/): a failed call
// or launch throws loom::CudaError through loom::throw_launch_error, which
// names the call, and the task when one is running.

#include <loom/cuda_interop.hpp>

#define LOOM_KERNEL_CHECK(expr)                                               \
  do {                                                                        \
    const cudaError_t loom_kernel_rc_ = (expr);                               \
    if (loom_kernel_rc_ != cudaSuccess) [[unlikely]]                          \
      ::loom::throw_launch_error(loom_kernel_rc_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Checks the launch that just happened on this thread.
#define LOOM_KERNEL_CHECK_LAUNCH(what)                                       \
  do {                                                                       \
    const cudaError_t loom_kernel_rc_ = cudaGetLastError();                  \
    if (loom_kernel_rc_ != cudaSuccess) [[unlikely]]                         \
      ::loom::throw_launch_error(loom_kernel_rc_, what, __FILE__, __LINE__); \
  } while (0)
