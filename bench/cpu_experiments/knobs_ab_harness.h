// What the knob A/B harnesses (sdpa_knobs_ab.cpp, projection_knobs_ab.cpp) share: their variants
// (one generated kernel per knob setting, listed by sdpa_knobs_ab.sh in variants.h), their
// command-line numbers, and their timing.
#ifndef ATTNGEN_BENCH_CPU_EXPERIMENTS_KNOBS_AB_HARNESS_H
#define ATTNGEN_BENCH_CPU_EXPERIMENTS_KNOBS_AB_HARNESS_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace attngen_experiments {

template <typename Kernel>
struct Variant {
    const char *name;
    Kernel kernel;
};

// Argument i of the command line as a number, or fallback where there is none.
inline int int_arg(int argc, char **argv, int i, int fallback) {
    return argc > i ? std::atoi(argv[i]) : fallback;
}

inline double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

// Every round times each variant (best of 3 calls) in an order that rotates, so that a slow
// minute of a shared host falls on all of them; then prints per variant its median time, its
// GFLOP/s, and the median over rounds of the first variant's time over its own. call(kernel)
// runs a kernel once and returns 0 on success. Returns false if a call failed.
template <typename Kernel, typename Call>
bool time_alternating_rounds(const std::vector<Variant<Kernel>> &variants, int rounds, double flops,
                             const Call &call) {
    std::vector<std::string> names;
    for (const Variant<Kernel> &v : variants) names.push_back(v.name);
    const size_t n = names.size();
    std::vector<std::vector<double>> ms(n);
    for (int r = 0; r < rounds; ++r) {
        for (size_t i = 0; i < n; ++i) {
            const size_t which = (i + size_t(r)) % n;
            double best = 1e300;
            for (int c = 0; c < 3; ++c) {
                const auto t0 = std::chrono::steady_clock::now();
                if (call(variants[which].kernel) != 0) {
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

#endif  // ATTNGEN_BENCH_CPU_EXPERIMENTS_KNOBS_AB_HARNESS_H
