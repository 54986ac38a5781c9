# kernels/elementwise: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/map.cu
  ${CMAKE_CURRENT_LIST_DIR}/maps.cu
  ${CMAKE_CURRENT_LIST_DIR}/maps_reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/vector_add.cu)
