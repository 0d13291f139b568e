// The AVX2 variant's register tile alone, against the FMA peak of the same core: how fast can
// the loop of attngen's AVX2 projections and flash products (2 vectors of 8 outputs by 6 rows:
// 2 loads, 6 broadcasts, 12 FMAs per step, as MLAS's FMA3 SGEMM kernel too) run on this CPU
// with every operand in L1? Three forms of it, each timed right after a register-only loop of
// 12 FMA chains (the FMA peak), 60 times, one thread; printed as the medians and quartiles of
// peak time / form time:
//   - the loop as the library emits it (one step per iteration);
//   - the same loop unrolled by 4 steps;
//   - a dot-product tile instead (3 rows by 4 outputs, both operands loaded as vectors along
//     the reduction, no broadcasts), which would show whether the broadcasts are what limits
//     it.
// Not built by CMake, not a test (the second line: both cores busy at once, as in a 2-thread
// call):
//
//     g++ -O3 -mavx2 -mfma bench/cpu_experiments/avx2_tile_ceiling.cpp -o avx2_tile_ceiling
//     taskset -c 0 ./avx2_tile_ceiling; taskset -c 1 ./avx2_tile_ceiling
//     taskset -c 0 ./avx2_tile_ceiling & taskset -c 1 ./avx2_tile_ceiling; wait
//
// bench/RESULTS.md (2026-12-02, "Two builds compared call by call") has what it measured.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

constexpr int kSteps = 256;  // one reduction block, repeated
constexpr int kRow = 264;    // floats between rows of the row operand (not a power of two)
constexpr long kFmas = 24000000;

__m256 sum12(const __m256 (&a)[12]) {
    __m256 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    return s;
}

__attribute__((noinline)) __m256 fma_chains(long steps) {
    // Chains that start apart: from one value, GCC folds identical chains into one.
    __m256 a[12];
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps(1e-7f * float(i + 1));
    const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-9f);
    for (long i = 0; i < steps; i++) {
#pragma GCC unroll 12
        for (__m256 &v : a) v = _mm256_fmadd_ps(v, m, c);
    }
    return sum12(a);
}

// One step of the tile: x, 6 rows of kRow floats; w, kSteps steps of a 64-output panel, the
// tile's 16 outputs at its start.
inline void broadcast_step(const float *x, const float *w, int k, __m256 (&a)[12]) {
    const __m256 w0 = _mm256_load_ps(w + k * 64), w1 = _mm256_load_ps(w + k * 64 + 8);
#pragma GCC unroll 6
    for (int r = 0; r < 6; r++) {
        const __m256 b = _mm256_broadcast_ss(x + r * kRow + k);
        a[2 * r] = _mm256_fmadd_ps(b, w0, a[2 * r]);
        a[2 * r + 1] = _mm256_fmadd_ps(b, w1, a[2 * r + 1]);
    }
}

// As the library emits it (one step per iteration), or unrolled by 4 steps. (GCC's unroll
// pragma takes no template argument, hence the two loops.)
template <bool kUnrolled>
__attribute__((noinline)) __m256 broadcast_tile(const float *x, const float *w, long reps) {
    __m256 a[12];
    for (__m256 &v : a) v = _mm256_setzero_ps();
    for (long rep = 0; rep < reps; rep++) {
        if constexpr (kUnrolled) {
#pragma GCC unroll 4
            for (int k = 0; k < kSteps; k++) broadcast_step(x, w, k, a);
        } else {
#pragma GCC unroll 1
            for (int k = 0; k < kSteps; k++) broadcast_step(x, w, k, a);
        }
    }
    return sum12(a);
}

// x: 3 rows of kRow floats; w: 4 outputs of kRow floats, both along the reduction.
__attribute__((noinline)) __m256 dot_tile(const float *x, const float *w, long reps) {
    __m256 a[12];
    for (__m256 &v : a) v = _mm256_setzero_ps();
    for (long rep = 0; rep < reps; rep++) {
        for (int k = 0; k < kSteps; k += 8) {
            const __m256 x0 = _mm256_load_ps(x + k), x1 = _mm256_load_ps(x + kRow + k),
                         x2 = _mm256_load_ps(x + 2 * kRow + k);
#pragma GCC unroll 4
            for (int o = 0; o < 4; o++) {
                const __m256 wv = _mm256_load_ps(w + o * kRow + k);
                a[3 * o] = _mm256_fmadd_ps(x0, wv, a[3 * o]);
                a[3 * o + 1] = _mm256_fmadd_ps(x1, wv, a[3 * o + 1]);
                a[3 * o + 2] = _mm256_fmadd_ps(x2, wv, a[3 * o + 2]);
            }
        }
    }
    return sum12(a);
}

using Clock = std::chrono::steady_clock;

template <typename F>
double seconds(F &&f) {
    const Clock::time_point t0 = Clock::now();
    volatile float sink = _mm256_cvtss_f32(f());
    (void)sink;
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main() {
    alignas(64) static float x[8 * kRow], w[kSteps * 64];
    std::fill(std::begin(x), std::end(x), 1e-6f);
    std::fill(std::begin(w), std::end(w), 1e-6f);
    const char *names[] = {"broadcast tile 2 x 6", "the same, unrolled by 4",
                           "dot-product tile 3 x 4"};
    std::vector<double> ratio[3];
    double peak_gflops = 0.0;
    for (int round = 0; round < 60; round++) {
        // Every form does kFmas FMAs of 8 lanes.
        const double peak = seconds([] { return fma_chains(kFmas / 12); });
        const long reps = kFmas / (12L * kSteps);
        const double t[3] = {seconds([&] { return broadcast_tile<false>(x, w, reps); }),
                             seconds([&] { return broadcast_tile<true>(x, w, reps); }),
                             seconds([&] { return dot_tile(x, w, reps * 8); })};
        for (int i = 0; i < 3; i++) ratio[i].push_back(peak / t[i]);
        peak_gflops = std::max(peak_gflops, 16.0 * kFmas / peak / 1e9);
    }
    std::printf("FMA peak of this thread: %.1f GFLOP/s (best of 60)\n", peak_gflops);
    for (int i = 0; i < 3; i++) {
        std::vector<double> &v = ratio[i];
        std::sort(v.begin(), v.end());
        std::printf("%-24s of the peak: median %.3f, quartiles %.3f-%.3f\n", names[i], v[30], v[15],
                    v[45]);
    }
    return 0;
}
