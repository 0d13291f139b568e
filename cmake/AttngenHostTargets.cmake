# attngen_default_cpu_targets(<out-var> <processor>)
#
# The Halide targets of attngen's CPU library for a processor (CMAKE_SYSTEM_PROCESSOR): several
# targets of one architecture in one library give run-time dispatch to the richest feature set
# the CPU has; the last is the fallback every CPU of the architecture runs. Shared by this
# project's build and by attngen_add_library in other builds.
function(attngen_default_cpu_targets OUT PROCESSOR)
    if (PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
        # AVX-512 pays even on a CPU that runs it on 256-bit units (AMD Zen 4): vectors of 16
        # floats, and 32 registers for the register tiles (resolve_cpu_knobs; before f83f912 the
        # AVX-512 variants were given AVX2's tiles, so the gain below came from the vector width
        # alone). Measured beside the AVX2 kernels on a 2-core EPYC
        # (attngen_bench, bert-128 / tutorial / tutorial-cross MHA forward): 4.2-4.5 ms vs
        # 6.3-6.8 ms, 8.5 vs 11.9 ms, 0.86 vs 1.36 ms.
        set(targets x86-64-linux-avx512_skylake x86-64-linux-avx2-fma-f16c x86-64-linux-sse41
                    x86-64-linux)
    elseif (PROCESSOR MATCHES "^(aarch64|arm64)$")
        set(targets arm-64-linux-arm_dot_prod-arm_fp16 arm-64-linux)
    else ()
        set(targets host)
    endif ()
    set(${OUT} "${targets}" PARENT_SCOPE)
endfunction()
