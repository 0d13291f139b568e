// DecodeStepper and run_decode_steps (decode_step.h).
#include "decode_step.h"

#include <algorithm>
#include <cmath>

#include "bench_shapes.h"

namespace attngen_bench {

using attngen::DecodeShape;

namespace {

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

}  // namespace

bool DecodeStepper::ok(attngen_status s) {
    if (s != ATTNGEN_OK) error_ = attngen_last_error();
    return s == ATTNGEN_OK;
}

DecodeStepper::DecodeStepper(const DecodeShape &s, attngen_precision precision,
                             attngen_device device)
    : shape_(s), precision_(precision) {
    const attngen_mha_config c = config_of(s, precision, device);
    if (!ok(attngen_mha_create(&c, &m_))) return;
    const size_t q = size_t(s.heads) * s.head_dim, kv = size_t(s.kv_heads) * s.head_dim;
    const float wscale = 1.0f / std::sqrt(float(s.d_model));
    const auto wq = random_vector(q * s.d_model, wscale, 1);
    const auto wk = random_vector(kv * s.d_model, wscale, 2);
    const auto wv = random_vector(kv * s.d_model, wscale, 3);
    const auto wo = random_vector(size_t(s.d_model) * q, 1.0f / std::sqrt(float(q)), 4);
    const auto bq = random_vector(q, 0.1f, 5), bk = random_vector(kv, 0.1f, 6);
    const auto bv = random_vector(kv, 0.1f, 7), bo = random_vector(s.d_model, 0.1f, 8);
    if (!ok(attngen_mha_set_weights(m_, wq.data(), wk.data(), wv.data(), wo.data(), bq.data(),
                                    bk.data(), bv.data(), bo.data())) ||
        !ok(attngen_kv_cache_create(m_, s.batch, s.cache_len + s.q_len, &cache_)) ||
        !ok(attngen_kv_cache_create(m_, s.batch, s.q_len, &scratch_)))
        return;
    // Fill the cache in chunks of 256 positions (the rows are random tokens).
    for (int filled = 0; filled < s.cache_len;) {
        const int chunk = std::min(256, s.cache_len - filled);
        const auto x = random_vector(size_t(s.batch) * chunk * s.d_model, 1.0f, 100 + filled);
        if (!ok(attngen_kv_cache_append(m_, cache_, s.batch, nullptr, chunk, x.data(), x.data())))
            return;
        filled += chunk;
    }
    x_ = random_vector(size_t(s.batch) * s.q_len * s.d_model, 1.0f, 9);
    out_.resize(x_.size());
}

DecodeStepper::~DecodeStepper() {
    attngen_kv_cache_destroy(scratch_);
    attngen_kv_cache_destroy(cache_);
    attngen_mha_destroy(m_);
}

attngen_status DecodeStepper::step() {
    attngen_kv_cache *append_to = shape_.cache_len == 0 ? cache_ : scratch_;
    attngen_status s = attngen_kv_cache_reset(append_to, -1);
    if (s == ATTNGEN_OK) {
        s = attngen_kv_cache_append(m_, append_to, shape_.batch, nullptr, shape_.q_len, x_.data(),
                                    x_.data());
    }
    if (s == ATTNGEN_OK) {
        s = attngen_mha_forward_cached(m_, cache_, shape_.batch, nullptr, shape_.q_len, x_.data(),
                                       ATTNGEN_CAUSAL_BOTTOM_RIGHT, out_.data());
    }
    benchmark::DoNotOptimize(out_.data());
    return s;
}

double DecodeStepper::step_bytes() const {
    const DecodeShape &s = shape_;
    const double q = double(s.heads) * s.head_dim, kv = double(s.kv_heads) * s.head_dim;
    const double weights = double(s.d_model) * (2 * q + 2 * kv);
    const double cache = double(s.batch) * s.cache_len * 2 * kv;
    return (precision_ == ATTNGEN_PRECISION_F32 ? 4 : 2) * (weights + cache);
}

void run_decode_steps(benchmark::State &state, const DecodeShape &s, attngen_precision precision,
                      attngen_device device, double (*reference_gbs)(),
                      double (*resident_gbs)(double bytes)) {
    DecodeStepper stepper(s, precision, device);
    if (!stepper.error().empty()) {
        state.SkipWithError(stepper.error().c_str());
        return;
    }
    const double bytes = stepper.step_bytes();
    // Before the steps: measured between them, its buffer would evict the step's from the cache.
    // One untimed step after it brings the step's bytes back into the cache.
    const double resident = resident_gbs != nullptr ? resident_gbs(bytes) : 0.0;
    if (resident > 0.0 && stepper.step() != ATTNGEN_OK) {
        state.SkipWithError(attngen_last_error());
        return;
    }
    for (auto _ : state) {
        if (stepper.step() != ATTNGEN_OK) {
            state.SkipWithError(attngen_last_error());
            break;
        }
    }
    state.counters["GB/s"] =
        benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    if (reference_gbs != nullptr) {
        state.counters["bw"] = benchmark::Counter(bytes * 1e-9 / reference_gbs(),
                                                  benchmark::Counter::kIsIterationInvariantRate);
    }
    if (resident > 0.0) {
        state.counters["bw_resident"] = benchmark::Counter(
            bytes * 1e-9 / resident, benchmark::Counter::kIsIterationInvariantRate);
    }
}

}  // namespace attngen_bench
