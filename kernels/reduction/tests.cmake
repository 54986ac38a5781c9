# kernels/reduction: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_reduction_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_reduction.cpp)
loom_add_gtest(loom_reduction_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_reduction_gpu.cpp)
