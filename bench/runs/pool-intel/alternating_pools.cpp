// Alternates Halide's pool and attngen's spinning pool in blocks of 10 calls, same process
// (README.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "HalideBuffer.h"
#include "HalideRuntime.h"
#include "attngen_linear_packed_cpu.h"
#include "spinning_pool.h"
extern "C" int32_t attngen_get_num_threads(void) {
    return 2;
}
using clk = std::chrono::steady_clock;
int main(int argc, char **argv) {
    const int N = atoi(argv[1]), K = atoi(argv[2]), O = atoi(argv[3]), reps = atoi(argv[4]);
    const int gap_us = argc > 5 ? atoi(argv[5]) : 0;
    float *x = (float *)aligned_alloc(64, size_t(N) * K * 4),
          *w = (float *)aligned_alloc(4096, size_t(K) * O * 4),
          *o = (float *)aligned_alloc(64, size_t(N) * O * 4),
          *b = (float *)aligned_alloc(64, O * 4);
    for (size_t i = 0; i < size_t(N) * K; i++) x[i] = 0.001f * (i % 7);
    for (size_t i = 0; i < size_t(K) * O; i++) w[i] = 0.001f * (i % 5);
    memset(b, 0, O * 4);
    Halide::Runtime::Buffer<float> xb(x, K, N), wb(w, K * 64, O / 64), bb(b, O), ob(o, O, N);
    std::vector<double> t[2];
    for (int rep = 0; rep < 2 * reps; rep++) {
        const int which = (rep / 10) & 1;
        const bool first = rep % 10 == 0;
        halide_set_custom_do_par_for(which ? attngen::rt::spinning_do_par_for
                                           : halide_default_do_par_for);
        auto t0 = clk::now();
        attngen_linear_packed_cpu(nullptr, xb, wb, bb, ob);
        if (!first)
            t[which].push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
        if (gap_us) {
            auto until = clk::now() + std::chrono::microseconds(gap_us);
            while (clk::now() < until) {
            }
        }
    }
    double f = 2.0 * N * K * O / 1e3;
    for (int w2 = 0; w2 < 2; w2++) {
        std::sort(t[w2].begin(), t[w2].end());
        printf("%-8s N=%d K=%d O=%d gap %d us GFLOP/s: best %.0f p10 %.0f median %.0f p90 %.0f\n",
               w2 ? "spinning" : "halide", N, K, O, gap_us, f / t[w2][0],
               f / t[w2][t[w2].size() / 10], f / t[w2][t[w2].size() / 2],
               f / t[w2][t[w2].size() * 9 / 10]);
    }
}
