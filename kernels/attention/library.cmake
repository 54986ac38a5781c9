# kernels/attention: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources
  ${CMAKE_CURRENT_LIST_DIR}/attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_fwd_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_fwd_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_wgmma_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_wgmma_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_bwd_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_bwd_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/ring_merge.cu
  ${CMAKE_CURRENT_LIST_DIR}/ring.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reference.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op.cpp)

# The wgmma kernels (flash_fwd_wgmma.cuh, flash_bwd_wgmma.cuh) use sm_90a's own
# instructions: built for it where the build targets 9.0 (src/CMakeLists.txt),
# with LOOM_FLASH_WGMMA_BUILT; elsewhere stubs, and the variant is refused.
loom_sm90a_sources(LOOM_FLASH_WGMMA_BUILT
  ${CMAKE_CURRENT_LIST_DIR}/flash_wgmma_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_wgmma_f16.cu)
