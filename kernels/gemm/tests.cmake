# kernels/gemm: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_gemm_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_sgemm_emulated.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_sgemm_emulated_wide.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_sgemm_emulated_narrow.cpp)
loom_add_gtest(loom_gemm_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm_gpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_hgemm_gpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cute_gpu.cu)
# The emulated kernels compile CuTe with the host compiler, which (unlike nvcc)
# does not add the toolkit's libcu++ to the include path; CuTe's vectorized
# copies write floats through 128-bit integers, which the host optimizer may
# reorder under strict aliasing (nvcc's device code does not).
# Newer CMake lists the toolkit's cccl folder in CUDAToolkit_INCLUDE_DIRS
# already; older ones list only the include folder above it.
set(loom_emulated_options -fno-strict-aliasing ${LOOM_SANITIZE_EMULATED_OPTIONS})
if(NOT CUDAToolkit_INCLUDE_DIRS MATCHES "/cccl(;|$)")
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS "${dir}/cccl")
      list(APPEND loom_emulated_options -isystem "${dir}/cccl")
    endif()
  endforeach()
endif()
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/test_sgemm_emulated.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_sgemm_emulated_wide.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_sgemm_emulated_narrow.cpp PROPERTIES
  COMPILE_OPTIONS "${loom_emulated_options}")
