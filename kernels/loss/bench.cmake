# kernels/loss: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
loom_add_benchmark(bench_loss ${CMAKE_CURRENT_LIST_DIR}/bench_loss.cpp)
target_include_directories(bench_loss PRIVATE ${PROJECT_SOURCE_DIR}/bench)
