# kernels/softmax: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_softmax_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax_emulated.cpp)
loom_add_gtest(loom_softmax_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_softmax_gpu.cpp)
# The emulated kernels read and write rows through 16-byte vector types, as
# the device code does: keep the host optimizer from reordering those
# accesses under strict aliasing. A sanitizer build lowers their
# optimization (LoomSanitizers.cmake).
set(loom_softmax_emulated_options "-fno-strict-aliasing;-Wno-unknown-pragmas")
if(LOOM_SANITIZE_EMULATED_OPTIONS)
  list(APPEND loom_softmax_emulated_options ${LOOM_SANITIZE_EMULATED_OPTIONS})
endif()
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/test_softmax_emulated.cpp PROPERTIES
  COMPILE_OPTIONS "${loom_softmax_emulated_options}")
