# Halide targets the host library is built for. Several targets of one architecture in one
# library give run-time dispatch to the richest feature set the CPU has; the last is the
# fallback every CPU of the architecture runs.
include(AttngenHostTargets)
attngen_default_cpu_targets(_attngen_default_host_targets "${CMAKE_SYSTEM_PROCESSOR}")
set(ATTNGEN_HOST_TARGETS "${_attngen_default_host_targets}" CACHE STRING
    "Halide targets of the CPU library (a list; the last is the fallback)")

# Features every attngen kernel carries: the runtime passes a per-call user context, through
# which Halide's errors reach the caller instead of aborting.
set(ATTNGEN_KERNEL_FEATURES user_context)

# GPU libraries (x86-64 host code plus device code). One GPU schedule serves both APIs.
# CUDA: PTX for compute capability 7.0, the oldest Halide target with the sync warp
# intrinsics of Volta and later; the driver JIT-compiles that PTX for the GPU at hand (sm_80
# A100, sm_90 H100), and the kernels use no newer instruction (Halide 21 emits no tensor-core
# code). OpenCL: run by this project's tests through PoCL on the CPU.
set(ATTNGEN_CUDA_TARGET "x86-64-linux-cuda-cuda_capability_70" CACHE STRING
    "Halide target of the CUDA library")
set(ATTNGEN_OPENCL_TARGET "x86-64-linux-opencl" CACHE STRING
    "Halide target of the OpenCL library")

# Schedules of the CPU kernels: attngen's own with its defaults, the knobs attngen-autotune
# found for this architecture (generators/tuned/<arch>-<bits>-<os>.json, the build_shape entry;
# the default whenever that file exists), or one of Halide's autoschedulers (for comparisons:
# they plan for the generators' estimates, and much smaller calls are refused).
include(AttngenTunedParams)
list(GET ATTNGEN_HOST_TARGETS 0 _attngen_first_target)
string(REGEX MATCH "^[^-]+-[^-]+-[^-]+" _attngen_triple "${_attngen_first_target}")
set(ATTNGEN_TUNED_FILE "${PROJECT_SOURCE_DIR}/generators/tuned/${_attngen_triple}.json"
    CACHE FILEPATH "Tuned schedule knobs of the CPU kernels (attngen-autotune's output)")
if (EXISTS "${ATTNGEN_TUNED_FILE}")
    set(_attngen_schedule_default tuned)
else ()
    set(_attngen_schedule_default default)
endif ()
set(ATTNGEN_SCHEDULE "${_attngen_schedule_default}" CACHE STRING
    "CPU kernel schedules: default, tuned, Mullapudi2016, Li2018 or Adams2019")
set(ATTNGEN_CPU_SCHEDULE_PARAMS "")
# GPU schedule knobs for the CUDA and OpenCL kernels (generators/schedule_knobs.h, the gpu_
# ones), a ;-list of knob=value; empty: each knob's default. A way to time another setting in
# the library, e.g.
# -DATTNGEN_GPU_SCHEDULE_PARAMS="gpu_few_rows_split=64;gpu_few_rows_columns=32".
set(ATTNGEN_GPU_SCHEDULE_PARAMS "" CACHE STRING "GPU schedule knobs, knob=value;...")
set(ATTNGEN_CPU_AUTOSCHEDULER "")
if (ATTNGEN_SCHEDULE STREQUAL "tuned")
    attngen_read_tuned_params(ATTNGEN_CPU_SCHEDULE_PARAMS "${ATTNGEN_TUNED_FILE}")
    message(STATUS "attngen: CPU schedules tuned (${ATTNGEN_TUNED_FILE}): "
                   "${ATTNGEN_CPU_SCHEDULE_PARAMS}")
elseif (ATTNGEN_SCHEDULE MATCHES "^(Mullapudi2016|Li2018|Adams2019)$")
    set(ATTNGEN_CPU_AUTOSCHEDULER "Halide::${ATTNGEN_SCHEDULE}")
elseif (NOT ATTNGEN_SCHEDULE STREQUAL "default")
    message(FATAL_ERROR "ATTNGEN_SCHEDULE must be default, tuned, Mullapudi2016, Li2018 or "
                        "Adams2019, got '${ATTNGEN_SCHEDULE}'")
endif ()
