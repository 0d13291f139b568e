#include "read_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace attngen_bench {
namespace {

// Sixty-four independent sums, so that the loop is bound by loads, not by the latency of its add
// chains: compiled for this machine (bench/CMakeLists.txt), four chains of 64-byte vectors with
// AVX-512. With sixteen, one vector and one chain, two threads read 16 MiB from Zen 4's L3 at
// 109 GB/s, against 172 with sixty-four, and a decoding step's fraction of it came out above 1.
float sum_of(const float *x, size_t n) {
    constexpr size_t kLanes = 64;
    float acc[kLanes] = {};
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (size_t l = 0; l < kLanes; ++l) acc[l] += x[i + l];
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

double measure_resident_read_bandwidth(int threads, size_t bytes) {
    using Clock = std::chrono::steady_clock;
    const size_t n = std::max(bytes / sizeof(float), size_t(threads) * 16);
    std::vector<float> data(n, 1.0f);
    const size_t part = n / size_t(threads);
    // Passes to time: about 50 ms in all, judged from one pass on this thread alone (which
    // also makes the buffer resident), so that the clock's resolution is noise. The barriers,
    // one per pass, are part of the rate, as a step's loops are part of its time.
    const auto t0 = Clock::now();
    sink = sum_of(data.data(), n);
    const double one_pass = std::chrono::duration<double>(Clock::now() - t0).count();
    const int passes = int(std::clamp(50e-3 * threads / std::max(one_pass, 1e-9), 4.0, 1e5));
    std::atomic<int> arrived{0};
    // All threads wait here before each pass: the passes overlap as a step's parallel loops do.
    const auto barrier = [&](int generation) {
        arrived.fetch_add(1);
        while (arrived.load() < threads * generation) std::this_thread::yield();
    };
    Clock::time_point start, end;
    std::vector<std::thread> pool;
    std::vector<float> partial(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            float s = sum_of(&data[t * part], part);  // in this core's caches before timing
            barrier(1);
            if (t == 0) start = Clock::now();
            for (int pass = 0; pass < passes; ++pass) {
                barrier(pass + 2);
                s += sum_of(&data[t * part], part);
            }
            barrier(passes + 2);
            if (t == 0) end = Clock::now();
            partial[size_t(t)] = s;
        });
    }
    for (auto &t : pool) t.join();
    sink = partial[0];
    const double seconds = std::chrono::duration<double>(end - start).count();
    return double(part) * threads * sizeof(float) * passes / seconds * 1e-9;
}

double read_bandwidth_gbs() {
    static const double gbs = measure_read_bandwidth(2, size_t(1) << 30);
    return gbs;
}

}  // namespace attngen_bench
