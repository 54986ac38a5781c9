# Configures, builds and runs an outside project (tests/consumer,
# tests/consumer_cuda) against loom's build tree (MODE=build) or against a
# fresh install prefix (MODE=install), passing it only the compilers, where
# loom is and, for CUDA, the architectures: no standard, no runtime.
# Arguments: MODE, LOOM_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR, GENERATOR,
#   CXX_COMPILER, EXECUTABLE (the program the project builds), SOVERSION
#   (the program must need libloom.so.<SOVERSION>), OBJDUMP, NM; for a CUDA
#   project also CUDA_COMPILER and CUDA_ARCHITECTURES (then the program must
#   use the shared CUDA runtime, not a static one of its own).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# run([QUIET] command...): fails on a non-zero exit; the output goes to
# `output` (and to the log unless QUIET).
function(run)
  set(command ${ARGN})
  set(quiet FALSE)
  if(ARGV0 STREQUAL "QUIET")
    list(POP_FRONT command)
    set(quiet TRUE)
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${command}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  if(NOT quiet)
    message(STATUS "${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "build")
  set(package_hint -Dloom_DIR=${LOOM_BUILD_DIR})
elseif(MODE STREQUAL "install")
  set(prefix ${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} --install ${LOOM_BUILD_DIR} --prefix ${prefix})
  if(NOT EXISTS ${prefix}/include/loom/loom.hpp)
    message(FATAL_ERROR "the install did not put the public headers under ${prefix}/include")
  endif()
  set(package_hint -DCMAKE_PREFIX_PATH=${prefix})
else()
  message(FATAL_ERROR "MODE must be build or install, not '${MODE}'")
endif()

set(cuda_args "")
if(CUDA_COMPILER)
  # Through an initial cache: the architectures may be a list ("80|90" here).
  string(REPLACE "|" ";" architectures "${CUDA_ARCHITECTURES}")
  file(WRITE ${WORK_DIR}/cuda.cmake
    "set(CMAKE_CUDA_ARCHITECTURES \"${architectures}\" CACHE STRING \"\")\n")
  set(cuda_args -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER} -C ${WORK_DIR}/cuda.cmake)
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${cuda_args} ${package_hint})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
set(program ${WORK_DIR}/build/${EXECUTABLE})

# The program needs libloom by its soname, which names the compatible versions.
run(QUIET ${OBJDUMP} -p ${program})
if(NOT output MATCHES "NEEDED +libloom\\.so\\.${SOVERSION}\n")
  message(FATAL_ERROR "${EXECUTABLE} does not need libloom.so.${SOVERSION}:\n${output}")
endif()
if(CUDA_COMPILER)
  # One CUDA runtime in the process: the kernel registers with the shared
  # libcudart that libloom.so uses; no static runtime is linked in.
  if(NOT output MATCHES "NEEDED +libcudart\\.so")
    message(FATAL_ERROR "${EXECUTABLE} does not need the shared CUDA runtime:\n${output}")
  endif()
  run(QUIET ${NM} --defined-only ${program})
  if(output MATCHES "__cudaRegisterFatBinary")
    message(FATAL_ERROR "${EXECUTABLE} has a static CUDA runtime of its own")
  endif()
endif()

run(${program})

# The README's other package promises, against the build tree (once each):
if(MODE STREQUAL "build" AND NOT CUDA_COMPILER)
  # C++20 is the floor whatever standard the project sets.
  run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build_cxx17 -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_CXX_STANDARD=17 ${package_hint})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build_cxx17)
  # find_package(loom 0.1) takes any 0.1.x and no 0.2: before 1.0 a minor
  # version may break compatibility.
  file(WRITE ${WORK_DIR}/probe/CMakeLists.txt
    "cmake_minimum_required(VERSION 3.25)\nproject(probe LANGUAGES CXX)\n"
    "find_package(loom 0.2 REQUIRED)\n")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/probe -B ${WORK_DIR}/probe/build -G ${GENERATOR}
            -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${package_hint}
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "find_package(loom 0.2 REQUIRED) accepted loom 0.1")
  endif()
elseif(MODE STREQUAL "build")
  # A .cu file of a target on the static CUDA runtime stops at compile time,
  # saying what to set (a process must have the one runtime libloom.so uses).
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build_static -G ${GENERATOR}
            -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${cuda_args} ${package_hint}
            -DCMAKE_CUDA_RUNTIME_LIBRARY=Static
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the static-runtime project did not configure:\n${err}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build_static
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "a target on the static CUDA runtime built against loom")
  endif()
  if(NOT "${out}${err}" MATCHES "CUDA_RUNTIME_LIBRARY Shared")
    message(FATAL_ERROR "the static-runtime build failed without saying what to set:\n${out}\n${err}")
  endif()
endif()
