# kernels/image: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
loom_add_gtest(loom_image_tests LABEL cpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_image.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_blur_emulated.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_histogram.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_histogram_emulated.cpp)
loom_add_gtest(loom_image_gpu_tests LABEL gpu SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_image_gpu.cpp)
# The emulated kernels read (and the blur writes) byte buffers through 16-byte
# vector types, as the device code does; keep the host optimizer from
# reordering those accesses under strict aliasing. The host compiler ignores
# their unroll pragmas. A sanitizer build lowers their optimization
# (LoomSanitizers.cmake).
set(LOOM_SANITIZE_EMULATED_SUFFIX "")
if(LOOM_SANITIZE_EMULATED_OPTIONS)
  set(LOOM_SANITIZE_EMULATED_SUFFIX ";${LOOM_SANITIZE_EMULATED_OPTIONS}")
endif()
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/test_blur_emulated.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_histogram_emulated.cpp PROPERTIES
  COMPILE_OPTIONS "-fno-strict-aliasing;-Wno-unknown-pragmas${LOOM_SANITIZE_EMULATED_SUFFIX}")
