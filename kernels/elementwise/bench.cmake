# kernels/elementwise: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
loom_add_benchmark(bench_elementwise ${CMAKE_CURRENT_LIST_DIR}/bench_elementwise.cpp)
target_include_directories(bench_elementwise PRIVATE ${PROJECT_SOURCE_DIR}/bench)
