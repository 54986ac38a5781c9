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

# hgemm's wgmma kernel (hgemm_wgmma.cuh) uses sm_90a's architecture-specific
# instructions (wgmma, setmaxnreg), which no plain sm_90 target has. Where
# the build targets compute capability 9.0, its two files get an sm_90a image
# besides the target's own (CMake's architectures are per target, not per
# file; the kernel's body in the plain images only traps, and the driver
# loads the sm_90a image on a 9.0 device) and LOOM_HGEMM_WGMMA_BUILT.
# Elsewhere they compile to stubs and hgemm refuses the variant.
set(loom_hgemm_wgmma_sources
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_wgmma_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/hgemm_wgmma_f16.cu)
set(loom_hgemm_wgmma_built OFF)
foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
  if(arch MATCHES "^90")  # 90, 90a, 90-real, 90-virtual, 90a-real
    set(loom_hgemm_wgmma_built ON)
  endif()
endforeach()
# A sanitizer build (LoomSanitizers.cmake) runs the CPU suite only, and these
# two files were its longest CUDA compiles (about 65 s each on a CI core):
# there they are the stubs, as for other architectures.
if(LOOM_SANITIZE)
  set(loom_hgemm_wgmma_built OFF)
endif()
if(loom_hgemm_wgmma_built)
  set_source_files_properties(${loom_hgemm_wgmma_sources} PROPERTIES
    COMPILE_OPTIONS "-gencode=arch=compute_90a,code=sm_90a"
    COMPILE_DEFINITIONS LOOM_HGEMM_WGMMA_BUILT=1)
endif()
