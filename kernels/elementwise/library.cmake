# kernels/elementwise: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/fusion.cpp
  ${CMAKE_CURRENT_LIST_DIR}/map.cu
  ${CMAKE_CURRENT_LIST_DIR}/maps.cu
  ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op.cpp
  ${CMAKE_CURRENT_LIST_DIR}/vector_add.cu)
# NVRTC is opened at run time (fusion.cpp): where the dynamic linker does not
# find it, it is looked for in the toolkit loom was built with.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fusion.cpp PROPERTIES
  COMPILE_DEFINITIONS "LOOM_CUDA_LIBRARY_DIR=\"${CUDAToolkit_LIBRARY_DIR}\"")
# map_math.inc is compiled into the kernels (through functors.hpp) and, as
# text, into every fused chain NVRTC compiles: fusion.cpp includes it as a
# string from a header made here, remade whenever the file changes.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/map_math.inc)
file(READ ${CMAKE_CURRENT_LIST_DIR}/map_math.inc loom_map_math_text)
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/generated/elementwise/map_math_text.hpp
  CONTENT "#pragma once\n// Made by kernels/elementwise/library.cmake from map_math.inc.\nnamespace loom::kernels {\ninline constexpr const char* kMapMathText = R\"loom_math(@loom_map_math_text@)loom_math\";\n}\n"
  @ONLY)
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/fusion.cpp APPEND PROPERTY
  INCLUDE_DIRECTORIES ${CMAKE_CURRENT_BINARY_DIR}/generated)
