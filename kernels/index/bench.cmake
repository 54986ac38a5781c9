# kernels/index: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
loom_add_benchmark(bench_index ${CMAKE_CURRENT_LIST_DIR}/bench_index.cpp)
target_include_directories(bench_index PRIVATE ${PROJECT_SOURCE_DIR}/bench)
