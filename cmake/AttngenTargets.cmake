# Halide targets the host library is built for. Several targets of one architecture in one
# library give run-time dispatch to the richest feature set the CPU has; the last is the
# fallback every CPU of the architecture runs.
if (CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    # AVX-512 pays even on a CPU that runs it on 256-bit units (AMD Zen 4): its 32 registers
    # hold a 2 x 12 register tile. Measured beside the AVX2 kernels on a 2-core EPYC
    # (attngen_bench, bert-128 / tutorial / tutorial-cross MHA forward): 4.2-4.5 ms vs
    # 6.3-6.8 ms, 8.5 vs 11.9 ms, 0.86 vs 1.36 ms.
    set(_attngen_default_host_targets
        x86-64-linux-avx512_skylake
        x86-64-linux-avx2-fma-f16c
        x86-64-linux-sse41
        x86-64-linux)
elseif (CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(_attngen_default_host_targets
        arm-64-linux-arm_dot_prod-arm_fp16
        arm-64-linux)
else ()
    set(_attngen_default_host_targets host)
endif ()
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
