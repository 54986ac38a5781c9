# Every dependency comes from the system, except CUTLASS/CuTe's headers, which
# scripts/setup.sh fetches into a project-local folder (nothing is vendored).
find_package(CUDAToolkit REQUIRED)
# Header-only and private to the kernels: the installed package needs none.
find_package(CUTLASS 4.0 REQUIRED)
find_package(NCCL REQUIRED)
find_package(Threads REQUIRED)

# spdlog: a compiled library on Debian, header-only on some other systems.
find_package(spdlog CONFIG REQUIRED)
if(TARGET spdlog::spdlog)
  set(LOOM_SPDLOG_TARGET spdlog::spdlog)
else()
  set(LOOM_SPDLOG_TARGET spdlog::spdlog_header_only)
endif()

# Boost.Lockfree is header-only: only the headers are needed.
if(POLICY CMP0167)
  cmake_policy(SET CMP0167 NEW)
endif()
find_package(Boost 1.70 REQUIRED CONFIG)
if(TARGET Boost::headers)
  set(LOOM_BOOST_TARGET Boost::headers)
else()
  set(LOOM_BOOST_TARGET Boost::boost)
endif()

set(LOOM_HAS_MPI OFF)
if(LOOM_WITH_MPI)
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(LOOM_HAS_MPI ON)
    message(STATUS "loom: MPI found (${MPI_CXX_LIBRARY_VERSION_STRING}); MPI parts and mpi tests are on")
  else()
    message(STATUS "loom: MPI not found; the multi-process parts (MPI bootstrap, mpi tests) are OFF. "
                   "Install an MPI (e.g. the OpenMPI development package) to enable them.")
  endif()
else()
  message(STATUS "loom: LOOM_WITH_MPI=OFF; the multi-process parts are OFF")
endif()

if(LOOM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()

if(LOOM_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG)
  if(NOT benchmark_FOUND)
    message(STATUS "loom: Google Benchmark not found; benchmarks are OFF")
    set(LOOM_BUILD_BENCHMARKS OFF)
  endif()
endif()
