// One projection of the fused forward, weights packed once as attngen_mha_set_weights packs
// them (attngen/detail/packed_projection.h), on [B·Lq, D] x [D, D]: the kernel issue 7 compares
// with cblas_sgemm (sgemm_openblas/<shape> in bench_baselines.cpp). `linear/<shape>` is the C
// API's attngen_linear, which transposes torch's [out, in] weight on every call.
// `projection_cold/<shape>` is the same call with the caches flushed before each one, as the
// projections run inside a forward: there the attention between them has evicted the weights.
//
//   build/bench/attngen_bench --benchmark_filter='^(projection|projection_cold|sgemm_openblas)/'
#include <attngen/attngen.h>
#include <attngen/detail/packed_projection.h>
#include <attngen/detail/tensor_buffer.h>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "attngen_linear_packed_cpu.h"
#include "bench_rates.h"
#include "bench_shapes.h"

namespace {

using namespace attngen_bench;

// Writes and reads back a buffer twice the size of the largest last-level cache attngen is
// measured on (32 MiB), so that nothing the previous call touched is still cached.
float evict_caches() {
    static std::vector<float> scratch(size_t(64) << 20 >> 2);
    float sum = 0.0f;
    for (float &v : scratch) {
        v += 1.0f;
        sum += v;
    }
    return sum;
}

void BM_Projection(benchmark::State &state, Shape s, bool cold) {
    // On the thread pool the library's entry points install (runtime/spinning_pool.h), as the
    // kernel runs inside a forward.
    attngen_install_error_handler();
    const int rows = s.batch * s.q_len, d = s.d_model;
    const auto x = random_vector(size_t(rows) * d, 1.0f, 1);
    const auto w = random_vector(size_t(d) * d, 0.05f, 2);
    const auto b = random_vector(d, 0.1f, 3);
    attngen::rt::PackedProjection packed;
    packed.pack(w.data(), b.data(), d, d);
    std::vector<float> y(size_t(rows) * d);
    attngen::rt::TensorBuffer<float, 2> x_buf(x.data(), {rows, d});
    attngen::rt::TensorBuffer<float, 2> w_buf(packed.weight.data(),
                                              {packed.panels(), packed.panel_size()});
    attngen::rt::TensorBuffer<float, 1> b_buf(packed.bias.data(), {packed.padded_out});
    attngen::rt::TensorBuffer<float, 2> y_buf(y.data(), {rows, d});
    // The first and last rows against a double-precision dot product, before any timing: a
    // wrong kernel must not report a speed.
    if (attngen_linear_packed_cpu(nullptr, x_buf.get(), w_buf.get(), b_buf.get(), y_buf.get()) !=
        0) {
        state.SkipWithError("attngen_linear_packed_cpu failed");
        return;
    }
    for (int r : {0, rows - 1}) {
        for (int o = 0; o < d; ++o) {
            double want = b[o];
            for (int i = 0; i < d; ++i) want += double(x[size_t(r) * d + i]) * w[size_t(o) * d + i];
            if (std::abs(want - y[size_t(r) * d + o]) > 1e-3 * (1.0 + std::abs(want))) {
                state.SkipWithError("attngen_linear_packed_cpu disagrees with the reference");
                return;
            }
        }
    }
    for (auto _ : state) {
        if (cold) benchmark::DoNotOptimize(evict_caches());
        const auto start = std::chrono::steady_clock::now();
        if (attngen_linear_packed_cpu(nullptr, x_buf.get(), w_buf.get(), b_buf.get(),
                                      y_buf.get()) != 0) {
            state.SkipWithError("attngen_linear_packed_cpu failed");
            break;
        }
        benchmark::DoNotOptimize(y.data());
        state.SetIterationTime(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    // The FLOPs of one [rows, d] x [d, d] product, as sgemm_openblas counts them.
    set_rates(state, 2.0 * rows * double(d) * d);
}

// The MHA shapes, and the decode shapes' prefills (their query projection: 512 x 4096 x 4096 at
// llama3-8b-prefill, whose weights do not fit in the last-level cache).
std::vector<Shape> projection_shapes() {
    std::vector<Shape> all = shapes();
    for (const attngen::DecodeShape &s : attngen::decode_shapes()) {
        // Up to 8 rows a projection splits its reduction instead (kSplitReductionMaxRows).
        if (s.batch * s.q_len <= 8) continue;
        all.push_back(Shape{s.name, s.batch, s.q_len, s.cache_len + s.q_len, s.d_model, s.heads,
                            false, false});
    }
    return all;
}

const int registered = [] {
    for (const Shape &s : projection_shapes()) {
        for (const bool cold : {false, true}) {
            const std::string group = cold ? "projection_cold/" : "projection/";
            benchmark::RegisterBenchmark((group + s.name).c_str(), BM_Projection, s, cold)
                ->Unit(benchmark::kMillisecond)
                ->UseManualTime();
        }
    }
    return 0;
}();

}  // namespace
