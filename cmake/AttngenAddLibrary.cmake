# attngen_add_library(<name>
#     TARGETS <host | Halide targets of one architecture...>
#     [HEAD_DIM <n>] [NUM_HEADS <h>] [CAUSAL none|top_left|bottom_right] [WEIGHTS_OUTPUT]
#     [SCHEDULE default|tuned|Mullapudi2016|Li2018|Anderson2021|Adams2019]
#     [TUNED_FILE <file.json>])
#
# Generates, at build time, a fused MHA forward kernel with the given sizes fixed, using the
# installed attngen generator. Gives the static library target <name> (link it) and the header
# <name>.h (include it); the kernel's function is <name>, with the signature and layouts the
# README describes ("Use attngen from your build"). Several targets of one architecture give
# run-time dispatch; "host" is attngen's own list for this build's CMAKE_SYSTEM_PROCESSOR.
# SCHEDULE tuned takes the GeneratorParams of TUNED_FILE (AttngenTunedParams.cmake: a
# {"params": {...}} object, or a file attngen-autotune wrote).
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/AttngenHostTargets.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/AttngenTunedParams.cmake")

function(attngen_add_library NAME)
    cmake_parse_arguments(PARSE_ARGV 1 ARG "WEIGHTS_OUTPUT"
                          "HEAD_DIM;NUM_HEADS;CAUSAL;SCHEDULE;TUNED_FILE" "TARGETS")
    set(where "attngen_add_library(${NAME})")
    if (ARG_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "${where}: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
    endif ()
    # A keyword given an empty value (HEAD_DIM ${UNSET}) would quietly build the generic kernel.
    if (ARG_KEYWORDS_MISSING_VALUES)
        message(FATAL_ERROR "${where}: no value given for ${ARG_KEYWORDS_MISSING_VALUES}")
    endif ()
    if (NOT ARG_TARGETS)
        message(FATAL_ERROR "${where}: TARGETS is required (host, or Halide targets)")
    endif ()
    if (NOT ATTNGEN_GENERATOR OR NOT EXISTS "${ATTNGEN_GENERATOR}")
        message(FATAL_ERROR "${where}: the attngen generator is not installed "
                            "(ATTNGEN_GENERATOR='${ATTNGEN_GENERATOR}')")
    endif ()

    # Targets: one architecture per library; its attngen library supplies the Halide runtime.
    if (ARG_TARGETS STREQUAL "host")
        attngen_default_cpu_targets(targets "${CMAKE_SYSTEM_PROCESSOR}")
    else ()
        set(targets ${ARG_TARGETS})
    endif ()
    set(arch "")
    foreach (t IN LISTS targets)
        string(REGEX MATCH "^[a-z0-9]+-[0-9]+" t_arch "${t}")
        if (NOT arch)
            set(arch "${t_arch}")
        elseif (NOT t_arch STREQUAL arch)
            message(FATAL_ERROR "${where}: TARGETS mix architectures (${targets}); "
                                "call attngen_add_library once per architecture")
        endif ()
    endforeach ()
    # attngen::attngen is the library of the architecture being built (attngenConfig.cmake),
    # which also supplies the Halide runtime.
    if (arch STREQUAL "x86-64")
        set(processor "^(x86_64|AMD64|amd64)$")
    elseif (arch STREQUAL "arm-64")
        set(processor "^(aarch64|arm64)$")
    else ()
        message(FATAL_ERROR "${where}: unsupported architecture '${arch}' in TARGETS ${targets}")
    endif ()
    if (NOT CMAKE_SYSTEM_PROCESSOR MATCHES "${processor}")
        message(FATAL_ERROR "${where}: TARGETS ${targets} are ${arch}, but this build is for "
                            "${CMAKE_SYSTEM_PROCESSOR} (use a toolchain file for ${arch})")
    endif ()
    set(runtime attngen::attngen)
    set(target_arg "")
    foreach (t IN LISTS targets)
        list(APPEND target_arg "${t}-user_context-no_runtime")
    endforeach ()
    list(JOIN target_arg "," target_arg)

    # Fixed sizes.
    set(params "")
    foreach (size HEAD_DIM NUM_HEADS)
        if (DEFINED ARG_${size})
            if (NOT ARG_${size} MATCHES "^[1-9][0-9]*$")
                message(FATAL_ERROR "${where}: ${size} must be a positive integer, got "
                                    "'${ARG_${size}}'")
            endif ()
            string(TOLOWER "${size}" lower)
            list(APPEND params "fixed_${lower}=${ARG_${size}}")
        endif ()
    endforeach ()
    if (DEFINED ARG_CAUSAL)
        set(causal_values none top_left bottom_right)
        list(FIND causal_values "${ARG_CAUSAL}" causal)
        if (causal LESS 0)
            message(FATAL_ERROR "${where}: CAUSAL must be none, top_left or bottom_right, got "
                                "'${ARG_CAUSAL}'")
        endif ()
        list(APPEND params "fixed_causal=${causal}")
    endif ()
    if (ARG_WEIGHTS_OUTPUT)
        list(APPEND params "weights_output=true")
    endif ()

    # Schedule.
    set(plugin "")
    if (NOT ARG_SCHEDULE)
        set(ARG_SCHEDULE default)
    endif ()
    if (ARG_SCHEDULE STREQUAL "tuned")
        if (NOT ARG_TUNED_FILE)
            message(FATAL_ERROR "${where}: SCHEDULE tuned needs TUNED_FILE")
        endif ()
        # Relative to the calling CMakeLists.txt, as a source file is.
        get_filename_component(ARG_TUNED_FILE "${ARG_TUNED_FILE}" ABSOLUTE
                               BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
        attngen_read_tuned_params(tuned "${ARG_TUNED_FILE}")
        list(APPEND params ${tuned})
    elseif (ARG_SCHEDULE MATCHES "^(Adams2019|Mullapudi2016|Li2018|Anderson2021)$")
        string(TOLOWER "${ARG_SCHEDULE}" lower)
        set(plugin_file "${ATTNGEN_HALIDE_LIBDIR}/libautoschedule_${lower}.so")
        if (NOT EXISTS "${plugin_file}")
            message(FATAL_ERROR "${where}: the ${ARG_SCHEDULE} plugin is missing: ${plugin_file}")
        endif ()
        set(plugin -p "${plugin_file}")
        # Halide's autoschedulers plan for the generator's estimates (BERT-base: heads of 64,
        # 128 tokens); their tiles may not fit much smaller calls, which then fail with a
        # Halide bounds error (a status, never a wrong answer: inputs are read through
        # repeat_edge). examples/consumer checks Li2018 against the generic kernel.
        message(STATUS "${where}: ${ARG_SCHEDULE} plans for sizes like heads of 64 and 128 "
                       "tokens; much smaller calls may be refused with a bounds error")
        list(APPEND params "autoscheduler=${ARG_SCHEDULE}")
    elseif (NOT ARG_SCHEDULE STREQUAL "default")
        message(FATAL_ERROR "${where}: SCHEDULE must be default, tuned, Mullapudi2016, Li2018, "
                            "Anderson2021 or Adams2019, got '${ARG_SCHEDULE}'")
    endif ()
    if (ARG_TUNED_FILE AND NOT ARG_SCHEDULE STREQUAL "tuned")
        message(FATAL_ERROR "${where}: TUNED_FILE is only read with SCHEDULE tuned")
    endif ()

    set(dir "${CMAKE_CURRENT_BINARY_DIR}/${NAME}.attngen")
    set(outputs "${dir}/${NAME}.a" "${dir}/${NAME}.h")
    add_custom_command(
        OUTPUT ${outputs}
        COMMAND "${CMAKE_COMMAND}" -E make_directory "${dir}"
        COMMAND "${ATTNGEN_GENERATOR}" -g attngen_mha_forward -o "${dir}" -e static_library,h
                -f "${NAME}" ${plugin} "target=${target_arg}" ${params}
        DEPENDS "${ATTNGEN_GENERATOR}" ${ARG_TUNED_FILE}
        COMMENT "attngen: generating ${NAME} for ${targets}"
        VERBATIM)
    add_custom_target(${NAME}.generate DEPENDS ${outputs})
    add_library(${NAME} STATIC IMPORTED GLOBAL)
    file(MAKE_DIRECTORY "${dir}")
    set_target_properties(${NAME} PROPERTIES
        IMPORTED_LOCATION "${dir}/${NAME}.a"
        INTERFACE_INCLUDE_DIRECTORIES "${dir};${attngen_INCLUDE_DIR}/attngen/halide"
        INTERFACE_LINK_LIBRARIES "${runtime}"
        # attngen/specialized.hpp and the detail headers it includes are C++17.
        INTERFACE_COMPILE_FEATURES cxx_std_17)
    add_dependencies(${NAME} ${NAME}.generate)
endfunction()
