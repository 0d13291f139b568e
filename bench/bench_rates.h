// The rate counters every benchmark here reports: GFLOP/s, and the fraction of the machine's
// measured FMA peak (fma_peak.h).
#ifndef ATTNGEN_BENCH_BENCH_RATES_H
#define ATTNGEN_BENCH_BENCH_RATES_H

#include <benchmark/benchmark.h>

#include "fma_peak.h"

namespace attngen_bench {

inline void set_rates(benchmark::State &state, double flops) {
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak"] = benchmark::Counter(flops * 1e-9 / fma_peak_gflops(),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_BENCH_RATES_H
