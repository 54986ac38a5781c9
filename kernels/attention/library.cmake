# kernels/attention: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_fwd_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_fwd_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_bwd_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_bwd_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/ring_merge.cu
  ${CMAKE_CURRENT_LIST_DIR}/ring.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op.cpp)
