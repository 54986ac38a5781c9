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
