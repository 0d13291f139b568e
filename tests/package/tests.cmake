# Tests of what the build ships: the C example against libattngen.so, and an install into a
# temporary prefix checked for the DESIGN.md layout, the exported symbols, find_package and
# pkg-config (the C example built with cc, static and shared).
add_test(NAME c_api_example COMMAND attngen_c_example)
add_test(NAME install_package
         COMMAND "${CMAKE_CURRENT_LIST_DIR}/check_install.sh" "${PROJECT_BINARY_DIR}"
                 "${PROJECT_SOURCE_DIR}" "${CMAKE_COMMAND}" "${CMAKE_GENERATOR}")
set_tests_properties(c_api_example install_package PROPERTIES LABELS ${ATTNGEN_TEST_LABEL})

# examples/consumer built against that install: attngen_add_library for the host and aarch64,
# from an install moved away from its prefix where it carries its own Halide.
if (ATTNGEN_INSTALL_HALIDE)
    set(_attngen_install_kind self-contained)
else ()
    set(_attngen_install_kind uses-build-halide)
endif ()
add_test(NAME consumer_package
         COMMAND "${CMAKE_CURRENT_LIST_DIR}/check_consumer.sh" "${PROJECT_BINARY_DIR}"
                 "${PROJECT_SOURCE_DIR}" "${CMAKE_COMMAND}" "${CMAKE_GENERATOR}"
                 "${_attngen_install_kind}")
set_tests_properties(consumer_package PROPERTIES LABELS ${ATTNGEN_TEST_LABEL} TIMEOUT 900)
