# LOOM_SANITIZE: a comma-separated list of sanitizers for every loom target
# (the library, tests, samples, benchmarks), compile and link:
#   address,undefined   AddressSanitizer (with LeakSanitizer) and UBSan
#   thread              ThreadSanitizer
#   ""                  none (the default)
# Host C++ gets -fsanitize=...; CUDA sources get the same flags for nvcc's host
# pass (-Xcompiler), because the CPU references that the CPU backend runs and
# the kernel launch wrappers live in .cu files. Device code is not sanitized
# (that is compute-sanitizer's job). UB stops the program at the first report.
# scripts/sanitize.sh configures, builds and runs the CPU suite this way.
set(LOOM_SANITIZE "" CACHE STRING
  "Sanitizers for host code of every loom target: address,undefined | thread | empty for none")

if(LOOM_SANITIZE)
  string(REPLACE "," ";" loom_sanitizers "${LOOM_SANITIZE}")
  list(REMOVE_DUPLICATES loom_sanitizers)
  foreach(sanitizer IN LISTS loom_sanitizers)
    if(NOT sanitizer MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "LOOM_SANITIZE: unknown sanitizer '${sanitizer}' "
                          "(use address, undefined, thread or leak)")
    endif()
  endforeach()
  if("thread" IN_LIST loom_sanitizers AND
     ("address" IN_LIST loom_sanitizers OR "leak" IN_LIST loom_sanitizers))
    message(FATAL_ERROR "LOOM_SANITIZE: thread cannot be combined with address or leak")
  endif()

  # One -fsanitize= per sanitizer: nvcc's -Xcompiler splits its argument at commas.
  set(loom_sanitize_flags -fno-omit-frame-pointer)
  foreach(sanitizer IN LISTS loom_sanitizers)
    list(APPEND loom_sanitize_flags -fsanitize=${sanitizer})
  endforeach()
  if("undefined" IN_LIST loom_sanitizers)
    list(APPEND loom_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  string(REPLACE ";" "," loom_sanitize_xcompiler "${loom_sanitize_flags}")

  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:${loom_sanitize_flags}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${loom_sanitize_xcompiler}>")
  add_link_options(
    "$<$<LINK_LANGUAGE:CXX>:${loom_sanitize_flags}>"
    # CMake links CUDA programs with the host compiler: the flags go as they are.
    "$<$<LINK_LANGUAGE:CUDA>:${loom_sanitize_flags}>")
  # The sanitizers check host code: device code is built to link, and the
  # suite they run is the CPU one. So device code stays PTX (each
  # architecture as its -virtual form): no ptxas, which is about 40% of the
  # tensor-core kernels' compile time (hgemm_bf16.cu under ASan, 2 cores:
  # 71 s with ptxas -O0, 44 s as PTX). On a GPU the driver would compile the
  # PTX at load; do not time kernels from a sanitizer build.
  # Architectures given by number only (90, 90a, 90-real, ...): CMake's
  # keywords (native, all, all-major) and a false value keep the usual
  # images, with ptxas unoptimized (hgemm_bf16.cu: 143 s -> 80 s on a core).
  set(loom_numeric_architectures ON)
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    if(NOT arch MATCHES "^[0-9]+[a-z]?(-real|-virtual)?$")
      set(loom_numeric_architectures OFF)
    endif()
  endforeach()
  if(CMAKE_CUDA_ARCHITECTURES AND loom_numeric_architectures)
    set(loom_virtual_architectures "")
    foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
      string(REGEX REPLACE "-(real|virtual)$" "" arch "${arch}")
      list(APPEND loom_virtual_architectures "${arch}-virtual")
    endforeach()
    set(CMAKE_CUDA_ARCHITECTURES "${loom_virtual_architectures}")
  else()
    add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:--ptxas-options=-O0>")
  endif()
  # The CPU emulations of the kernels (kernels/*/test_*_emulated.cpp) are
  # CuTe templates run through the host compiler: instrumented at -O2 the
  # SGEMM one alone took 250 s to compile (2 cores), 150 s at -O1. Their
  # tests take a second either way.
  set(LOOM_SANITIZE_EMULATED_OPTIONS -O1)
  message(STATUS "loom: sanitizers on: ${LOOM_SANITIZE} (host code; scripts/sanitize.sh runs the CPU suite)")
endif()
