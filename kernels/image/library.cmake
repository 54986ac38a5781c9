# kernels/image: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/gray.cu
  ${CMAKE_CURRENT_LIST_DIR}/blur.cu
  ${CMAKE_CURRENT_LIST_DIR}/blur_sliding.cu
  ${CMAKE_CURRENT_LIST_DIR}/blur_banded.cu
  ${CMAKE_CURRENT_LIST_DIR}/histogram.cu
  ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op.cpp)
