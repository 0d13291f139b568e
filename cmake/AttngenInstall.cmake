# cmake --install <build> --prefix P gives:
#   P/include/attngen/{attngen.h,attngen.hpp}
#   P/lib/libattngen.a            runtime + every kernel + the Halide runtime, one archive
#   P/lib/libattngen.so[.N[.M.m]] the C API only
#   P/lib/cmake/attngen/          find_package(attngen): attngen::attngen, attngen::attngen_shared
#   P/lib/pkgconfig/attngen.pc
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ATTNGEN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/attngen")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/attngen"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${PROJECT_BINARY_DIR}/runtime/libattngen.a"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(TARGETS attngen_shared
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")

configure_package_config_file(
    "${PROJECT_SOURCE_DIR}/cmake/attngenConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/attngenConfig.cmake"
    INSTALL_DESTINATION "${ATTNGEN_INSTALL_CMAKEDIR}"
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(
    "${PROJECT_BINARY_DIR}/attngenConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}"
    COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/attngenConfig.cmake"
              "${PROJECT_BINARY_DIR}/attngenConfigVersion.cmake"
        DESTINATION "${ATTNGEN_INSTALL_CMAKEDIR}")

configure_file("${PROJECT_SOURCE_DIR}/cmake/attngen.pc.in" "${PROJECT_BINARY_DIR}/attngen.pc"
               @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/attngen.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
