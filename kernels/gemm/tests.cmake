# kernels/gemm: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_gemm_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm.cpp)
loom_add_gtest(loom_gemm_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm_gpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cute_gpu.cu)
