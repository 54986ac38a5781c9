# kernels/gemm: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/sgemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/sgemm_warp_tiled.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_wgmma_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_wgmma_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op.cpp)

# hgemm's wgmma kernel (hgemm_wgmma.cuh) uses sm_90a's own instructions:
# built for it where the build targets 9.0 (src/CMakeLists.txt), with
# LOOM_HGEMM_WGMMA_BUILT; elsewhere stubs, and hgemm refuses the variant.
loom_sm90a_sources(LOOM_HGEMM_WGMMA_BUILT
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_wgmma_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_wgmma_f16.cu)
