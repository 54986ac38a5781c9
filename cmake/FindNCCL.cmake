#[=======================================================================[.rst:
FindNCCL
--------

Finds the NVIDIA Collective Communications Library.

Searched, in order: ``NCCL_ROOT`` (CMake variable or environment), the CUDA
toolkit's include and library directories, then the system paths
(``/usr/include`` and the multiarch library directory).

Result variables: ``NCCL_FOUND``, ``NCCL_INCLUDE_DIR``, ``NCCL_LIBRARY``,
``NCCL_VERSION``. Imported target: ``NCCL::nccl``.
#]=======================================================================]

set(_nccl_hints)
foreach(root IN ITEMS "${NCCL_ROOT}" "$ENV{NCCL_ROOT}")
  if(root)
    list(APPEND _nccl_hints "${root}")
  endif()
endforeach()
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_hints "${CUDAToolkit_LIBRARY_ROOT}")
endif()

set(_nccl_include_hints ${CUDAToolkit_INCLUDE_DIRS})
set(_nccl_lib_hints ${CUDAToolkit_LIBRARY_DIR})
if(CMAKE_LIBRARY_ARCHITECTURE)
  list(APPEND _nccl_lib_hints /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
endif()

find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_nccl_hints} ${_nccl_include_hints}
  PATH_SUFFIXES include
  PATHS /usr/include /usr/local/include)
find_library(NCCL_LIBRARY nccl
  HINTS ${_nccl_hints} ${_nccl_lib_hints}
  PATH_SUFFIXES lib lib64 lib/${CMAKE_LIBRARY_ARCHITECTURE}
  PATHS /usr/lib /usr/local/lib)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH)[ \t]")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${part}[ \t]+([0-9]+)" _m "${_nccl_version_lines}")
    set(_nccl_${part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT "${_nccl_MAJOR}" STREQUAL "")
    set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
