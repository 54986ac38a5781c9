# Build options and language settings shared by every loom target.
option(LOOM_BUILD_TESTS "Build the GoogleTest suite" ON)
option(LOOM_BUILD_GPU_TESTS "Build the GPU tests too (they skip without a GPU); instrumented CPU-only passes leave them out" ON)
option(LOOM_BUILD_SAMPLES "Build the samples" ON)
option(LOOM_BUILD_BENCHMARKS "Build the Google Benchmark programs (needs Google Benchmark)" ON)
option(LOOM_WERROR "Treat compiler warnings as errors" OFF)
option(LOOM_WITH_MPI "Build the MPI parts (bootstrap, MPI tests) when MPI is found" ON)

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
# CMake before 3.26 does not know nvcc's C++20 flag; nvcc has had it since 12.0.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION OR CMAKE_CUDA20_STANDARD_COMPILE_OPTION STREQUAL "")
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
# One CUDA runtime per process: libloom.so and every program share libcudart.so.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
include(GNUInstallDirs)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# LOOM_SANITIZE=address,undefined | thread: see LoomSanitizers.cmake.
include(LoomSanitizers)
