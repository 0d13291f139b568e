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
