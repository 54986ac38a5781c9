# kernels/image: its tests (tests/CMakeLists.txt includes this), with loom_add_gtest.
