# kernels/elementwise: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_elementwise_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.cpp)
loom_add_gtest(loom_elementwise_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_elementwise_gpu.cpp)
