#include "comm/nccl_check.hpp"

#include "core/task_context.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {

void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line) {
  std::string message = ncclGetErrorString(code);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    message += ": ";
    message += last;
  }
  throw NcclError(static_cast<int>(code), std::move(message),
                  ErrorContext{call, file, line, std::string(current_task())});
}

}  // namespace loom::detail
