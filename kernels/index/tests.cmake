# kernels/index: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_index_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_index.cpp)
loom_add_gtest(loom_index_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_index_gpu.cpp)
