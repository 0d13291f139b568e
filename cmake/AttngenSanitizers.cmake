# Robustness builds that reuse the kernels of the normal build (Halide regenerates nothing):
#
#   ATTNGEN_SANITIZER_TESTS  a copy of the runtime library and of the test suite compiled with
#                            AddressSanitizer (LeakSanitizer included) and
#                            UndefinedBehaviorSanitizer, linking the same generated kernels.
#                            The Halide AOT kernels and Halide runtime are not instrumented.
#                            CTest label `sanitize`.
#   ATTNGEN_FUZZ             a libFuzzer target over the C API (tests/fuzz), built by clang in a
#                            nested build against the same kernels. CTest label `fuzz`.
#
# Both are on by default for a native build whose tools support them.
include(CheckCXXSourceCompiles)
include(CMakePushCheckState)

# Every report is fatal. The enum check alone is recoverable so that the known findings listed
# in AttngenSanitizers.supp can be suppressed (suppressions need recoverable checks);
# halt_on_error=1 still stops at any other.
# -O1 -g1 (after the build type's -O3): the usual ASan setting, readable stack traces with line
# numbers, and about half the compile time of -O3 -g for the sanitized copy of the suite.
set(ATTNGEN_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer
                            -fno-sanitize-recover=all -fsanitize-recover=enum -O1 -g1)
set(ATTNGEN_UBSAN_SUPPRESSIONS "${CMAKE_CURRENT_LIST_DIR}/AttngenSanitizers.supp")
# detect_leaks=1 is the default on x86-64 Linux; said here so no environment can turn it off.
set(ATTNGEN_ASAN_OPTIONS
    "detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1")
set(ATTNGEN_UBSAN_OPTIONS
    "print_stacktrace=1:halt_on_error=1:suppressions=${ATTNGEN_UBSAN_SUPPRESSIONS}")

cmake_push_check_state(RESET)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=address,undefined")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=address,undefined")
check_cxx_source_compiles("int main() { return 0; }" ATTNGEN_HAVE_SANITIZERS)
cmake_pop_check_state()

if (NOT CMAKE_CROSSCOMPILING AND ATTNGEN_HAVE_SANITIZERS)
    set(_attngen_sanitizer_default ON)
else ()
    set(_attngen_sanitizer_default OFF)
endif ()
option(ATTNGEN_SANITIZER_TESTS
       "Build and run an ASan+UBSan copy of the runtime and test suite (label sanitize)"
       ${_attngen_sanitizer_default})
if (ATTNGEN_SANITIZER_TESTS AND NOT ATTNGEN_HAVE_SANITIZERS)
    message(FATAL_ERROR "ATTNGEN_SANITIZER_TESTS: ${CMAKE_CXX_COMPILER} cannot build and link "
                        "-fsanitize=address,undefined")
endif ()

# libFuzzer comes with clang only: the fuzzer is a nested build with clang whatever compiler
# this build uses. It needs clang++ and its runtime (Debian: clang-14, libclang-rt-14-dev).
find_program(ATTNGEN_FUZZ_CXX NAMES clang++ clang++-14 clang++-15 clang++-16 DOC
             "clang++ that builds the libFuzzer target")
find_program(ATTNGEN_FUZZ_CC NAMES clang clang-14 clang-15 clang-16)
set(_attngen_fuzz_default OFF)
if (NOT CMAKE_CROSSCOMPILING AND ATTNGEN_FUZZ_CXX AND ATTNGEN_FUZZ_CC)
    if (NOT DEFINED ATTNGEN_FUZZ_CXX_WORKS)
        set(_probe "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/attngen_fuzz_probe")
        file(WRITE "${_probe}.cpp"
             "#include <cstddef>\n#include <cstdint>\n"
             "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t *, size_t) { return 0; }\n")
        execute_process(COMMAND "${ATTNGEN_FUZZ_CXX}" -fsanitize=fuzzer,address,undefined
                                "${_probe}.cpp" -o "${_probe}"
                        RESULT_VARIABLE _probe_result OUTPUT_QUIET ERROR_QUIET)
        if (_probe_result EQUAL 0)
            set(ATTNGEN_FUZZ_CXX_WORKS ON CACHE INTERNAL "clang++ links -fsanitize=fuzzer")
        else ()
            set(ATTNGEN_FUZZ_CXX_WORKS OFF CACHE INTERNAL "clang++ links -fsanitize=fuzzer")
        endif ()
    endif ()
    set(_attngen_fuzz_default ${ATTNGEN_FUZZ_CXX_WORKS})
endif ()
option(ATTNGEN_FUZZ "Build the libFuzzer target over the C API and run it briefly (label fuzz)"
       ${_attngen_fuzz_default})
set(ATTNGEN_FUZZ_SECONDS 60 CACHE STRING "How long the CTest fuzz run may fuzz (seconds)")
set(ATTNGEN_FUZZ_RUNS 100000 CACHE STRING "At most this many fuzz inputs in the CTest fuzz run")

# attngen_add_sanitized_copy(<new target> OF <target> [REPLACE <dependency> <replacement>])
#
# Defines <new target> from the sources, include directories, definitions and link libraries of
# <target> (which must be defined in the calling directory, so its directory-level options
# apply too), compiled and linked with the sanitizers. REPLACE swaps one link dependency, e.g.
# the library under test for its sanitized copy.
function(attngen_add_sanitized_copy NAME)
    cmake_parse_arguments(PARSE_ARGV 1 ARG "" "OF" "REPLACE")
    get_target_property(type ${ARG_OF} TYPE)
    get_target_property(sources ${ARG_OF} SOURCES)
    get_target_property(source_dir ${ARG_OF} SOURCE_DIR)
    list(TRANSFORM sources PREPEND "${source_dir}/" REGEX "^[^/$]")
    if (type STREQUAL "EXECUTABLE")
        add_executable(${NAME} ${sources})
    else ()
        add_library(${NAME} STATIC ${sources})
    endif ()
    foreach (property INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS COMPILE_FEATURES
                      INTERFACE_INCLUDE_DIRECTORIES CXX_VISIBILITY_PRESET
                      VISIBILITY_INLINES_HIDDEN)
        get_target_property(value ${ARG_OF} ${property})
        if (value)
            set_property(TARGET ${NAME} PROPERTY ${property} "${value}")
        endif ()
    endforeach ()
    get_target_property(libraries ${ARG_OF} LINK_LIBRARIES)
    if (libraries)
        if (ARG_REPLACE)
            list(GET ARG_REPLACE 0 old)
            list(GET ARG_REPLACE 1 new)
            list(TRANSFORM libraries REPLACE "^${old}$" "${new}")
        endif ()
        target_link_libraries(${NAME} PRIVATE ${libraries})
    endif ()
    target_compile_options(${NAME} PRIVATE ${ATTNGEN_SANITIZER_FLAGS})
    target_link_options(${NAME} PRIVATE ${ATTNGEN_SANITIZER_FLAGS})
endfunction()

# attngen_add_sanitized_test(<name> COMMAND <command...> [LABELS ...])
#
# A CTest test that fails on any sanitizer report, leaks included.
function(attngen_add_sanitized_test NAME)
    cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "COMMAND;LABELS")
    add_test(NAME ${NAME} COMMAND ${ARG_COMMAND})
    set_tests_properties(${NAME} PROPERTIES
                         ENVIRONMENT
                         "ASAN_OPTIONS=${ATTNGEN_ASAN_OPTIONS};UBSAN_OPTIONS=${ATTNGEN_UBSAN_OPTIONS}"
                         LABELS "sanitize;${ARG_LABELS}")
endfunction()
