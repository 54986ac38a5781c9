# kernels/loss: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_loss_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_loss.cpp)
loom_add_gtest(loom_loss_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_loss_gpu.cpp)
