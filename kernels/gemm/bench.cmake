# kernels/gemm: its benchmark (bench/CMakeLists.txt includes this), with loom_add_benchmark.
