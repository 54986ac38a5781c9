# kernels/softmax: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
loom_add_benchmark(bench_softmax ${CMAKE_CURRENT_LIST_DIR}/bench_softmax.cpp)
target_include_directories(bench_softmax PRIVATE ${PROJECT_SOURCE_DIR}/bench)
