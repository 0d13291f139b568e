# attngen_read_tuned_params(<out-var> <file> [SHAPE <shape class>])
#
# Reads a tuned-schedule file into generator arguments ("knob=value" each). Two forms:
#   {"params": {"<knob>": <int>, ...}}                       (attngen_add_library TUNED_FILE)
#   {"build_shape": "<class>", "shapes": {"<class>": {"params": {...}, ...}, ...}}
#                                                             (written by attngen-autotune)
# From the second, SHAPE picks a shape class (default: build_shape). A malformed file stops
# the configure with a message naming the file and what is wrong.
include_guard(GLOBAL)

# The knobs a tuned file may set: the KNOB lines of schedule_knobs.h, the one list of them
# (installed beside this file; in the source tree it is in generators/). tests/knobs checks
# that this reads the same names the compiler does.
function(attngen_read_schedule_knobs OUT HEADER)
    # Read whole, not line by line: the lines end in a backslash, which would escape the
    # separators of a CMake list. A knob added to the header re-runs the configure (without it,
    # an existing build kept the old list until someone re-ran CMake by hand).
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${HEADER}")
    file(READ "${HEADER}" text)
    string(REGEX MATCHALL "\n *KNOB\\([a-z0-9_]+," knobs "${text}")
    set(names "")
    foreach (knob IN LISTS knobs)
        string(REGEX REPLACE "^\n *KNOB\\(([a-z0-9_]+),$" "\\1" name "${knob}")
        list(APPEND names "${name}")
    endforeach ()
    if (NOT names)
        message(FATAL_ERROR "attngen: no KNOB lines in ${HEADER}")
    endif ()
    set(${OUT} "${names}" PARENT_SCOPE)
endfunction()

if (EXISTS "${CMAKE_CURRENT_LIST_DIR}/schedule_knobs.h")
    set(ATTNGEN_SCHEDULE_KNOBS_HEADER "${CMAKE_CURRENT_LIST_DIR}/schedule_knobs.h")
else ()
    set(ATTNGEN_SCHEDULE_KNOBS_HEADER "${CMAKE_CURRENT_LIST_DIR}/../generators/schedule_knobs.h")
endif ()
attngen_read_schedule_knobs(ATTNGEN_TUNABLE_PARAMS "${ATTNGEN_SCHEDULE_KNOBS_HEADER}")

function(attngen_read_tuned_params OUT FILE)
    cmake_parse_arguments(PARSE_ARGV 2 ARG "" "SHAPE" "")
    if (NOT EXISTS "${FILE}")
        message(FATAL_ERROR "attngen: tuned file ${FILE} does not exist")
    endif ()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${FILE}")
    file(READ "${FILE}" json)
    set(expected "expected {\"params\": {\"<knob>\": <integer>, ...}} or attngen-autotune's "
                 "{\"build_shape\": ..., \"shapes\": {...}}")
    string(JSON params ERROR_VARIABLE error GET "${json}" params)
    if (error)
        string(JSON shapes ERROR_VARIABLE error GET "${json}" shapes)
        if (error)
            message(FATAL_ERROR "attngen: tuned file ${FILE} is malformed: ${error} (${expected})")
        endif ()
        if (NOT ARG_SHAPE)
            string(JSON ARG_SHAPE ERROR_VARIABLE error GET "${json}" build_shape)
            if (error)
                message(FATAL_ERROR "attngen: tuned file ${FILE} has no build_shape: ${error}")
            endif ()
        endif ()
        string(JSON params ERROR_VARIABLE error GET "${shapes}" "${ARG_SHAPE}" params)
        if (error)
            message(FATAL_ERROR "attngen: tuned file ${FILE} has no params for shape class "
                                "'${ARG_SHAPE}': ${error}")
        endif ()
    endif ()
    string(JSON type ERROR_VARIABLE error TYPE "${params}")
    if (error OR NOT type STREQUAL "OBJECT")
        message(FATAL_ERROR "attngen: tuned file ${FILE}: \"params\" is not an object")
    endif ()
    string(JSON count LENGTH "${params}")
    set(args "")
    if (count GREATER 0)
        math(EXPR last "${count} - 1")
        foreach (i RANGE ${last})
            string(JSON key MEMBER "${params}" ${i})
            string(JSON value GET "${params}" "${key}")
            if (NOT key IN_LIST ATTNGEN_TUNABLE_PARAMS)
                message(FATAL_ERROR "attngen: tuned file ${FILE}: unknown knob \"${key}\" "
                                    "(known: ${ATTNGEN_TUNABLE_PARAMS})")
            endif ()
            if (NOT value MATCHES "^[0-9]+$")
                message(FATAL_ERROR "attngen: tuned file ${FILE}: \"${key}\" must be a "
                                    "non-negative integer, got \"${value}\"")
            endif ()
            list(APPEND args "${key}=${value}")
        endforeach ()
    endif ()
    set(${OUT} "${args}" PARENT_SCOPE)
endfunction()
