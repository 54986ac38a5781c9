#pragma once
// The checking path for NCCL calls: the one boundary where NCCL's result
// codes become loom::NcclError exceptions naming the call, file, line and task.

#include <nccl.h>

namespace loom::detail {

[[noreturn]] void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line);

inline void check_nccl(ncclResult_t code, const char* call, const char* file, int line) {
  if (code != ncclSuccess && code != ncclInProgress) [[unlikely]] {
    throw_nccl_error(code, call, file, line);
  }
}

}  // namespace loom::detail

#define LOOM_NCCL_CHECK(expr) ::loom::detail::check_nccl((expr), #expr, __FILE__, __LINE__)
