#pragma once
// The one checking path for CUDA runtime calls. LOOM_CUDA_CHECK evaluates
// its argument once; on failure it clears the (non-sticky) error state and
// throws a loom error naming the call, the file and line, and the current
// task. LOOM_CUDA_ASSERT is the form for destructors: it logs, never throws.

#include <cuda_runtime_api.h>

namespace loom::detail {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
void report_cuda_error(cudaError_t code, const char* call, const char* file, int line) noexcept;

inline void check_cuda(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) [[unlikely]] {
    throw_cuda_error(code, call, file, line);
  }
}

inline bool assert_cuda(cudaError_t code, const char* call, const char* file, int line) noexcept {
  if (code != cudaSuccess) [[unlikely]] {
    report_cuda_error(code, call, file, line);
    return false;
  }
  return true;
}

/// True for the errors that leave the CUDA context unusable (a kernel fault:
/// illegal address or instruction, a device-side assert, ...): every later
/// call in the process fails with them.
bool is_sticky_cuda_error(int code) noexcept;

/// Checks the launch that just happened on this thread (cudaGetLastError).
#define LOOM_CUDA_CHECK_LAUNCH(what) \
  ::loom::detail::check_cuda(cudaGetLastError(), what, __FILE__, __LINE__)

}  // namespace loom::detail

#define LOOM_CUDA_CHECK(expr) ::loom::detail::check_cuda((expr), #expr, __FILE__, __LINE__)
#define LOOM_CUDA_ASSERT(expr) ::loom::detail::assert_cuda((expr), #expr, __FILE__, __LINE__)
