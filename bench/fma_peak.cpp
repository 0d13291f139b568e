#include "fma_peak.h"

#include <chrono>
#include <thread>
#include <vector>

namespace attngen_bench {
namespace {

// 16 floats: the compiler splits it into the widest vectors -march allows (compiled with
// -march=native in bench/CMakeLists.txt).
typedef float vec16 __attribute__((vector_size(64)));

// 12 independent accumulators hide the FMA latency (4 cycles) on 2-3 FMA ports.
double fma_loop(long iterations) {
    vec16 acc[12];
    const vec16 a = vec16{} + 0.999999f, b = vec16{} + 1e-7f;
    for (auto &x : acc) x = vec16{} + 1.0f;
    for (long i = 0; i < iterations; ++i) {
        for (auto &x : acc) x = x * a + b;  // rounding keeps the compiler from folding it
    }
    float sum = 0;
    for (auto &x : acc) {
        for (int l = 0; l < 16; ++l) sum += x[l];
    }
    return sum;
}

volatile double calibration_sink;

}  // namespace

double measure_fma_peak(int threads, double seconds) {
    using Clock = std::chrono::steady_clock;
    long iterations = 1 << 16;
    // Grow the loop until one run on one thread takes a tenth of the time asked.
    for (;;) {
        const auto t0 = Clock::now();
        calibration_sink = fma_loop(iterations);  // used, so the call is not removed
        if (std::chrono::duration<double>(Clock::now() - t0).count() > seconds / 10) break;
        iterations *= 2;
    }
    iterations *= 10;
    std::vector<std::thread> pool;
    std::vector<double> sink(static_cast<size_t>(threads));
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] { sink[size_t(t)] = fma_loop(iterations); });
    }
    for (auto &t : pool) t.join();
    calibration_sink = sink[0];
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    const double flops = double(threads) * iterations * 12 * 16 * 2;
    return flops / elapsed * 1e-9;
}

double fma_peak_gflops() {
    static const double peak = measure_fma_peak(2, 0.5);
    return peak;
}

}  // namespace attngen_bench
