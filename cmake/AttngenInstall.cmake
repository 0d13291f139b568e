# cmake --install <build> --prefix P gives:
#   P/include/attngen/{attngen.h,attngen.hpp}
#   P/lib/libattngen.a            runtime + every kernel + the Halide runtime, one archive
#   P/lib/libattngen.so[.N[.M.m]] the C API only
#   P/lib/cmake/attngen/          find_package(attngen): attngen::attngen, attngen::attngen_shared
#   P/lib/pkgconfig/attngen.pc
#   P/libexec/attngen/            the generator for attngen_add_library, with libHalide and its
#                                 autoscheduler plugins (ATTNGEN_INSTALL_HALIDE)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ATTNGEN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/attngen")

# Where libHalide and its autoscheduler plugins live (recorded in the package).
set(ATTNGEN_HALIDE_LIBDIR "")
if (TARGET Halide::Halide)
    get_target_property(_attngen_halide_lib Halide::Halide IMPORTED_LOCATION_RELEASE)
    if (NOT _attngen_halide_lib)
        get_target_property(_attngen_halide_lib Halide::Halide IMPORTED_LOCATION)
    endif ()
    get_filename_component(ATTNGEN_HALIDE_LIBDIR "${_attngen_halide_lib}" DIRECTORY)
endif ()

# The generator's directory in the install, and where attngenConfig.cmake finds Halide's
# autoscheduler plugins for attngen_add_library. With ATTNGEN_INSTALL_HALIDE (the default)
# libHalide and the plugins are installed beside the generator, which finds them through
# $ORIGIN: the install works, and moves, without the Halide it was built with (the .venv's
# wheel, which a user's machine does not have). Off, the generator and the plugins are loaded
# from that Halide's directory (an install about 160 MB smaller, for machines that keep it).
set(_attngen_generator_dir "${CMAKE_INSTALL_LIBEXECDIR}/attngen")
option(ATTNGEN_INSTALL_HALIDE
       "Install libHalide and its autoscheduler plugins with the generator (a self-contained, relocatable package)"
       ON)
set(ATTNGEN_HALIDE_PLUGINS_IN_PACKAGE "${ATTNGEN_HALIDE_LIBDIR}")
if (ATTNGEN_INSTALL_HALIDE)
    if (IS_ABSOLUTE "${_attngen_generator_dir}")
        set(ATTNGEN_HALIDE_PLUGINS_IN_PACKAGE "${_attngen_generator_dir}")
    else ()
        # Relative to the package's own prefix when attngenConfig.cmake runs.
        set(ATTNGEN_HALIDE_PLUGINS_IN_PACKAGE "\${PACKAGE_PREFIX_DIR}/${_attngen_generator_dir}")
    endif ()
endif ()

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
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_LIBEXECDIR)
write_basic_package_version_file(
    "${PROJECT_BINARY_DIR}/attngenConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}"
    COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/attngenConfig.cmake"
              "${PROJECT_BINARY_DIR}/attngenConfigVersion.cmake"
        DESTINATION "${ATTNGEN_INSTALL_CMAKEDIR}")

# attngen.pc names its prefix relative to its own directory (${pcfiledir}), so that the prefix
# given at install time (cmake --install --prefix P) is the one it points into. Absolute
# install dirs stay absolute.
if (IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(ATTNGEN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else ()
    file(RELATIVE_PATH _attngen_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
    string(REGEX REPLACE "/$" "" _attngen_pc_up "${_attngen_pc_up}")  # "../.." for lib
    set(ATTNGEN_PC_PREFIX "\${pcfiledir}/${_attngen_pc_up}")
endif ()
foreach (_attngen_dir IN ITEMS LIBDIR INCLUDEDIR)
    if (IS_ABSOLUTE "${CMAKE_INSTALL_${_attngen_dir}}")
        set(ATTNGEN_PC_${_attngen_dir} "${CMAKE_INSTALL_${_attngen_dir}}")
    else ()
        set(ATTNGEN_PC_${_attngen_dir} "\${prefix}/${CMAKE_INSTALL_${_attngen_dir}}")
    endif ()
endforeach ()
configure_file("${PROJECT_SOURCE_DIR}/cmake/attngen.pc.in" "${PROJECT_BINARY_DIR}/attngen.pc"
               @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/attngen.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# For attngen_add_library (cmake/AttngenAddLibrary.cmake) in other builds: the knob table
# AttngenTunedParams.cmake reads (schedule_knobs.h, beside it), the generator executable, Halide's
# runtime headers the generated headers include, the cross-target libraries built here, and
# Halide's autoscheduler plugins.
if (TARGET attngen_generators)
    if (ATTNGEN_INSTALL_HALIDE)
        set_target_properties(attngen_generators PROPERTIES INSTALL_RPATH "$ORIGIN")
        file(GLOB _attngen_halide_plugins "${ATTNGEN_HALIDE_LIBDIR}/libautoschedule_*.so")
        # The wheel's library is a file named by its soname; install(FILES) copies what a
        # symlink points to, under the link's name.
        install(FILES "${_attngen_halide_lib}" ${_attngen_halide_plugins}
                DESTINATION "${_attngen_generator_dir}"
                PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                            WORLD_READ WORLD_EXECUTE)
        # Halide is MIT-licensed: its notice goes with its binary (the wheel's dist-info has it).
        file(GLOB _attngen_halide_license
             "${ATTNGEN_HALIDE_LIBDIR}/../../halide-*.dist-info/licenses/LICENSE*"
             "${ATTNGEN_HALIDE_LIBDIR}/../share/doc/Halide/LICENSE*")
        if (_attngen_halide_license)
            list(GET _attngen_halide_license 0 _attngen_halide_license)
            install(FILES "${_attngen_halide_license}" DESTINATION "${_attngen_generator_dir}"
                    RENAME HALIDE_LICENSE.txt)
        endif ()
    else ()
        set_target_properties(attngen_generators PROPERTIES INSTALL_RPATH "${ATTNGEN_HALIDE_LIBDIR}")
    endif ()
    install(TARGETS attngen_generators RUNTIME DESTINATION "${_attngen_generator_dir}")
    find_path(ATTNGEN_HALIDE_RUNTIME_INCLUDE HalideRuntime.h
              HINTS "${ATTNGEN_HALIDE_LIBDIR}/../include" NO_DEFAULT_PATH REQUIRED)
    install(FILES "${ATTNGEN_HALIDE_RUNTIME_INCLUDE}/HalideRuntime.h"
                  "${ATTNGEN_HALIDE_RUNTIME_INCLUDE}/HalideBuffer.h"
            DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/attngen/halide")
endif ()
install(FILES ${ATTNGEN_DETAIL_HEADERS} DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/attngen/detail")
install(FILES "${PROJECT_SOURCE_DIR}/cmake/AttngenAddLibrary.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/AttngenHostTargets.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/AttngenTunedParams.cmake"
              "${PROJECT_SOURCE_DIR}/generators/schedule_knobs.h"
        DESTINATION "${ATTNGEN_INSTALL_CMAKEDIR}")
if (ATTNGEN_ENABLE_AARCH64)
    set(_attngen_aarch64_runtime "${PROJECT_BINARY_DIR}/attngen_aarch64/runtime")
    install(CODE "
        file(GLOB libs \"${_attngen_aarch64_runtime}/libattngen.a\"
                       \"${_attngen_aarch64_runtime}/libattngen.so*\")
        file(INSTALL \${libs}
             DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/attngen/aarch64-linux-gnu\"
             FOLLOW_SYMLINK_CHAIN)")
endif ()
