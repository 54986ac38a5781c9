# Install rules and the exported CMake package: find_package(loom) works
# against the build tree and against an install prefix, in a project that
# enables only CXX.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS loom loom_cuda_interop EXPORT loomTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/loom DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(LOOM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/loom)
install(EXPORT loomTargets NAMESPACE loom:: DESTINATION ${LOOM_CMAKE_DIR})
export(EXPORT loomTargets NAMESPACE loom:: FILE ${PROJECT_BINARY_DIR}/loomTargets.cmake)

# Where loom::cute looks for CUTLASS's headers after CUTLASS_ROOT: those the
# kernels were built with (a hint only; an install elsewhere sets CUTLASS_ROOT).
set(LOOM_BUILT_WITH_CUTLASS "${CUTLASS_INCLUDE_DIR}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/loomConfig.cmake.in
  ${PROJECT_BINARY_DIR}/loomConfig.cmake
  INSTALL_DESTINATION ${LOOM_CMAKE_DIR})
# The compatible versions are those that share the soname (CMakeLists.txt).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/loomConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${LOOM_VERSION_COMPATIBILITY})
install(FILES ${PROJECT_BINARY_DIR}/loomConfig.cmake ${PROJECT_BINARY_DIR}/loomConfigVersion.cmake
  DESTINATION ${LOOM_CMAKE_DIR})
