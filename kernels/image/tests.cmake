# kernels/image: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_image_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_image.cpp)
loom_add_gtest(loom_image_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_image_gpu.cpp)
