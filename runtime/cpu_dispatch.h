// Run-time choice among the CPU variants of a multi-target kernel library.
#ifndef ATTNGEN_RUNTIME_CPU_DISPATCH_H
#define ATTNGEN_RUNTIME_CPU_DISPATCH_H

namespace attngen::rt {

// Halide picks the first variant whose features the CPU has; of the bfloat16 kernels' AVX512-BF16
// variant, only where vdpbf16ps pays on this CPU (bf16_dot_product_pays, measured once); of the
// bfloat16 kernels' AMX variant, only where Linux grants the tile state
// (amx_tile_state_granted). ATTNGEN_CPU_DISPATCH sets that choice, so every variant can be
// tested (and compared) on one machine:
//   avx512_bf16  the AVX512-BF16 variant wherever the CPU has the instructions, pays or not (the
//             AMX variant refused)
//   avx512    AVX-512 without AVX512-BF16 (the bfloat16 kernels' Zen 4 and AMX variants refused)
//   avx2      no AVX-512 variants        sse41     nothing above SSE 4.1
//   baseline  the plain x86-64 variant    (unset or anything else: no cap)
// Read once, at the first kernel call of the process. Idempotent.
void install_cpu_dispatch_policy();

// The variant of the library's CPU kernels that calls run, as the policy above picks among them
// (the bfloat16 kernels have two more, first). kBelowAvx512 as well wherever the library's first
// host target is not x86-64-linux-avx512_skylake with attngen's own schedules
// (ATTNGEN_CPU_KERNELS_AVX512_FIRST).
enum class CpuVariant { kAmx, kAvx512Bf16, kAvx512, kBelowAvx512 };
CpuVariant cpu_kernels_variant(bool bfloat16_kernels);

// The widest vectors the runtime's own loops (the finite scans, finite_scan.h) may use: the
// CPU's, capped as the kernels are by ATTNGEN_CPU_DISPATCH (avx2: AVX2; sse41 and baseline: the
// compiler's baseline), so that the suite run under each cap tests each of their compilations.
// Always kBaseline off x86-64 or without GCC's or Clang's target attributes. Read once.
enum class RuntimeVectors { kBaseline, kAvx2, kAvx512 };
RuntimeVectors runtime_vectors();

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_CPU_DISPATCH_H
