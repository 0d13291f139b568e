// How close can a broadcast-and-FMA register tile, the loop of attngen's projections and of
// both products of its flash kernel, come to this CPU's FMA peak? The same loop written with
// AVX-512 intrinsics, free of everything else a kernel does: rows x vectors accumulators, each
// step loading `vectors` vectors of a panel operand (16 columns x 64 steps per panel, as the
// key panels) and broadcasting one value per row. Run on 2 threads at once, each over its own
// data, once with the panel operand in L1 (8 KiB) and once streamed from L2 (128 KiB, a flash
// key block of 512 keys x 64 features), and given as a fraction of fma_peak's register-only
// FMA loop measured in the same process. Each shape's first tile is checked against a double
// sum before it is timed. Not built by CMake, not a test:
//
//     g++ -O3 -std=c++17 -march=native -Ibench bench/cpu_experiments/register_tile_ceiling.cpp
//         bench/fma_peak.cpp -lpthread -o register_tile_ceiling         (one command)
//     ./register_tile_ceiling
//
// bench/RESULTS.md (2026-11-29, "the register-tile loop's own ceiling") has what it measured.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "fma_peak.h"

namespace {

constexpr int kSteps = 64;    // the reduction: a head's features
constexpr int kLanes = 16;    // floats per AVX-512 vector
constexpr int kRowTiles = 2;  // a 16-row query block of 8-row tiles reads the panels twice

// Cache-line aligned, as the kernels' panels are: the loop loads them with aligned loads.
template <typename T>
struct LineAligned {
    using value_type = T;
    LineAligned() = default;
    template <typename U>
    LineAligned(const LineAligned<U> &) {}  // NOLINT: allocators convert implicitly
    T *allocate(size_t n) {
        return static_cast<T *>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64));
    }
    void deallocate(T *p, size_t) { std::free(p); }
    bool operator==(const LineAligned &) const { return true; }
    bool operator!=(const LineAligned &) const { return false; }
};
using Floats = std::vector<float, LineAligned<float>>;

struct Operands {
    Floats rows, panels, out;
};

Operands make_operands(int rows_per_tile, int vectors, int column_tiles) {
    Operands o;
    o.rows.resize(size_t(kRowTiles) * rows_per_tile * kSteps);
    o.panels.resize(size_t(column_tiles) * vectors * kLanes * kSteps);
    o.out.resize(size_t(kRowTiles) * column_tiles * rows_per_tile * vectors * kLanes);
    for (size_t i = 0; i < o.rows.size(); ++i) o.rows[i] = float(int(i % 13) - 6) / 8.0f;
    for (size_t i = 0; i < o.panels.size(); ++i) o.panels[i] = float(int(i % 11) - 5) / 4.0f;
    return o;
}

// One pass: every row tile against every column tile, the steps inside.
template <int R, int V>
void tile_pass(const float *rows, const float *panels, float *out, int column_tiles) {
    for (int rt = 0; rt < kRowTiles; ++rt) {
        for (int ct = 0; ct < column_tiles; ++ct) {
            const float *p = panels + size_t(ct) * V * kLanes * kSteps;
            const float *q = rows + size_t(rt) * R * kSteps;
            __m512 acc[R * V];
            for (__m512 &a : acc) a = _mm512_setzero_ps();
            for (int d = 0; d < kSteps; ++d) {
                __m512 x[V];
                for (int v = 0; v < V; ++v) x[v] = _mm512_load_ps(p + (v * kSteps + d) * kLanes);
                for (int r = 0; r < R; ++r) {
                    const __m512 b = _mm512_set1_ps(q[r * kSteps + d]);
                    for (int v = 0; v < V; ++v)
                        acc[r * V + v] = _mm512_fmadd_ps(b, x[v], acc[r * V + v]);
                }
            }
            float *o = out + (size_t(rt) * column_tiles + ct) * R * V * kLanes;
            for (int i = 0; i < R * V; ++i) _mm512_storeu_ps(o + i * kLanes, acc[i]);
        }
    }
}

template <int R, int V>
bool first_tile_matches(const Operands &o) {
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < V * kLanes; ++c) {
            double sum = 0, magnitude = 0;
            for (int d = 0; d < kSteps; ++d) {
                const double product = double(o.rows[r * kSteps + d]) *
                                       o.panels[((c / kLanes) * kSteps + d) * kLanes + c % kLanes];
                sum += product;
                magnitude += std::abs(product);
            }
            // A float32 sum of kSteps terms errs by at most kSteps unit roundoffs of their
            // magnitudes.
            const double bound = kSteps * 0x1p-24 * magnitude;
            if (std::abs(o.out[(r * V + c / kLanes) * kLanes + c % kLanes] - sum) > bound) {
                return false;
            }
        }
    }
    return true;
}

// GFLOP/s of 2 threads each running passes over its own operands for about `seconds`.
template <int R, int V>
double rate(int column_tiles, double seconds, bool *checked) {
    std::vector<Operands> data = {make_operands(R, V, column_tiles),
                                  make_operands(R, V, column_tiles)};
    tile_pass<R, V>(data[0].rows.data(), data[0].panels.data(), data[0].out.data(), column_tiles);
    *checked = first_tile_matches<R, V>(data[0]);
    const double pass_flops = 2.0 * kRowTiles * R * column_tiles * V * kLanes * kSteps;
    std::vector<long> passes(2);
    std::vector<double> elapsed(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&, t] {
            Operands &o = data[t];
            const auto start = std::chrono::steady_clock::now();
            double s = 0;
            for (long n = 1;; n *= 2) {
                for (long i = 0; i < n; ++i) {
                    tile_pass<R, V>(o.rows.data(), o.panels.data(), o.out.data(), column_tiles);
                }
                passes[t] += n;
                s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                if (s > seconds) break;
            }
            elapsed[t] = s;
        });
    }
    for (std::thread &t : threads) t.join();
    return (passes[0] / elapsed[0] + passes[1] / elapsed[1]) * pass_flops / 1e9;
}

template <int R, int V>
bool report(double peak) {
    constexpr int kTileBytes = V * kLanes * kSteps * 4;
    bool l1_ok = false, l2_ok = false;
    const double l1 = rate<R, V>(std::max(1, 8192 / kTileBytes), 1.0, &l1_ok);
    const double l2 = rate<R, V>(131072 / kTileBytes, 1.0, &l2_ok);
    std::printf(
        "%2d rows x %d vectors: panels in L1 %6.1f GFLOP/s (%.2f of the peak), from L2 "
        "%6.1f (%.2f)%s\n",
        R, V, l1, l1 / peak, l2, l2 / peak, l1_ok && l2_ok ? "" : "  WRONG SUMS");
    return l1_ok && l2_ok;
}

}  // namespace

int main() {
    const double peak = attngen_bench::measure_fma_peak(2, 1.0);
    std::printf("fma_peak, 2 threads: %.1f GFLOP/s\n", peak);
    bool ok = report<8, 2>(peak);
    ok &= report<4, 4>(peak);
    ok &= report<6, 4>(peak);
    ok &= report<12, 2>(peak);
    ok &= report<14, 2>(peak);
    std::printf("fma_peak, 2 threads, again: %.1f GFLOP/s\n",
                attngen_bench::measure_fma_peak(2, 1.0));
    return ok ? 0 : 1;
}
