// The machine's measured fp32 FMA peak (GFLOP/s on the benchmark's threads), so that rates can
// be given as a fraction of it rather than of a datasheet number.
#ifndef ATTNGEN_BENCH_FMA_PEAK_H
#define ATTNGEN_BENCH_FMA_PEAK_H

namespace attngen_bench {

// Independent FMA chains on the widest vectors this file was compiled for, on `threads`
// threads for about `seconds`; returns GFLOP/s (an FMA counts 2).
double measure_fma_peak(int threads, double seconds);

// measure_fma_peak(2, 0.5), measured once per process.
double fma_peak_gflops();

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_FMA_PEAK_H
