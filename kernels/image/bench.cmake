# kernels/image: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
loom_add_benchmark(bench_image ${CMAKE_CURRENT_LIST_DIR}/bench_image.cpp)
target_include_directories(bench_image PRIVATE ${PROJECT_SOURCE_DIR}/bench)
