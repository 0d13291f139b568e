#include "fma_peak.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace attngen_bench {
namespace {

// 12 independent accumulators hide the FMA latency (4 cycles) on 2-3 FMA ports, and fit the 16
// registers of AVX2 and SSE.
constexpr int kChains = 12;

// Vectors of `Lanes` floats. The native loop's vectors are the widest registers -march=native
// gives (bench/CMakeLists.txt): wider vectors split into several registers each, and 12 chains
// of 16 lanes on a CPU without AVX-512 spilled (a Zen 3: 9 GFLOP/s against 180 for the AVX2
// loop), which made every `peak` counter 20 times too high there. The variants' loops are
// compiled for their own instruction set (target attributes).
template <typename Vec, int Lanes>
inline __attribute__((always_inline)) double chains(long iterations) {
    Vec acc[kChains];
    const Vec a = Vec{} + 0.999999f, b = Vec{} + 1e-7f;
    for (auto &x : acc) x = Vec{} + 1.0f;
    for (long i = 0; i < iterations; ++i) {
        for (auto &x : acc) x = x * a + b;  // rounding keeps the compiler from folding it
    }
    float sum = 0;
    for (auto &x : acc) {
        for (int l = 0; l < Lanes; ++l) sum += x[l];
    }
    return sum;
}

#if defined(__AVX512F__)
constexpr int kNativeLanes = 16;
#elif defined(__AVX__)
constexpr int kNativeLanes = 8;
#else
constexpr int kNativeLanes = 4;  // SSE, NEON
#endif
typedef float native_vec __attribute__((vector_size(kNativeLanes * sizeof(float))));
double native_loop(long iterations) {
    return chains<native_vec, kNativeLanes>(iterations);
}

#if defined(__x86_64__)
typedef float vec8 __attribute__((vector_size(32)));
typedef float vec4 __attribute__((vector_size(16)));
__attribute__((target("avx2,fma"))) double avx2_loop(long iterations) {
    return chains<vec8, 8>(iterations);
}
__attribute__((target("sse4.1"))) double sse41_loop(long iterations) {
    return chains<vec4, 4>(iterations);
}

// The chains of chains() as vdpbf16ps, each accumulator started apart so that the compiler
// cannot merge them. Run with 32 "lanes": 16 float32 lanes of two products each.
__attribute__((target("avx512f,avx512bf16"))) double bf16_loop(long iterations) {
    __m512 acc[kChains];
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c));
    const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f7f),
                   b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
    for (long i = 0; i < iterations; ++i) {
        for (auto &x : acc) x = _mm512_dpbf16_ps(x, a, b);
    }
    float sum = 0;
    for (auto &x : acc) {
        float lanes[16];
        _mm512_storeu_ps(lanes, x);
        for (float l : lanes) sum += l;
    }
    return sum;
}
#endif

struct Loop {
    double (*run)(long);
    int lanes;
};

Loop loop_for(PeakIsa isa) {
#if defined(__x86_64__)
    if (isa == PeakIsa::kAvx2) return {avx2_loop, 8};
    if (isa == PeakIsa::kSse41) return {sse41_loop, 4};
    if (isa == PeakIsa::kAvx512Bf16) return {bf16_loop, 32};
#endif
    (void)isa;
    return {native_loop, kNativeLanes};
}

volatile double calibration_sink;

}  // namespace

bool has_avx512_bf16() {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

double measure_fma_peak(int threads, double seconds, PeakIsa isa) {
    using Clock = std::chrono::steady_clock;
    const Loop loop = loop_for(isa);
    long iterations = 1 << 16;
    // Grow the loop until one run on one thread takes a tenth of the time asked.
    for (;;) {
        const auto t0 = Clock::now();
        calibration_sink = loop.run(iterations);  // used, so the call is not removed
        if (std::chrono::duration<double>(Clock::now() - t0).count() > seconds / 10) break;
        iterations *= 2;
    }
    iterations *= 10;
    std::vector<std::thread> pool;
    std::vector<double> sink(static_cast<size_t>(threads));
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] { sink[size_t(t)] = loop.run(iterations); });
    }
    for (auto &t : pool) t.join();
    calibration_sink = sink[0];
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    const double flops = double(threads) * iterations * kChains * loop.lanes * 2;
    return flops / elapsed * 1e-9;
}

double fma_peak_gflops() {
    static const double peak = [] {
        const char *cap = std::getenv("ATTNGEN_CPU_DISPATCH");
        PeakIsa isa = PeakIsa::kNative;
        if (cap != nullptr && std::strcmp(cap, "avx2") == 0) isa = PeakIsa::kAvx2;
        if (cap != nullptr && (std::strcmp(cap, "sse41") == 0 || std::strcmp(cap, "baseline") == 0))
            isa = PeakIsa::kSse41;
        // The best of three short runs: on a shared virtual machine one run of 0.5 s once
        // came out at half the peak (97 against 184 GFLOP/s on a Zen 3), and every fraction of
        // that process read twice too high.
        double best = 0.0;
        for (int run = 0; run < 3; ++run) best = std::max(best, measure_fma_peak(2, 0.2, isa));
        return best;
    }();
    return peak;
}

}  // namespace attngen_bench
