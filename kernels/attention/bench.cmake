# kernels/attention: its benchmarks (bench/CMakeLists.txt includes this), with loom_add_benchmark.
loom_add_benchmark(bench_attention ${CMAKE_CURRENT_LIST_DIR}/bench_attention.cpp)
target_include_directories(bench_attention PRIVATE ${PROJECT_SOURCE_DIR}/bench)
loom_add_benchmark(bench_ring_attention ${CMAKE_CURRENT_LIST_DIR}/bench_ring_attention.cpp)
target_include_directories(bench_ring_attention PRIVATE ${PROJECT_SOURCE_DIR}/bench)
