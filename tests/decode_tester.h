// A tester for decoding with a KV cache: a model (MhaTester's weights), a token sequence, and
// the float64 reference of causal self-attention over the whole sequence, against which the
// outputs of attngen_kv_cache_append + attngen_mha_forward_cached are checked row by row, with
// the rounding bounds of error_bounds.h.
#ifndef ATTNGEN_TESTS_DECODE_TESTER_H
#define ATTNGEN_TESTS_DECODE_TESTER_H

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "error_bounds.h"
#include "mha_tester.h"
#include "reference.h"
#include "test_util.h"

namespace attngen_test {

struct CacheDeleter {
    void operator()(attngen_kv_cache *c) const { attngen_kv_cache_destroy(c); }
};
using CacheHandle = std::unique_ptr<attngen_kv_cache, CacheDeleter>;

// One model and, per sequence, its tokens [len, d_model] and the reference outputs of causal
// self-attention over all of them.
class DecodeModel {
  public:
    explicit DecodeModel(const MhaTester &tester) : tester_(tester), model_(tester.MakeModel()) {
        const attngen_mha_config config = tester.config();
        attngen_mha *raw = nullptr;
        EXPECT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        handle_.reset(raw);
        if (raw != nullptr) {
            EXPECT_EQ(model_.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
        }
    }

    attngen_mha *handle() const { return handle_.get(); }
    int d_model() const { return tester_.dims().d_model; }
    const MhaTester::Model &model() const { return model_; }

    // A sequence of len random tokens, seeded, uniform in +-the tester's input_scale.
    std::vector<float> Tokens(int len, uint32_t seed) const {
        Rng rng(seed);
        const float s = tester_.input_scale();
        return rng.Uniform(size_t(len) * d_model(), -s, s);
    }

    // Reference output rows [len, d_model] of causal self-attention over the tokens, and the
    // allowed error of each.
    struct Expected {
        std::vector<double> out, bound;
    };
    Expected SelfAttention(const std::vector<float> &tokens) const {
        const int len = int(tokens.size() / d_model());
        attngen_mask mask{};
        mask.causal = ATTNGEN_CAUSAL_TOP_LEFT;
        return Run(tokens, len, tokens, len, &mask);
    }

    // The last `rows` rows of SelfAttention(tokens): those queries over every token with a
    // bottom-right causal mask, without the other rows' logits (the reference rotates queries
    // at their positions in the sequence, kv_len - q_len + i, as a cache does).
    Expected LastRowsOfSelfAttention(const std::vector<float> &tokens, int rows) const {
        const int len = int(tokens.size() / d_model());
        const std::vector<float> last(tokens.end() - ptrdiff_t(rows) * d_model(), tokens.end());
        attngen_mask mask{};
        mask.causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT;
        return Run(last, rows, tokens, len, &mask);
    }

    // query [q_len, d_model] over memory [kv_len, d_model] (key = value), no mask.
    Expected CrossAttention(const std::vector<float> &query,
                            const std::vector<float> &memory) const {
        return Run(query, int(query.size() / d_model()), memory, int(memory.size() / d_model()),
                   nullptr);
    }

    // out rows [rows, d_model] against expected rows first..first+rows.
    void Check(const std::string &what, const float *out, int rows, const Expected &e,
               int first) const {
        const size_t d = size_t(d_model());
        const std::vector<double> want(e.out.begin() + first * d,
                                       e.out.begin() + (first + rows) * d);
        const std::vector<double> bound(e.bound.begin() + first * d,
                                        e.bound.begin() + (first + rows) * d);
        EXPECT_TRUE(AllClose(what, {rows, d_model()}, want, out,
                             {bound, kRelTol, "decode step against causal self-attention"}))
            << tester_.Describe();
    }

  private:
    Expected Run(const std::vector<float> &query, int q_len, const std::vector<float> &memory,
                 int kv_len, const attngen_mask *mask) const {
        const attngen_mha_config config = tester_.config();
        const attngen_ref::MhaResult ref =
            attngen_ref::mha(config, model_.ref(), 1, q_len, kv_len, query.data(), memory.data(),
                             memory.data(), mask);
        const MhaBounds bounds =
            MhaErrorBounds(config, model_.ref(), 1, q_len, kv_len, query.data(), memory.data(),
                           memory.data(), ref, /*cached_keys_values=*/true);
        if (tester_.softmax_matters()) {
            EXPECT_TRUE(MhaTester::FlatSoftmaxOutsideBound(config, model_.ref(), 1, q_len, kv_len,
                                                           query.data(), memory.data(),
                                                           memory.data(), mask, ref, bounds.out))
                << tester_.Describe();
        }
        return {ref.out, bounds.out};
    }

    MhaTester tester_;
    MhaTester::Model model_;
    MhaHandle handle_;
};

// Decodes a sequence of len random tokens (seeded) on one item of a cache of max_len
// positions, in calls of chunks[0], chunks[1], ... tokens, then one token per call, each
// call's outputs checked against causal self-attention over the whole sequence.
inline void DecodeChunksAndCheck(const MhaTester &tester, int len, const std::vector<int> &chunks,
                                 int max_len, uint32_t token_seed = 11) {
    std::string chunk_list;
    for (int c : chunks) chunk_list += " " + std::to_string(c);
    SCOPED_TRACE(tester.Describe() + ", len " + std::to_string(len) + ", chunks" + chunk_list);
    DecodeModel model(tester);
    ASSERT_NE(model.handle(), nullptr);
    const int d = model.d_model();
    const std::vector<float> tokens = model.Tokens(len, token_seed);
    const DecodeModel::Expected want = model.SelfAttention(tokens);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 1, max_len, &raw), ATTNGEN_OK)
        << attngen_last_error();
    CacheHandle cache(raw);
    std::vector<float> out(size_t(len) * d, kSentinel);
    size_t call = 0;
    for (int t = 0; t < len; ++call) {
        const int step = call < chunks.size() ? chunks[call] : 1;
        const float *x = tokens.data() + size_t(t) * d;
        ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, step, x, x),
                  ATTNGEN_OK)
            << attngen_last_error();
        ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 1, nullptr, step, x,
                                             ATTNGEN_CAUSAL_BOTTOM_RIGHT, &out[size_t(t) * d]),
                  ATTNGEN_OK)
            << attngen_last_error();
        t += step;
    }
    int32_t n = -1;
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), &n), ATTNGEN_OK);
    EXPECT_EQ(n, len);
    model.Check("decoded outputs", out.data(), len, want, 0);
}

// A prompt of `prompt` tokens (none: 0), then one token per call.
inline void DecodeAndCheck(const MhaTester &tester, int len, int prompt, int max_len,
                           uint32_t token_seed = 11) {
    DecodeChunksAndCheck(tester, len, prompt > 0 ? std::vector<int>{prompt} : std::vector<int>{},
                         max_len, token_seed);
}

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_DECODE_TESTER_H
