// The machine's measured fp32 FMA peak (GFLOP/s on the benchmark's threads), so that rates can
// be given as a fraction of it rather than of a datasheet number.
#ifndef ATTNGEN_BENCH_FMA_PEAK_H
#define ATTNGEN_BENCH_FMA_PEAK_H

namespace attngen_bench {

// The instruction sets a peak can be measured on: the widest this file was compiled for
// (-march=native), and the x86 dispatch variants below it (ATTNGEN_CPU_DISPATCH).
// kAvx512Bf16 is the bfloat16 pair dot product (vdpbf16ps, which the bfloat16 kernels run), not
// an FMA: each of its 16 lanes adds two products, so it counts 4 flops per lane.
enum class PeakIsa { kNative, kAvx2, kSse41, kAvx512Bf16 };

// Whether this CPU runs the kAvx512Bf16 loop (AVX512-BF16).
bool has_avx512_bf16();

// Independent FMA chains (multiply and add on SSE4.1, which has no FMA) on `threads` threads
// for about `seconds`; returns GFLOP/s (an FMA counts 2).
double measure_fma_peak(int threads, double seconds, PeakIsa isa = PeakIsa::kNative);

// The peak of the variant the kernels run: ATTNGEN_CPU_DISPATCH=avx2 or sse41 (baseline is
// SSE2 and counts as sse41's peak, a bound it cannot exceed) or else the native one;
// the best of three measure_fma_peak(2, 0.2, that), measured once per process. A variant's rates
// are fractions of its own peak: the AVX2 variant on an AVX-512 machine is measured against AVX2
// FMAs.
double fma_peak_gflops();

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_FMA_PEAK_H
