# kernels/reduction: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
# CUB, the anchor, comes with the CUDA toolkit.
loom_add_benchmark(bench_reduction ${CMAKE_CURRENT_LIST_DIR}/bench_reduction.cu)
target_include_directories(bench_reduction PRIVATE ${PROJECT_SOURCE_DIR}/bench)
