// run_decode_steps (decode_step.h).
#include "decode_step.h"

#include <attngen/attngen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench_shapes.h"

namespace attngen_bench {
namespace {

using attngen::DecodeShape;

attngen_mha_config config_of(const DecodeShape &s, attngen_precision precision,
                             attngen_device device) {
    attngen_mha_config c{};
    c.precision = precision;
    c.d_model = s.d_model;
    c.num_heads = s.heads;
    c.head_dim = s.head_dim;
    c.use_bias = s.bias ? 1 : 0;
    c.device = device;
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

}  // namespace

void run_decode_steps(benchmark::State &state, const DecodeShape &s, attngen_precision precision,
                      attngen_device device, double (*reference_gbs)()) {
    Handles h;
    const attngen_mha_config c = config_of(s, precision, device);
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
    if (reference_gbs != nullptr) {
        state.counters["bw"] = benchmark::Counter(bytes * 1e-9 / reference_gbs(),
                                                  benchmark::Counter::kIsIterationInvariantRate);
    }
}

}  // namespace attngen_bench
