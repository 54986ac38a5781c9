# FindCUTLASS: CUTLASS/CuTe's C++ headers (header-only).
#
# Looked for, in order: CUTLASS_ROOT (a CUTLASS source tree or an unpacked
# header folder, as a CMake or environment variable), the project-local
# folder that scripts/fetch-cutlass.sh fills (.deps/cutlass), then the system
# include paths. Defines CUTLASS_FOUND, CUTLASS_INCLUDE_DIRS, CUTLASS_VERSION
# and the imported target CUTLASS::cutlass (its include folders are SYSTEM:
# CUTLASS's own warnings are not loom's).
#
# loom's kernels use it privately: the installed package does not need it.

set(_cutlass_hints)
if(DEFINED CUTLASS_ROOT)
  list(APPEND _cutlass_hints "${CUTLASS_ROOT}")
endif()
if(DEFINED ENV{CUTLASS_ROOT})
  list(APPEND _cutlass_hints "$ENV{CUTLASS_ROOT}")
endif()
list(APPEND _cutlass_hints "${PROJECT_SOURCE_DIR}/.deps/cutlass")

find_path(CUTLASS_INCLUDE_DIR
  NAMES cute/tensor.hpp cutlass/cutlass.h
  HINTS ${_cutlass_hints}
  PATH_SUFFIXES include)
find_path(CUTLASS_UTIL_INCLUDE_DIR
  NAMES cutlass/util/device_memory.h
  HINTS ${_cutlass_hints}
  PATH_SUFFIXES tools/util/include include)

if(CUTLASS_INCLUDE_DIR AND EXISTS "${CUTLASS_INCLUDE_DIR}/cutlass/version.h")
  file(STRINGS "${CUTLASS_INCLUDE_DIR}/cutlass/version.h" _cutlass_version_lines
       REGEX "^#define CUTLASS_(MAJOR|MINOR|PATCH) [0-9]+")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define CUTLASS_${part} ([0-9]+).*" "\\1" _cutlass_${part}
           "${_cutlass_version_lines}")
  endforeach()
  set(CUTLASS_VERSION "${_cutlass_MAJOR}.${_cutlass_MINOR}.${_cutlass_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUTLASS
  REQUIRED_VARS CUTLASS_INCLUDE_DIR
  VERSION_VAR CUTLASS_VERSION
  REASON_FAILURE_MESSAGE
    "run scripts/setup.sh (it fetches CUTLASS's headers into .deps/cutlass), or set CUTLASS_ROOT")

if(CUTLASS_FOUND)
  set(CUTLASS_INCLUDE_DIRS "${CUTLASS_INCLUDE_DIR}")
  if(CUTLASS_UTIL_INCLUDE_DIR)
    list(APPEND CUTLASS_INCLUDE_DIRS "${CUTLASS_UTIL_INCLUDE_DIR}")
  endif()
  list(REMOVE_DUPLICATES CUTLASS_INCLUDE_DIRS)
  if(NOT TARGET CUTLASS::cutlass)
    add_library(CUTLASS::cutlass INTERFACE IMPORTED)
    set_target_properties(CUTLASS::cutlass PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${CUTLASS_INCLUDE_DIRS}"
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${CUTLASS_INCLUDE_DIRS}")
  endif()
endif()
mark_as_advanced(CUTLASS_INCLUDE_DIR CUTLASS_UTIL_INCLUDE_DIR)
