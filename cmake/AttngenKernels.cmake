# attngen_add_kernel(<name> GENERATOR <generator> [PARAMS k=v ...] [TARGETS t ...]
#                    [FIRST_TARGETS t ...])
#
# Every attngen kernel is built through this one function: the same generator executable, the
# same shared Halide runtime, the same features, and the kernel's function named after the
# library so the runtime can call it. Schedule knobs (GeneratorParams) go in PARAMS. Without
# TARGETS a kernel is built for the host targets, after FIRST_TARGETS (richer variants that
# only this kernel has).
function(attngen_add_kernel NAME)
    cmake_parse_arguments(PARSE_ARGV 1 ARG "" "GENERATOR;RUNTIME;AUTOSCHEDULER"
                          "PARAMS;TARGETS;FIRST_TARGETS")
    if (NOT ARG_GENERATOR)
        message(FATAL_ERROR "attngen_add_kernel(${NAME}): GENERATOR is required")
    endif ()
    if (NOT ARG_TARGETS)
        # The host CPU kernels follow ATTNGEN_SCHEDULE (AttngenTargets.cmake).
        set(ARG_TARGETS ${ARG_FIRST_TARGETS} ${ATTNGEN_HOST_TARGETS})
        list(PREPEND ARG_PARAMS ${ATTNGEN_CPU_SCHEDULE_PARAMS})
        if (ATTNGEN_CPU_AUTOSCHEDULER AND NOT ARG_AUTOSCHEDULER)
            set(ARG_AUTOSCHEDULER "${ATTNGEN_CPU_AUTOSCHEDULER}")
        endif ()
    endif ()
    if (NOT ARG_RUNTIME)
        set(ARG_RUNTIME attngen_halide_runtime)
    endif ()
    set(targets "")
    foreach (t IN LISTS ARG_TARGETS)
        foreach (f IN LISTS ATTNGEN_KERNEL_FEATURES)
            string(APPEND t "-${f}")
        endforeach ()
        list(APPEND targets "${t}")
    endforeach ()
    set(autoscheduler "")
    if (ARG_AUTOSCHEDULER)
        set(autoscheduler AUTOSCHEDULER "${ARG_AUTOSCHEDULER}")
    endif ()
    add_halide_library(${NAME}
                       FROM attngen_generators
                       GENERATOR ${ARG_GENERATOR}
                       FUNCTION_NAME ${NAME}
                       TARGETS ${targets}
                       USE_RUNTIME ${ARG_RUNTIME}
                       PARAMS ${ARG_PARAMS}
                       ${autoscheduler})
endfunction()

# attngen_bundle_static_library(<target> OUTPUT <file.a> LIBRARIES <static targets...>)
#
# Merges static libraries into one archive with an ar MRI script.
function(attngen_bundle_static_library TARGET)
    cmake_parse_arguments(PARSE_ARGV 1 ARG "" "OUTPUT" "LIBRARIES")
    set(script "CREATE ${ARG_OUTPUT}\n")
    set(files "")
    foreach (lib IN LISTS ARG_LIBRARIES)
        string(APPEND script "ADDLIB $<TARGET_FILE:${lib}>\n")
        list(APPEND files "$<TARGET_FILE:${lib}>")
    endforeach ()
    string(APPEND script "SAVE\nEND\n")
    set(script_file "${CMAKE_CURRENT_BINARY_DIR}/${TARGET}.mri")
    file(GENERATE OUTPUT "${script_file}" CONTENT "${script}")
    add_custom_command(OUTPUT "${ARG_OUTPUT}"
                       COMMAND "${CMAKE_COMMAND}" -E rm -f "${ARG_OUTPUT}"
                       COMMAND sh -c "\"${CMAKE_AR}\" -M < \"${script_file}\""
                       DEPENDS ${ARG_LIBRARIES} ${files} "${script_file}"
                       COMMENT "Bundling ${ARG_OUTPUT}"
                       VERBATIM)
    add_custom_target(${TARGET} ALL DEPENDS "${ARG_OUTPUT}")
endfunction()
