// attngen demo: the classic tutorials' attention examples and MHA forwards at the tutorial
// shapes, each checked against the float64 reference, with the time per call.
// Exits non-zero if any result is off.
#include <attngen/attngen.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "reference.h"

namespace {

int failures = 0;

// Largest |got - ref| relative to the largest |ref|: the kernels compute in float32 against a
// float64 reference, so agreement to 1e-4 of the output's scale is the expected accuracy.
double relative_error(const std::vector<float> &got, const std::vector<double> &ref) {
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, std::abs(double(got[i]) - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
    }
    return worst / scale;
}

void report(const char *what, double error, double tolerance) {
    const bool ok = error <= tolerance;
    if (!ok) ++failures;
    std::printf("  %-34s max relative error %.2e (tolerance %.0e)  %s\n", what, error, tolerance,
                ok ? "ok" : "FAILED");
}

// Median wall time of a call, in microseconds, after one warm-up call.
double time_per_call_us(const std::function<void()> &call) {
    call();
    std::vector<double> times;
    for (int rep = 0; rep < 15; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        call();
        times.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return times[times.size() / 2];
}

std::vector<float> random_vector(size_t n, std::mt19937 &rng, float scale = 1.0f) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    return v;
}

void tutorial_attention() {
    std::printf("Scaled dot-product attention, the tutorial example (keys, values of 4 rows)\n");
    const std::vector<float> keys = {10, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 10};
    const std::vector<float> values = {1, 0, 10, 0, 100, 5, 1000, 6};
    const struct {
        std::vector<float> query;
        std::vector<float> weights, out;
    } cases[] = {{{0, 0, 10}, {0, 0, 0.5f, 0.5f}, {550, 5.5f}},
                 {{0, 10, 0}, {0, 1, 0, 0}, {10, 0}},
                 {{10, 10, 0}, {0.5f, 0.5f, 0, 0}, {5.5f, 0}}};
    for (const auto &c : cases) {
        std::vector<float> out(2), weights(4);
        attngen::scaled_dot_product_attention(
            {c.query.data(), {1, 1, 1, 3}}, {keys.data(), {1, 1, 4, 3}},
            {values.data(), {1, 1, 4, 2}}, {out.data(), {1, 1, 1, 2}}, {}, 0.0f,
            {weights.data(), {1, 1, 1, 4}});
        std::printf(
            "  query [%g, %g, %g] -> weights [%.4f, %.4f, %.4f, %.4f], output [%.4f, %.4f]\n",
            c.query[0], c.query[1], c.query[2], weights[0], weights[1], weights[2], weights[3],
            out[0], out[1]);
        const std::vector<double> expected_w(c.weights.begin(), c.weights.end());
        const std::vector<double> expected_o(c.out.begin(), c.out.end());
        report("weights vs the tutorial", relative_error(weights, expected_w), 1e-5);
        report("output vs the tutorial", relative_error(out, expected_o), 1e-5);
    }
}

void mha_case(const char *name, attngen_mha_config config, int batch, int q_len, int kv_len,
              bool with_weights, std::mt19937 &rng) {
    attngen::MhaConfig cfg;
    cfg.d_model = config.d_model;
    cfg.num_heads = config.num_heads;
    cfg.kdim = config.kdim;
    cfg.vdim = config.vdim;
    cfg.head_dim = config.head_dim;
    cfg.use_bias = config.use_bias != 0;
    attngen::MultiHeadAttention mha(cfg);
    const attngen::MhaConfig &c = mha.config();
    const int64_t inner = int64_t(c.num_heads) * c.head_dim;
    // Weights scaled like torch's default initialisation, 1/sqrt(fan_in).
    auto wq = random_vector(inner * c.d_model, rng, 1.0f / std::sqrt(float(c.d_model)));
    auto wk = random_vector(inner * c.kdim, rng, 1.0f / std::sqrt(float(c.kdim)));
    auto wv = random_vector(inner * c.vdim, rng, 1.0f / std::sqrt(float(c.vdim)));
    auto wo = random_vector(c.d_model * inner, rng, 1.0f / std::sqrt(float(inner)));
    auto bq = random_vector(inner, rng, 0.1f), bk = random_vector(inner, rng, 0.1f);
    auto bv = random_vector(inner, rng, 0.1f), bo = random_vector(c.d_model, rng, 0.1f);
    mha.set_weights({wq.data(), {inner, c.d_model}}, {wk.data(), {inner, c.kdim}},
                    {wv.data(), {inner, c.vdim}}, {wo.data(), {c.d_model, inner}},
                    {bq.data(), {inner}}, {bk.data(), {inner}}, {bv.data(), {inner}},
                    {bo.data(), {c.d_model}});
    auto query = random_vector(size_t(batch) * q_len * c.d_model, rng);
    auto key = random_vector(size_t(batch) * kv_len * c.kdim, rng);
    auto value = random_vector(size_t(batch) * kv_len * c.vdim, rng);
    std::vector<float> out(size_t(batch) * q_len * c.d_model);
    std::vector<float> weights(with_weights ? size_t(batch) * c.num_heads * q_len * kv_len : 0);
    attngen::TensorView<float> weights_view;
    if (with_weights) weights_view = {weights.data(), {batch, c.num_heads, q_len, kv_len}};
    auto forward = [&] {
        mha.forward({query.data(), {batch, q_len, c.d_model}},
                    {key.data(), {batch, kv_len, c.kdim}}, {value.data(), {batch, kv_len, c.vdim}},
                    {out.data(), {batch, q_len, c.d_model}}, {}, weights_view);
    };
    const double us = time_per_call_us(forward);

    std::printf(
        "%s\n  query [%d, %d, %d], key [%d, %d, %d], value [%d, %d, %d] -> out [%d, %d, %d]", name,
        batch, q_len, c.d_model, batch, kv_len, c.kdim, batch, kv_len, c.vdim, batch, q_len,
        c.d_model);
    if (with_weights) std::printf(", weights [%d, %d, %d, %d]", batch, c.num_heads, q_len, kv_len);
    std::printf("\n  time per call: %.1f us (median of 15)\n", us);

    attngen_ref::MhaWeights w{wq.data(), wk.data(), wv.data(), wo.data(),
                              bq.data(), bk.data(), bv.data(), bo.data()};
    const attngen_ref::MhaResult ref = attngen_ref::mha(
        config, w, batch, q_len, kv_len, query.data(), key.data(), value.data(), nullptr);
    report("output vs float64 reference", relative_error(out, ref.out), 1e-4);
    if (with_weights)
        report("weights vs float64 reference", relative_error(weights, ref.weights), 1e-4);
}

}  // namespace

int main() {
    std::printf("attngen %s\n\n", attngen_version());
    tutorial_attention();
    std::mt19937 rng(2024);
    attngen_mha_config tutorial{
        512, 8,   0, 0, 0, 1, ATTNGEN_DEVICE_CPU, 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
        0,   0.0f};
    std::printf("\n");
    mha_case("MHA d_model 512, 8 heads (the tutorial's cross shapes)", tutorial, 1, 62, 60, true,
             rng);
    mha_case("MHA d_model 512, 8 heads, batch 32 (the tutorial's batch)", tutorial, 32, 10, 20,
             false, rng);
    // Stable Diffusion's CrossAttention: query 320 features, a 77-token context of 768, 8 heads
    // of 40, no projection bias.
    attngen_mha_config cross{320,
                             8,
                             768,
                             768,
                             40,
                             0,
                             ATTNGEN_DEVICE_CPU,
                             0,
                             0,
                             ATTNGEN_PRECISION_F32,
                             ATTNGEN_ROPE_NONE,
                             0,
                             0.0f};
    mha_case("Cross attention (Stable Diffusion): context of 77 x 768, no bias", cross, 2, 64, 77,
             false, rng);
    std::printf("\n%s\n", failures == 0 ? "All results match the reference."
                                        : "Some results do NOT match the reference.");
    return failures == 0 ? 0 : 1;
}
