#include "cuda/check.hpp"

#include <loom/cuda_interop.hpp>

#include "core/log.hpp"
#include "core/task_context.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {
namespace {

std::string describe(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ")";
}

ErrorContext context_of(const char* call, const char* file, int line) {
  return ErrorContext{call, file, line, std::string(current_task())};
}

}  // namespace

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  // Reset the non-sticky error so that the next launch on this thread is not
  // blamed for this one. A sticky error (a kernel fault) stays: the context
  // is unusable and every later call reports it.
  (void)cudaGetLastError();
  auto context = context_of(call, file, line);
  switch (code) {
    case cudaErrorMemoryAllocation: throw OutOfMemory(0, describe(code), std::move(context));
    case cudaErrorInsufficientDriver:
      throw NoDevice(NoDevice::Reason::driver_too_old,
                     describe(code) + ": no CUDA driver, or one older than the runtime",
                     std::move(context));
    case cudaErrorNoDevice:
      throw NoDevice(NoDevice::Reason::no_device, describe(code), std::move(context));
    case cudaErrorInvalidDevice:
      throw NoDevice(NoDevice::Reason::device_out_of_range, describe(code), std::move(context));
    default: throw CudaError(static_cast<int>(code), describe(code), std::move(context));
  }
}

bool is_sticky_cuda_error(int code) noexcept {
  switch (static_cast<cudaError_t>(code)) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed: return true;
    default: return false;
  }
}

void report_cuda_error(cudaError_t code, const char* call, const char* file, int line) noexcept {
  try {
    (void)cudaGetLastError();
    const auto task = current_task();
    logger().error("{}{}{}{} failed: {} [{}:{}]", task.empty() ? "" : "task '", task,
                   task.empty() ? "" : "': ", call, describe(code), file, line);
  } catch (...) {
    // Logging must not throw out of a destructor; there is nothing left to do.
  }
}

}  // namespace loom::detail

namespace loom {

void throw_launch_error(cudaError_t code, const char* call) {
  detail::throw_cuda_error(code, call, "", 0);
}

void throw_launch_error(cudaError_t code, const char* call, const char* file, int line) {
  detail::throw_cuda_error(code, call, file, line);
}

}  // namespace loom
