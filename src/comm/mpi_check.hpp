#pragma once
// The checking path for MPI calls (built only with MPI). loom sets
// MPI_ERRORS_RETURN on the communicators it uses so that failures come back
// here as loom::MpiError instead of aborting the job.

#include <mpi.h>

namespace loom::detail {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

inline void check_mpi(int code, const char* call, const char* file, int line) {
  if (code != MPI_SUCCESS) [[unlikely]] {
    throw_mpi_error(code, call, file, line);
  }
}

}  // namespace loom::detail

#define LOOM_MPI_CHECK(expr) ::loom::detail::check_mpi((expr), #expr, __FILE__, __LINE__)
