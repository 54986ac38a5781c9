# kernels/image: sources of libloom (src/CMakeLists.txt includes this).
list(APPEND loom_family_sources)
