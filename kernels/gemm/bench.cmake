# kernels/gemm: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
# cuBLAS is the anchor, linked here only: libloom does not depend on it.
loom_add_benchmark(bench_gemm ${CMAKE_CURRENT_LIST_DIR}/bench_gemm.cpp)
target_link_libraries(bench_gemm PRIVATE CUDA::cublas)
target_include_directories(bench_gemm PRIVATE ${PROJECT_SOURCE_DIR}/bench)  # bench_support.hpp
