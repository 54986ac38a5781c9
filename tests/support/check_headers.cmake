# Compiles every public header alone, with the host compiler and no CUDA
# include path: each must be self-contained and CUDA-free. cuda_interop.hpp is
# the one header allowed to include CUDA, so it is only checked for existence.
# Arguments: COMPILER, INCLUDE_DIR, WORK_DIR.
file(GLOB headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/loom/*.hpp ${INCLUDE_DIR}/loom/ops/*.hpp)
file(MAKE_DIRECTORY ${WORK_DIR})
set(failed "")
set(count 0)
foreach(header IN LISTS headers)
  # cute.hpp (loom tensors as CuTe tensors) needs CUDA and CUTLASS by design.
  if(header STREQUAL "loom/cuda_interop.hpp" OR header STREQUAL "loom/cute.hpp")
    continue()
  endif()
  file(READ ${INCLUDE_DIR}/${header} text)
  if(text MATCHES "#include[ \t]*[<\"](cuda|cuda_runtime|cuda_runtime_api|nccl|cublas|cuda_fp16|cuda_bf16|driver_types)[^>\"]*[>\"]")
    list(APPEND failed "${header} (includes a CUDA or NCCL header)")
  endif()
  string(MAKE_C_IDENTIFIER ${header} stem)
  set(tu ${WORK_DIR}/${stem}.cpp)
  # Twice: the include guard works too.
  file(WRITE ${tu} "#include <${header}>\n#include <${header}>\nint main() { return 0; }\n")
  execute_process(
    COMMAND ${COMPILER} -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I${INCLUDE_DIR} ${tu}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(APPEND failed "${header}: ${err}")
  endif()
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no public headers found under ${INCLUDE_DIR}/loom")
endif()
if(failed)
  string(REPLACE ";" "\n" failed "${failed}")
  message(FATAL_ERROR "public headers that are not self-contained and CUDA-free:\n${failed}")
endif()
message(STATUS "${count} public headers compile alone without CUDA")
