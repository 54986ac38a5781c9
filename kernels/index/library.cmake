# kernels/index: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/index.cu
  ${CMAKE_CURRENT_LIST_DIR}/argmax.cu
  ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op.cpp)
