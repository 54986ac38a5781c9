# kernels/softmax: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_softmax_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cpp)
loom_add_gtest(loom_softmax_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax_gpu.cpp)
