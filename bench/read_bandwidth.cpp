#include "read_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace attngen_bench {
namespace {

// Sixteen independent sums, so the loop is bound by loads, not by the latency of one add chain.
float sum_of(const float *x, size_t n) {
    float acc[16] = {};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; ++l) acc[l] += x[i + l];
    for (; i < n; ++i) acc[0] += x[i];
    float s = 0.0f;
    for (float a : acc) s += a;
    return s;
}

volatile float sink;

}  // namespace

double measure_read_bandwidth(int threads, size_t bytes) {
    using Clock = std::chrono::steady_clock;
    const size_t n = bytes / sizeof(float);
    std::vector<float> data(n, 1.0f);  // touched: every page is resident before timing
    const size_t part = n / size_t(threads);
    double best = 0.0;
    for (int pass = 0; pass < 5; ++pass) {
        std::vector<std::thread> pool;
        std::vector<float> partial(static_cast<size_t>(threads));
        const auto t0 = Clock::now();
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] { partial[size_t(t)] = sum_of(&data[t * part], part); });
        }
        for (auto &t : pool) t.join();
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        sink = partial[0];
        best = std::max(best, double(part) * threads * sizeof(float) / seconds * 1e-9);
    }
    return best;
}

double read_bandwidth_gbs() {
    static const double gbs = measure_read_bandwidth(2, size_t(1) << 30);
    return gbs;
}

}  // namespace attngen_bench
