#include "bf16_dot_probe.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace attngen::rt {
namespace {

// vdpbf16ps must do at least this many times the FMA's multiply-adds per second for the
// AVX512-BF16 variant to be chosen. That variant has work the float32 one has not (its
// attention pairs the queries and keys first), so at parity it would lose. The CPUs measured
// lie far on either side: 2.0 (Zen 4, attngen_bench's peaks) and 0.55 (Xeon model 207, this
// probe).
constexpr double kMinDotGain = 1.25;

#if defined(__x86_64__)
// Independent accumulators, enough to cover the latency of either instruction on two ports.
// The loops over them are unrolled by pragma, and the file is compiled at -O2 whatever the
// build type (runtime/CMakeLists.txt), so that they stay in registers (at -O0, -O1 and -O2
// without the pragma GCC 12 kept the array in memory, a load and a store per
// instruction, which measured the memory instead). Not instrumented by ASan, for the same
// reason, nor by UBSan (whose bounds checks kept the array in memory as well).
constexpr int kChains = 12;
constexpr long kIterations = 2048;
constexpr int kTrials = 5;

using Clock = std::chrono::steady_clock;
volatile float probe_sink;

template <typename Body>
double timed(Body body) {
    const auto t0 = Clock::now();
    probe_sink = body();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The accumulators' sum, so that the loops are not removed.
__attribute__((target("avx512f"), no_sanitize("address", "undefined"))) float sum_lanes(
    const __m512 (&acc)[kChains]) {
    __m512 sum = acc[0];
    for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
    float lanes[16];
    _mm512_storeu_ps(lanes, sum);
    float total = 0;
    for (float lane : lanes) total += lane;
    return total;
}

__attribute__((target("avx512f,avx512bf16"), no_sanitize("address", "undefined"))) float
dot_chains() {
    __m512 acc[kChains];
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c));
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f7f);
    const __m512bh b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
        for (auto &x : acc) x = _mm512_dpbf16_ps(x, a, b);
    }
    return sum_lanes(acc);
}

__attribute__((target("avx512f,fma"), no_sanitize("address", "undefined"))) float fma_chains() {
    __m512 acc[kChains];
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
        for (auto &x : acc) x = _mm512_fmadd_ps(x, a, b);
    }
    return sum_lanes(acc);
}
#endif

}  // namespace

DotProductRates measure_dot_product_rates() {
    DotProductRates rates;
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx512bf16")) return rates;
    // Alternated, so that a frequency change or an interrupt during one trial costs that trial
    // alone; the fastest trial of each is the instruction's rate.
    double dot_seconds = 1e30, fma_seconds = 1e30;
    for (int t = 0; t < kTrials; ++t) {
        dot_seconds = std::min(dot_seconds, timed(dot_chains));
        fma_seconds = std::min(fma_seconds, timed(fma_chains));
    }
    const double instructions = double(kIterations) * kChains;
    rates.bf16_dot = instructions * 32 / dot_seconds;
    rates.fp32_fma = instructions * 16 / fma_seconds;
#endif
    return rates;
}

const DotProductRates &process_dot_product_rates() {
    static const DotProductRates rates = measure_dot_product_rates();
    return rates;
}

bool bf16_dot_product_pays() {
    const DotProductRates &rates = process_dot_product_rates();
    return rates.bf16_dot > 0 && rates.bf16_dot >= kMinDotGain * rates.fp32_fma;
}

}  // namespace attngen::rt
