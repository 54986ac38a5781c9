#include "comm/mpi_check.hpp"

#include "core/task_context.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  std::string message;
  if (MPI_Error_string(code, text, &length) == MPI_SUCCESS) {
    message.assign(text, static_cast<std::size_t>(length));
  } else {
    message = "MPI error " + std::to_string(code);
  }
  int error_class = 0;
  if (MPI_Error_class(code, &error_class) == MPI_SUCCESS && error_class != code) {
    message += " (class " + std::to_string(error_class) + ")";
  }
  throw MpiError(code, std::move(message),
                 ErrorContext{call, file, line, std::string(current_task())});
}

}  // namespace loom::detail
