// Google Benchmark suite for decoding with a KV cache, at the decode shapes of
// support/named_shapes.def. One step of a decode shape is what a model runs per token and
// layer: the new token's keys and values projected and appended (into a scratch item, reset
// every step, so that the measured cache keeps its length), and the cached forward of the new
// query over cache_len positions. A prefill shape appends q_len tokens to an empty item and
// runs the cached forward over them. Counters: GB/s of the bytes a step must read (weights
// plus cached keys and values) and that rate as a fraction of the read bandwidth measured in
// the same process ("bw"); read_bandwidth reports the latter on its own. decode_bf16/ runs the
// same step on a bfloat16 handle (weights and cache of 2 bytes per element).
//
//   build/bench/attngen_bench --benchmark_filter='decode|read_bandwidth'
#include <attngen/attngen.h>
#include <benchmark/benchmark.h>

#include "bench_shapes.h"
#include "read_bandwidth.h"

#include <cmath>
#include <string>
#include <vector>

namespace {

using attngen::DecodeShape;
using attngen_bench::random_vector;

attngen_mha_config config_of(const DecodeShape &s, attngen_precision precision) {
    attngen_mha_config c{};
    c.precision = precision;
    c.d_model = s.d_model;
    c.num_heads = s.heads;
    c.head_dim = s.head_dim;
    c.use_bias = s.bias ? 1 : 0;
    c.device = ATTNGEN_DEVICE_CPU;
    c.num_kv_heads = s.kv_heads;
    c.rope = s.rope;
    return c;
}

// The bytes one step must read at least: every weight once, every cached key and value once,
// each element of the handle's precision.
double step_bytes(const DecodeShape &s, attngen_precision precision) {
    const double q = double(s.heads) * s.head_dim, kv = double(s.kv_heads) * s.head_dim;
    const double weights = double(s.d_model) * (2 * q + 2 * kv);
    const double cache = double(s.batch) * s.cache_len * 2 * kv;
    return (precision == ATTNGEN_PRECISION_F32 ? 4 : 2) * (weights + cache);
}

struct Handles {
    attngen_mha *m = nullptr;
    attngen_kv_cache *cache = nullptr, *scratch = nullptr;
    ~Handles() {
        attngen_kv_cache_destroy(scratch);
        attngen_kv_cache_destroy(cache);
        attngen_mha_destroy(m);
    }
};

bool ok(attngen_status s, benchmark::State &state) {
    if (s != ATTNGEN_OK) state.SkipWithError(attngen_last_error());
    return s == ATTNGEN_OK;
}

void BM_Decode(benchmark::State &state, DecodeShape s, attngen_precision precision) {
    Handles h;
    const attngen_mha_config c = config_of(s, precision);
    if (!ok(attngen_mha_create(&c, &h.m), state)) return;
    const size_t q = size_t(s.heads) * s.head_dim, kv = size_t(s.kv_heads) * s.head_dim;
    const float wscale = 1.0f / std::sqrt(float(s.d_model));
    const auto wq = random_vector(q * s.d_model, wscale, 1);
    const auto wk = random_vector(kv * s.d_model, wscale, 2);
    const auto wv = random_vector(kv * s.d_model, wscale, 3);
    const auto wo = random_vector(size_t(s.d_model) * q, 1.0f / std::sqrt(float(q)), 4);
    const auto bq = random_vector(q, 0.1f, 5), bk = random_vector(kv, 0.1f, 6);
    const auto bv = random_vector(kv, 0.1f, 7), bo = random_vector(s.d_model, 0.1f, 8);
    if (!ok(attngen_mha_set_weights(h.m, wq.data(), wk.data(), wv.data(), wo.data(), bq.data(),
                                    bk.data(), bv.data(), bo.data()),
            state))
        return;
    const bool prefill = s.cache_len == 0;
    if (!ok(attngen_kv_cache_create(h.m, s.batch, s.cache_len + s.q_len, &h.cache), state) ||
        !ok(attngen_kv_cache_create(h.m, s.batch, s.q_len, &h.scratch), state))
        return;
    // Fill the cache in chunks of 256 positions (the rows are random tokens).
    for (int filled = 0; filled < s.cache_len;) {
        const int chunk = std::min(256, s.cache_len - filled);
        const auto x = random_vector(size_t(s.batch) * chunk * s.d_model, 1.0f, 100 + filled);
        if (!ok(attngen_kv_cache_append(h.m, h.cache, s.batch, nullptr, chunk, x.data(), x.data()),
                state))
            return;
        filled += chunk;
    }
    const auto x = random_vector(size_t(s.batch) * s.q_len * s.d_model, 1.0f, 9);
    std::vector<float> out(x.size());
    attngen_kv_cache *append_to = prefill ? h.cache : h.scratch;
    for (auto _ : state) {
        if (!ok(attngen_kv_cache_reset(append_to, -1), state) ||
            !ok(attngen_kv_cache_append(h.m, append_to, s.batch, nullptr, s.q_len, x.data(),
                                        x.data()),
                state) ||
            !ok(attngen_mha_forward_cached(h.m, h.cache, s.batch, nullptr, s.q_len, x.data(),
                                           ATTNGEN_CAUSAL_BOTTOM_RIGHT, out.data()),
                state))
            break;
        benchmark::DoNotOptimize(out.data());
    }
    const double bytes = step_bytes(s, precision);
    state.counters["GB/s"] =
        benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bw"] = benchmark::Counter(bytes * 1e-9 / attngen_bench::read_bandwidth_gbs(),
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ReadBandwidth(benchmark::State &state) {
    for (auto _ : state) {
        state.counters["GB/s"] = attngen_bench::measure_read_bandwidth(2, size_t(1) << 30);
    }
}

const int registered = [] {
    for (const DecodeShape &s : attngen::decode_shapes()) {
        benchmark::RegisterBenchmark((std::string("decode/") + s.name).c_str(), BM_Decode, s,
                                     ATTNGEN_PRECISION_F32)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark((std::string("decode_bf16/") + s.name).c_str(), BM_Decode, s,
                                     ATTNGEN_PRECISION_BF16)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    benchmark::RegisterBenchmark("read_bandwidth", BM_ReadBandwidth)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
    return 0;
}();

}  // namespace
