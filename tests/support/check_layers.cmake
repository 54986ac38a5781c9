# Checks that includes between loom's layers point one way (no cycles):
#
#   core       graph, tensors, storage, logging: no CUDA, nothing below it
#   memory     the caching allocator and host memory owners      -> core
#   cuda       devices, streams, events, device memory owners    -> core, memory
#   trace      the Chrome-trace writer                          -> core
#   comm       NCCL and MPI checks                               -> core, cuda
#   transfer   the copy paths between memory spaces              -> core, memory, cuda, kernels
#   sched      prepare, run, launch: the engine                  -> all of the above
#   compile    compiled graphs: capture, graph building, the memory plan,
#              intermediates                                    -> the above, sched
#   runtime    the Runtime facade and the resources it owns      -> the above, compile
#   ops        op bindings of the built-in kernels               -> core, ops, kernels
#   pipeline   frames through compiled stages (public API, waits)  -> core, pipeline
#   kernels/*  the catalogue: kernels know nothing of the runtime -> kernels only
#              (op bindings beside them use kernels/common's checks and the
#              public headers, <loom/...>, which this check does not cover)
# A kernel family's own tests and benchmarks (test_*, bench_*) are exempt.
# Arguments: SOURCE_DIR.
cmake_minimum_required(VERSION 3.25)
file(GLOB kernel_dirs LIST_DIRECTORIES true RELATIVE ${SOURCE_DIR}/kernels ${SOURCE_DIR}/kernels/*)
set(kernel_folders "")
foreach(dir IN LISTS kernel_dirs)
  if(IS_DIRECTORY ${SOURCE_DIR}/kernels/${dir})
    list(APPEND kernel_folders ${dir})
  endif()
endforeach()

set(allowed_core core)
set(allowed_memory core memory)
set(allowed_cuda core memory cuda)
set(allowed_trace core trace)
set(allowed_comm core cuda comm)
set(allowed_transfer core memory cuda transfer ${kernel_folders})
set(allowed_sched core memory cuda transfer trace comm sched ${kernel_folders})
set(allowed_compile core memory cuda transfer trace comm sched compile ${kernel_folders})
set(allowed_runtime core memory cuda transfer trace comm sched compile runtime ${kernel_folders})
set(allowed_ops core ops ${kernel_folders})
set(allowed_pipeline core pipeline)
set(allowed_kernels ${kernel_folders})

set(violations "")
set(checked 0)
foreach(layer core memory cuda trace comm transfer sched compile runtime ops pipeline kernels)
  if(layer STREQUAL "kernels")
    file(GLOB_RECURSE files ${SOURCE_DIR}/kernels/*.hpp ${SOURCE_DIR}/kernels/*.cpp
         ${SOURCE_DIR}/kernels/*.cu ${SOURCE_DIR}/kernels/*.cuh)
  else()
    file(GLOB_RECURSE files ${SOURCE_DIR}/src/${layer}/*.hpp ${SOURCE_DIR}/src/${layer}/*.cpp
         ${SOURCE_DIR}/src/${layer}/*.cu)
  endif()
  foreach(file IN LISTS files)
    get_filename_component(name ${file} NAME)
    if(layer STREQUAL "kernels" AND name MATCHES "^(test_|bench_)")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"/]+/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"/]+)/.*" "\\1" target "${line}")
      if(NOT target IN_LIST allowed_${layer})
        file(RELATIVE_PATH relative ${SOURCE_DIR} ${file})
        list(APPEND violations "${relative} (${layer}) includes ${target}/: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no sources found under ${SOURCE_DIR}")
endif()
if(violations)
  string(REPLACE ";" "\n" violations "${violations}")
  message(FATAL_ERROR "includes that break the layering:\n${violations}")
endif()
message(STATUS "${checked} files: every include points down the layers")
