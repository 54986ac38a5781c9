# kernels/attention: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_attention_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_ring_attention.cpp)
loom_add_gtest(loom_attention_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_attention_gpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_ring_attention_gpu.cpp)
