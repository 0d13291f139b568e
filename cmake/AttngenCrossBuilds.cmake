# Cross-target libraries as superbuild steps: each is this same project configured with a
# toolchain file, reusing the generator executable of this (host) build, which is Halide's
# cross-compiling workflow. Its test suite runs under an emulator as one CTest test here,
# labelled with the target's name.
include(ExternalProject)

# attngen_add_cross_build(<name> TOOLCHAIN <file> LABEL <ctest label>)
function(attngen_add_cross_build NAME)
    cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TOOLCHAIN;LABEL" "")
    set(binary_dir "${PROJECT_BINARY_DIR}/${NAME}")
    ExternalProject_Add(${NAME}
        SOURCE_DIR "${PROJECT_SOURCE_DIR}"
        BINARY_DIR "${binary_dir}"
        CMAKE_GENERATOR "${CMAKE_GENERATOR}"
        CMAKE_ARGS
            "-DCMAKE_TOOLCHAIN_FILE=${ARG_TOOLCHAIN}"
            "-DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}"
            # The wheel's own package, not the venv shim that needs a host Python to load.
            "-DHalide_DIR=${HalideHelpers_DIR}/../Halide"
            "-DHalideHelpers_DIR=${HalideHelpers_DIR}"
            "-Dattngen-halide_generators_ROOT=${PROJECT_BINARY_DIR}"
            "-DATTNGEN_TEST_LABEL=${ARG_LABEL}"
            -DATTNGEN_BUILD_BENCH=OFF
            -DATTNGEN_ENABLE_AARCH64=OFF
        INSTALL_COMMAND ""
        BUILD_ALWAYS ON
        DEPENDS attngen_generators
        USES_TERMINAL_CONFIGURE ON
        USES_TERMINAL_BUILD ON)
    add_test(NAME ${NAME}_suite
             COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${binary_dir}" --output-on-failure
                     -j ${ATTNGEN_TEST_JOBS})
    set_tests_properties(${NAME}_suite PROPERTIES LABELS "${ARG_LABEL}" TIMEOUT 3000)
endfunction()
