# kernels/gemm: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/sgemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/sgemm_warp_tiled.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op.cpp)
