// The timing of the knob A/B harnesses (sdpa_knobs_ab.cpp, projection_knobs_ab.cpp): every round
// times each variant (best of 3 calls) in an order that rotates, so that a slow minute of a
// shared host falls on all of them; then prints per variant its median time, its GFLOP/s, and
// the median over rounds of the first variant's time over its own.
#ifndef ATTNGEN_BENCH_CPU_EXPERIMENTS_ALTERNATING_ROUNDS_H
#define ATTNGEN_BENCH_CPU_EXPERIMENTS_ALTERNATING_ROUNDS_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace attngen_experiments {

inline double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

// call(i) runs variant i once and returns 0 on success. Returns false if a call failed.
template <typename Call>
bool time_alternating_rounds(const std::vector<std::string> &names, int rounds, double flops,
                             const Call &call) {
    const size_t n = names.size();
    std::vector<std::vector<double>> ms(n);
    for (int r = 0; r < rounds; ++r) {
        for (size_t i = 0; i < n; ++i) {
            const size_t which = (i + size_t(r)) % n;
            double best = 1e300;
            for (int c = 0; c < 3; ++c) {
                const auto t0 = std::chrono::steady_clock::now();
                if (call(which) != 0) {
                    std::fprintf(stderr, "%s: the kernel failed\n", names[which].c_str());
                    return false;
                }
                const std::chrono::duration<double, std::milli> t =
                    std::chrono::steady_clock::now() - t0;
                best = std::min(best, t.count());
            }
            ms[which].push_back(best);
        }
    }
    for (size_t i = 0; i < n; ++i) {
        std::vector<double> ratio;
        for (int r = 0; r < rounds; ++r) ratio.push_back(ms[0][r] / ms[i][r]);
        const long faster =
            std::count_if(ratio.begin(), ratio.end(), [](double v) { return v > 1; });
        std::printf("%-6s median %.3f ms, %.1f GFLOP/s; %s/%s time %.3fx (faster in %ld of %d)\n",
                    names[i].c_str(), median(ms[i]), flops / median(ms[i]) * 1e-6, names[0].c_str(),
                    names[i].c_str(), median(ratio), faster, rounds);
    }
    return true;
}

}  // namespace attngen_experiments

#endif  // ATTNGEN_BENCH_CPU_EXPERIMENTS_ALTERNATING_ROUNDS_H
