# The libFuzzer target over the C API (tests/fuzz/fuzz_capi.cpp), included by tests/CMakeLists.txt
# when ATTNGEN_FUZZ is on (cmake/AttngenSanitizers.cmake).
#
# libFuzzer needs clang, while this build may use GCC. So tests/fuzz is a small project of its
# own, configured with clang as a nested build: it compiles the runtime's sources and the fuzzer
# with -fsanitize=fuzzer,address,undefined and links the kernels this build already generated
# (Halide regenerates nothing). Everything it needs is written to fuzz_inputs.cmake here.
include(ExternalProject)

# The static libraries (as files) and other link items that <target> needs, depth first.
function(attngen_collect_link_items target out_var)
    set(items "")
    set(pending ${target})
    set(seen "")
    while (pending)
        list(POP_FRONT pending current)
        if (current IN_LIST seen)
            continue()
        endif ()
        list(APPEND seen ${current})
        if (NOT TARGET ${current})
            list(APPEND items "${current}")
            continue()
        endif ()
        get_target_property(type ${current} TYPE)
        get_target_property(aliased ${current} ALIASED_TARGET)
        if (aliased)
            list(PREPEND pending ${aliased})
            continue()
        endif ()
        if (type STREQUAL "STATIC_LIBRARY")
            list(APPEND items "$<TARGET_FILE:${current}>")
        endif ()
        set(deps "")
        foreach (property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
            get_target_property(value ${current} ${property})
            if (value)
                list(APPEND deps ${value})
            endif ()
        endforeach ()
        # Usage requirements of the link interface: $<LINK_ONLY:x> is x.
        list(TRANSFORM deps REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1")
        list(APPEND pending ${deps})
    endwhile ()
    set(${out_var} "${items}" PARENT_SCOPE)
endfunction()

get_target_property(_fuzz_runtime_sources attngen_core SOURCES)
get_target_property(_fuzz_runtime_dir attngen_core SOURCE_DIR)
list(TRANSFORM _fuzz_runtime_sources PREPEND "${_fuzz_runtime_dir}/" REGEX "^[^/$]")
attngen_collect_link_items(attngen_core _fuzz_link_items)
list(REMOVE_ITEM _fuzz_link_items "$<TARGET_FILE:attngen_core>")

set(_fuzz_inputs "${CMAKE_CURRENT_BINARY_DIR}/fuzz_inputs.cmake")
file(GENERATE OUTPUT "${_fuzz_inputs}" CONTENT
"set(ATTNGEN_SOURCE_DIR [[${PROJECT_SOURCE_DIR}]])
set(ATTNGEN_VERSION [[${PROJECT_VERSION}]])
set(ATTNGEN_RUNTIME_SOURCES [[${_fuzz_runtime_sources}]])
set(ATTNGEN_RUNTIME_INCLUDES [[$<TARGET_PROPERTY:attngen_core,INCLUDE_DIRECTORIES>]])
set(ATTNGEN_RUNTIME_DEFINITIONS [[$<TARGET_PROPERTY:attngen_core,COMPILE_DEFINITIONS>]])
set(ATTNGEN_LINK_ITEMS [[${_fuzz_link_items}]])
")

set(_fuzz_binary_dir "${CMAKE_CURRENT_BINARY_DIR}/fuzz")
ExternalProject_Add(attngen_fuzz_build
    SOURCE_DIR "${CMAKE_CURRENT_SOURCE_DIR}/fuzz"
    BINARY_DIR "${_fuzz_binary_dir}"
    CMAKE_GENERATOR "${CMAKE_GENERATOR}"
    CMAKE_ARGS
        "-DCMAKE_C_COMPILER=${ATTNGEN_FUZZ_CC}"
        "-DCMAKE_CXX_COMPILER=${ATTNGEN_FUZZ_CXX}"
        "-DCMAKE_BUILD_TYPE=Release"
        "-DATTNGEN_FUZZ_INPUTS=${_fuzz_inputs}"
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON
    DEPENDS attngen_core
    USES_TERMINAL_BUILD ON)

set(ATTNGEN_FUZZER "${_fuzz_binary_dir}/attngen_fuzz_capi")
# A short run in CI: first every input of the checked-in corpus (regressions), then new inputs
# for at most ATTNGEN_FUZZ_SECONDS seconds or ATTNGEN_FUZZ_RUNS inputs, from a fixed seed.
add_test(NAME attngen_fuzz_capi
         COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh" "${ATTNGEN_FUZZER}"
                 "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus" "${ATTNGEN_FUZZ_SECONDS}"
                 "${ATTNGEN_FUZZ_RUNS}")
math(EXPR _fuzz_timeout "${ATTNGEN_FUZZ_SECONDS} + 300")
set_tests_properties(attngen_fuzz_capi PROPERTIES
                     LABELS "fuzz;sanitize"
                     TIMEOUT ${_fuzz_timeout}
                     ENVIRONMENT
                     "ASAN_OPTIONS=${ATTNGEN_ASAN_OPTIONS};UBSAN_OPTIONS=${ATTNGEN_UBSAN_OPTIONS}")
