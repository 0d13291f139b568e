// A model, in AVX2 intrinsics, of one task of the AVX2 variant's blocked projection
// (schedule_projection_cpu): one panel of 64 outputs over R rows and K input features, in 2 x 6
// register tiles (2 vectors of 8 outputs by 6 rows), each block's sums added into a panel-wide
// buffer. It times the loop orders bench/RESULTS.md compares (2026-11-28, "Where the AVX2
// variant's projections lose their last tenth"; 2026-12-02, "Two builds compared call by
// call"), each against the library's order in the same round, and the library's order with one
// operand (inputs, weights or sums) or all of them pinned at one place in L1, which splits its
// loss among them. Not built by CMake, not a test:
//
//     g++ -O3 -mavx2 -mfma -pthread bench/cpu_experiments/avx2_projection_model.cpp -o model
//     ./model [threads]
//     (-DMODEL_K=4096: the input features of the llama3 prefill's projections, not bert's 768)
//
// Threads share the panels as the library's tasks do, but do not wait for each other between
// calls: a thread's rate is its own loops' and no barrier's, though part of its time it has the
// machine to itself.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// Input features: bert's d_model, or with -DMODEL_K=4096 the llama3 prefill's.
#ifndef MODEL_K
#define MODEL_K 768
#endif
constexpr int kK = MODEL_K;

// x: rows of K floats (row n at n * K), or with packed_rows 6 rows interleaved per step.
// w: the weights, ws floats per input feature. acc: 64 outputs per row.
// Not inlined, with the row and weight strides constant, as in Halide's loop (whose six input
// rows each have a base register).
template <bool packed_rows, int K, int ws>
__attribute__((noinline)) void tile(const float *x, const float *w, int steps, float *acc) {
    // Twelve named accumulators: as an array, GCC 12 also zeroed a copy of it on the stack
    // (`rep stos`) at every call where `steps` was not a constant, which cost 7% of the task.
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
           a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    const auto input = [&](int k, int r) {
        return _mm256_broadcast_ss(packed_rows ? x + k * 6 + r : x + r * K + k);
    };
    for (int k = 0; k < steps; k++) {
        const __m256 w0 = _mm256_loadu_ps(w + k * ws), w1 = _mm256_loadu_ps(w + k * ws + 8);
        __m256 b = input(k, 0);
        a0 = _mm256_fmadd_ps(b, w0, a0), a1 = _mm256_fmadd_ps(b, w1, a1);
        b = input(k, 1);
        a2 = _mm256_fmadd_ps(b, w0, a2), a3 = _mm256_fmadd_ps(b, w1, a3);
        b = input(k, 2);
        a4 = _mm256_fmadd_ps(b, w0, a4), a5 = _mm256_fmadd_ps(b, w1, a5);
        b = input(k, 3);
        a6 = _mm256_fmadd_ps(b, w0, a6), a7 = _mm256_fmadd_ps(b, w1, a7);
        b = input(k, 4);
        a8 = _mm256_fmadd_ps(b, w0, a8), a9 = _mm256_fmadd_ps(b, w1, a9);
        b = input(k, 5);
        a10 = _mm256_fmadd_ps(b, w0, a10), a11 = _mm256_fmadd_ps(b, w1, a11);
    }
    const __m256 sums[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};
    for (int r = 0; r < 6; r++) {
        float *row = acc + r * 64;
        _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), sums[2 * r]));
        _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), sums[2 * r + 1]));
    }
}

enum class Order {
    Library,       // per block: row tiles, the panel's 4 columns inside each
    StagedColumn,  // per block and column: the column copied contiguous, then every row tile
    RowGroups,     // per block: groups of 4 row tiles, columns inside each group
    PackedRows,    // as Library, the inputs 6 rows interleaved
    PinnedInL1,    // as Library, every tile at row 0 and block 0
    PinX,          // as Library, every tile's inputs at row 0 and block 0
    PinW,          // as Library, every tile's weights at block 0
    PinAcc,        // as Library, every tile's sums into row 0's
    PackedStaged,  // as StagedColumn, the inputs 6 rows interleaved
};

const char *name(Order o) {
    switch (o) {
        case Order::Library:
            return "library";
        case Order::StagedColumn:
            return "staged column";
        case Order::RowGroups:
            return "row groups";
        case Order::PackedRows:
            return "packed rows";
        case Order::PinnedInL1:
            return "pinned in L1";
        case Order::PinX:
            return "inputs pinned";
        case Order::PinW:
            return "weights pinned";
        case Order::PinAcc:
            return "sums pinned";
        case Order::PackedStaged:
            return "packed+staged";
    }
    return "";
}

void task(const float *x, const float *w, float *acc, int R, int K, int block, Order order,
          float *stage) {
    std::memset(acc, 0, sizeof(float) * 64 * R);
    const int tiles_end = R - R % 6;
    for (int k0 = 0; k0 < K; k0 += block) {
        switch (order) {
            case Order::Library:
            case Order::PackedRows:
            case Order::PinnedInL1:
            case Order::PinX:
            case Order::PinW:
            case Order::PinAcc:
                for (int n = 0; n < tiles_end; n += 6) {
                    for (int oc = 0; oc < 64; oc += 16) {
                        if (order == Order::PackedRows) {
                            tile<true, kK, 64>(x + n * K + k0 * 6, w + k0 * 64 + oc, block,
                                               acc + n * 64 + oc);
                            continue;
                        }
                        // A pinned operand stays at row 0 and block 0: read from L1 every time.
                        const bool all = order == Order::PinnedInL1;
                        const float *xt = all || order == Order::PinX ? x : x + n * K + k0;
                        const float *wt = all || order == Order::PinW ? w : w + k0 * 64;
                        float *at = all || order == Order::PinAcc ? acc : acc + n * 64;
                        tile<false, kK, 64>(xt, wt + oc, block, at + oc);
                    }
                }
                break;
            case Order::StagedColumn:
            case Order::PackedStaged:
                for (int oc = 0; oc < 64; oc += 16) {
                    for (int k = 0; k < block; k++) {
                        std::memcpy(stage + k * 16, w + (k0 + k) * 64 + oc, 16 * sizeof(float));
                    }
                    for (int n = 0; n < tiles_end; n += 6) {
                        if (order == Order::PackedStaged) {
                            tile<true, kK, 16>(x + n * K + k0 * 6, stage, block, acc + n * 64 + oc);
                        } else {
                            tile<false, kK, 16>(x + n * K + k0, stage, block, acc + n * 64 + oc);
                        }
                    }
                }
                break;
            case Order::RowGroups:
                for (int n0 = 0; n0 < tiles_end; n0 += 24) {
                    for (int oc = 0; oc < 64; oc += 16) {
                        for (int n = n0; n < n0 + 24 && n < tiles_end; n += 6) {
                            tile<false, kK, 64>(x + n * K + k0, w + k0 * 64 + oc, block,
                                                acc + n * 64 + oc);
                        }
                    }
                }
                break;
        }
    }
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One tile of 64 steps on the same operands, again and again: the kernel's own ceiling.
double tile_in_l1_gflops() {
    const int K = 64;
    std::vector<float> x(6 * kK, 1.0f);
    alignas(64) static float w[K * 16], out[6 * 64];
    for (float &v : w) v = 0.5f;
    const long calls = 2000000;
    const Clock::time_point t0 = Clock::now();
    for (long i = 0; i < calls; i++) tile<false, kK, 16>(x.data(), w, K, out);
    return 2.0 * 96 * K * calls / seconds_since(t0) / 1e9;
}

// One thread's tasks, every panel p = t, t + threads, ..., `calls` times over, after one
// untimed call: the thread and its accumulators are made once, as the library's pool keeps its
// workers (an earlier version of this model made them for every call). Returns its GFLOP/s.
double thread_rate(const float *x, const float *w, int R, int K, int panels, int threads, int t,
                   int calls, Order order, int block) {
    std::vector<float> acc(size_t(64) * R);
    alignas(64) static thread_local float stage[16 * 1024];
    const auto all_panels = [&] {
        for (int p = t; p < panels; p += threads) {
            task(x, w + size_t(p) * 64 * K, acc.data(), R, K, block, order, stage);
        }
    };
    all_panels();
    const Clock::time_point t0 = Clock::now();
    for (int call = 0; call < calls; call++) all_panels();
    const int mine = (panels - t + threads - 1) / threads;
    return 2.0 * R * K * 64 * mine * calls / seconds_since(t0) / 1e9;
}

}  // namespace

int main(int argc, char **argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    // At 4096 features, 4 panels (8 MiB of inputs, 4 MiB of weights) keep a round short.
    const int R = 510, K = kK, panels = kK > 1024 ? 4 : 12, calls = kK > 1024 ? 1 : 2;
    std::vector<float> x(size_t(R) * K, 1.0f), w(size_t(panels) * 64 * K, 0.5f);
    struct Config {
        Order order;
        int block;
    };
    const Config configs[] = {
        {Order::Library, 64},       {Order::Library, 128},  {Order::Library, 256},
        {Order::StagedColumn, 256}, {Order::RowGroups, 64}, {Order::PackedRows, 64},
        {Order::PackedStaged, 256}, {Order::PinX, 64},      {Order::PinW, 64},
        {Order::PinAcc, 64},        {Order::PinnedInL1, 64}};
    const size_t n = sizeof(configs) / sizeof(configs[0]);
    std::printf("one tile in L1, 1 thread: %.1f GFLOP/s\n", tile_in_l1_gflops());
    // Every configuration once per round, each against the library order of the same round: on
    // a shared machine the rates drift between rounds by more than the orders differ.
    std::vector<std::vector<double>> ratios(n);
    std::vector<double> library_rates;
    for (int round = 0; round < 24; round++) {
        std::vector<double> rate(n);
        for (size_t c = 0; c < n; c++) {
            std::vector<double> rates(threads);
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; t++) {
                pool.emplace_back([&, t] {
                    rates[t] = thread_rate(x.data(), w.data(), R, K, panels, threads, t, calls,
                                           configs[c].order, configs[c].block);
                });
            }
            for (std::thread &t : pool) t.join();
            for (double r : rates) rate[c] += r / threads;
        }
        library_rates.push_back(rate[0]);
        for (size_t c = 0; c < n; c++) ratios[c].push_back(rate[c] / rate[0]);
    }
    const auto quartiles = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return std::vector<double>{v[v.size() / 4], v[v.size() / 2], v[3 * v.size() / 4]};
    };
    const std::vector<double> lib = quartiles(library_rates);
    std::printf(
        "K = %d, %d threads; library order, blocks of 64: %.1f GFLOP/s per thread (median)\n", K,
        threads, lib[1]);
    for (size_t c = 0; c < n; c++) {
        const std::vector<double> q = quartiles(ratios[c]);
        std::printf("%-14s blocks of %3d: rate / library's %.3f (quartiles %.3f-%.3f)\n",
                    name(configs[c].order), configs[c].block, q[1], q[0], q[2]);
    }
}
