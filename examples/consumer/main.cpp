// Runs the kernels this project generated with attngen_add_library beside attngen's generic
// forward (the C API) on the same module and inputs, and checks that they agree; then checks
// that a kernel refuses a size other than the one it was made for. Exits non-zero on failure.
#include <attngen/attngen.h>
#include <attngen/specialized.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "mha_h4_d16.h"
#include "mha_h4_d16_causal.h"
#include "mha_h4_d64_li2018.h"

namespace {

constexpr int kModel = 64, kHeads = 4, kHeadDim = 16, kBatch = 2, kQ = 9, kKv = 13;

std::vector<float> random_vector(size_t n, std::mt19937 &rng, float bound) {
    std::uniform_real_distribution<float> u(-bound, bound);
    std::vector<float> v(n);
    for (float &x : v) x = u(rng);
    return v;
}

float max_difference(const std::vector<float> &a, const std::vector<float> &b) {
    float d = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
    return d;
}

bool check(bool ok, const std::string &what) {
    std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
    return ok;
}

// The Li2018-scheduled kernel against the generic one at a size it was planned for.
bool check_autoscheduled(std::mt19937 &rng) {
    constexpr int model = 256, heads = 4, head_dim = 64, len = 128;
    const float bound = 1.0f / std::sqrt(float(model));
    const auto w = [&] { return random_vector(size_t(model) * model, rng, bound); };
    const std::vector<float> wq = w(), wk = w(), wv = w(), wo = w();
    const std::vector<float> x = random_vector(size_t(len) * model, rng, 1.0f);
    const attngen_mha_config config{model,
                                    heads,
                                    0,
                                    0,
                                    0,
                                    0,
                                    ATTNGEN_DEVICE_CPU,
                                    0,
                                    0,
                                    ATTNGEN_PRECISION_F32,
                                    ATTNGEN_ROPE_NONE,
                                    0,
                                    0.0f};
    attngen_mha *m = nullptr;
    std::vector<float> generic(size_t(len) * model), out(generic.size());
    const bool ran = attngen_mha_create(&config, &m) == ATTNGEN_OK &&
                     attngen_mha_set_weights(m, wq.data(), wk.data(), wv.data(), wo.data(), nullptr,
                                             nullptr, nullptr, nullptr) == ATTNGEN_OK &&
                     attngen_mha_forward(m, 1, len, len, x.data(), x.data(), x.data(), nullptr,
                                         generic.data(), nullptr) == ATTNGEN_OK;
    attngen_mha_destroy(m);
    if (!check(ran, "generic forward at 256 wide, 128 tokens")) return false;
    namespace sp = attngen::specialized;
    const sp::MhaWeights packed(model, heads, head_dim, 0, 0, wq.data(), wk.data(), wv.data(),
                                wo.data());
    const int code = sp::forward(mha_h4_d64_li2018, packed, 1, len, len, x.data(), x.data(),
                                 x.data(), nullptr, out.data());
    // Another schedule sums in another order: agreement to float rounding of sums of 256.
    return check(code == 0 && max_difference(out, generic) <= 1e-4f,
                 "mha_h4_d64_li2018 (Li2018) matches, code " + std::to_string(code) +
                     ", max |diff| " + std::to_string(max_difference(out, generic)) + " " +
                     attngen_last_error());
}

// What attngen_mha_forward refuses by shape, forward() refuses before the kernel runs, with a
// code and a message, out untouched; MhaWeights throws for what set_weights refuses.
bool check_refusals(const attngen::specialized::MhaWeights &packed, const std::vector<float> &query,
                    const std::vector<float> &key, const std::vector<float> &value,
                    const attngen_mask &plain) {
    namespace sp = attngen::specialized;
    constexpr float kUntouched = -7.0f;
    std::vector<float> out(size_t(kBatch) * kQ * kModel, kUntouched);
    const auto refused = [&](int code, const std::string &what, const char *word) {
        const std::string message = attngen_last_error();
        const bool untouched =
            std::all_of(out.begin(), out.end(), [](float x) { return x == kUntouched; });
        return check(code != 0 && message.find(word) != std::string::npos && untouched,
                     what + ", code " + std::to_string(code) + ": \"" + message + "\"");
    };
    bool ok = refused(sp::forward(mha_h4_d16, packed, kBatch, kQ, kKv, nullptr, key.data(),
                                  value.data(), &plain, out.data()),
                      "a NULL query is refused", "query");
    const std::vector<uint8_t> one_item(size_t(kQ) * kKv, 0);
    attngen_mask three_items = plain;
    three_items.bool_mask = one_item.data();
    three_items.bool_mask_batch = 3;
    ok &= refused(sp::forward(mha_h4_d16, packed, kBatch, kQ, kKv, query.data(), key.data(),
                              value.data(), &three_items, out.data()),
                  "a bool_mask of 3 items for a batch of 2 is refused", "bool_mask_batch");
    const std::vector<int32_t> past_kv_len = {kKv + 1, 7};
    attngen_mask long_lengths = plain;
    long_lengths.kv_lengths = past_kv_len.data();
    ok &= refused(sp::forward(mha_h4_d16, packed, kBatch, kQ, kKv, query.data(), key.data(),
                              value.data(), &long_lengths, out.data()),
                  "a kv_lengths entry past kv_len is refused", "kv_lengths");
    ok &= refused(sp::forward(mha_h4_d16, packed, 0, kQ, kKv, query.data(), key.data(),
                              value.data(), &plain, out.data()),
                  "a batch of 0 is refused", "batch");
    // 2^31 / (4 bytes x 64 features) rows: a query past what a kernel indexes (never read).
    ok &= refused(sp::forward(mha_h4_d16, packed, 1, 1 << 23, kKv, query.data(), key.data(),
                              value.data(), nullptr, out.data()),
                  "a query of 2^23 rows of 64 floats is refused", "2^31");
    const std::vector<float> zeros(size_t(kModel) * kModel, 0.0f);
    const float *w = zeros.data();
    bool threw = false;
    try {
        const sp::MhaWeights no_wq(kModel, kHeads, kHeadDim, 0, 0, nullptr, w, w, w);
    } catch (const std::invalid_argument &) {
        threw = true;
    }
    ok &= check(threw, "MhaWeights refuses a NULL weight");
    std::vector<float> one_nan = zeros;
    one_nan.back() = std::nanf("");
    threw = false;
    try {
        const sp::MhaWeights nan_wo(kModel, kHeads, kHeadDim, 0, 0, w, w, w, one_nan.data());
    } catch (const std::invalid_argument &) {
        threw = true;
    }
    ok &= check(threw, "MhaWeights refuses a NaN weight");
    threw = false;
    try {
        const sp::MhaWeights huge(kModel, 1 << 17, 1, 0, 0, w, w, w, w);
    } catch (const std::invalid_argument &) {
        threw = true;
    }
    ok &= check(threw, "MhaWeights refuses 2^17 heads");
    ok &= check(sp::MhaWeights(kModel, kHeads, 0, 0, 0, w, w, w, w).head_dim == kHeadDim,
                "MhaWeights takes head_dim 0 as d_model / num_heads");
    return ok;
}

}  // namespace

int main() {
    std::mt19937 rng(7);
    const float bound = 1.0f / std::sqrt(float(kModel));
    const auto w = [&] { return random_vector(size_t(kModel) * kModel, rng, bound); };
    const std::vector<float> wq = w(), wk = w(), wv = w(), wo = w();
    const std::vector<float> bq = random_vector(kModel, rng, 0.5f),
                             bk = random_vector(kModel, rng, 0.5f),
                             bv = random_vector(kModel, rng, 0.5f),
                             bo = random_vector(kModel, rng, 0.5f);
    const std::vector<float> query = random_vector(size_t(kBatch) * kQ * kModel, rng, 1.0f),
                             key = random_vector(size_t(kBatch) * kKv * kModel, rng, 1.0f),
                             value = random_vector(size_t(kBatch) * kKv * kModel, rng, 1.0f);
    const std::vector<int32_t> kv_lengths = {kKv, 7};

    // attngen's generic kernels, through the C API.
    attngen_mha_config config{};
    config.d_model = kModel;
    config.num_heads = kHeads;
    config.use_bias = 1;
    attngen_mha *m = nullptr;
    if (attngen_mha_create(&config, &m) != ATTNGEN_OK ||
        attngen_mha_set_weights(m, wq.data(), wk.data(), wv.data(), wo.data(), bq.data(), bk.data(),
                                bv.data(), bo.data()) != ATTNGEN_OK) {
        std::printf("FAIL: attngen: %s\n", attngen_last_error());
        return 1;
    }
    const size_t out_size = size_t(kBatch) * kQ * kModel;
    const size_t weights_size = size_t(kBatch) * kHeads * kQ * kKv;
    attngen_mask plain{};
    plain.kv_lengths = kv_lengths.data();
    attngen_mask causal = plain;
    causal.causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT;
    std::vector<float> generic_out(out_size), generic_causal(out_size),
        generic_weights(weights_size);
    attngen_mha_forward(m, kBatch, kQ, kKv, query.data(), key.data(), value.data(), &plain,
                        generic_out.data(), nullptr);
    attngen_mha_forward(m, kBatch, kQ, kKv, query.data(), key.data(), value.data(), &causal,
                        generic_causal.data(), generic_weights.data());
    attngen_mha_destroy(m);

    // The generated kernels.
    namespace sp = attngen::specialized;
    const sp::MhaWeights packed(kModel, kHeads, kHeadDim, 0, 0, wq.data(), wk.data(), wv.data(),
                                wo.data(), bq.data(), bk.data(), bv.data(), bo.data());
    std::vector<float> out(out_size), out_causal(out_size), weights(weights_size);
    bool ok = true;
    int code = sp::forward(mha_h4_d16, packed, kBatch, kQ, kKv, query.data(), key.data(),
                           value.data(), &plain, out.data());
    ok &= check(code == 0, "mha_h4_d16 runs (" + std::string(attngen_last_error()) + ")");
    code = sp::forward_with_weights(mha_h4_d16_causal, packed, kBatch, kQ, kKv, query.data(),
                                    key.data(), value.data(), &causal, out_causal.data(),
                                    weights.data());
    ok &= check(code == 0, "mha_h4_d16_causal runs (" + std::string(attngen_last_error()) + ")");
    // Same algorithm and schedule, sizes fixed: agreement to float rounding.
    const float tolerance = 1e-5f;
    ok &= check(max_difference(out, generic_out) <= tolerance,
                "mha_h4_d16 matches attngen_mha_forward, max |diff| " +
                    std::to_string(max_difference(out, generic_out)));
    ok &= check(max_difference(out_causal, generic_causal) <= tolerance &&
                    max_difference(weights, generic_weights) <= tolerance,
                "mha_h4_d16_causal matches (out and weights), max |diff| " +
                    std::to_string(std::max(max_difference(out_causal, generic_causal),
                                            max_difference(weights, generic_weights))));

    // A module of 8 heads of 8 (same weight shapes) is refused by a kernel made for 4 of 16.
    const sp::MhaWeights other(kModel, 8, 8, 0, 0, wq.data(), wk.data(), wv.data(), wo.data());
    code = sp::forward(mha_h4_d16, other, kBatch, kQ, kKv, query.data(), key.data(), value.data(),
                       &plain, out.data());
    const std::string message = attngen_last_error();
    ok &= check(code != 0 && message.find("this kernel was generated for") != std::string::npos,
                "a kernel for 4 heads refuses 8: \"" + message + "\"");
    ok &= check_refusals(packed, query, key, value, plain);
    ok &= check_autoscheduled(rng);
    std::printf("%s\n", ok ? "consumer: all checks passed" : "consumer: FAILED");
    return ok ? 0 : 1;
}
