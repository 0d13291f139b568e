// Decoding with a KV cache: attngen_kv_cache_* and attngen_mha_forward_cached against the
// float64 reference of attention over the whole sequence, for MHA, GQA, MQA, rotary positions
// in both layouts, partial rotary and a value head size of its own; prompts, items at
// different lengths, empty items, reset, cross-attention, and every refusal.
#include "decode_tester.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>
#include <attngen/attngen.hpp>

#include <cstring>
#include <thread>
#include <vector>

namespace attngen_test {
namespace {

// Token rows t0..t0+len of a sequence.
const float *Rows(const std::vector<float> &tokens, int t0, int d_model) {
    return tokens.data() + size_t(t0) * d_model;
}

MhaTester Model(int d_model, int heads) {
    MhaTester t;
    t.d_model(d_model).num_heads(heads);
    return t;
}

TEST(Decode, StepByStepEqualsCausalAttentionOverTheSequence) {
    DecodeAndCheck(Model(32, 4), 12, 0, 16);
}

TEST(Decode, GroupedQueryAndMultiQuery) {
    DecodeAndCheck(Model(32, 8).num_kv_heads(2), 10, 0, 10);  // 4 query heads per KV head
    DecodeAndCheck(Model(32, 4).num_kv_heads(1), 9, 0, 9);    // MQA
}

TEST(Decode, RotaryPositionsBothLayoutsAndPartial) {
    DecodeAndCheck(Model(32, 4).rope(ATTNGEN_ROPE_HALF), 9, 0, 9);
    DecodeAndCheck(Model(32, 4).rope(ATTNGEN_ROPE_INTERLEAVED), 9, 0, 9);
    DecodeAndCheck(Model(32, 2).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF, 6, 500000.0f), 7, 0, 8);
}

TEST(Decode, ValueHeadSizeOfItsOwn) {
    DecodeAndCheck(Model(24, 4).num_kv_heads(2).v_head_dim(5), 8, 0, 8);
    DecodeAndCheck(Model(24, 4).v_head_dim(11).rope(ATTNGEN_ROPE_INTERLEAVED), 6, 0, 6);
}

TEST(Decode, PromptThenSteps) {
    DecodeAndCheck(Model(32, 4).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF), 14, 9, 20);
}

// Projections of up to 8 rows split their reduction over input features into parallel tasks
// (schedule_cpu.cpp); 130 features make tasks of 12 with a last one of 10, and prompts of 7, 8
// and 9 rows fall on either side of the split's row limit.
TEST(Decode, PromptsAroundTheSplitReductionsRowLimit) {
    for (int prompt : {7, 8, 9}) {
        DecodeAndCheck(Model(130, 2).num_kv_heads(1), prompt + 2, prompt, prompt + 2);
        DecodeAndCheck(Model(130, 5).rope(ATTNGEN_ROPE_HALF), prompt + 2, prompt, prompt + 2);
    }
}

// A cache longer than one split of the decode kernel (256 keys): splits merged by their
// log-sum-exp, the last one partial.
TEST(Decode, LongCacheAcrossSplits) {
    DecodeAndCheck(Model(16, 4).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF), 600, 595, 600);
}

// Two items that started at different times, decoded in one call with items {1, 0}.
TEST(Decode, ItemsAtDifferentLengthsInOneCall) {
    const MhaTester tester = Model(32, 8).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
    DecodeModel model(tester);
    const int d = model.d_model();
    const std::vector<float> a = model.Tokens(9, 21), b = model.Tokens(6, 22);
    const DecodeModel::Expected want_a = model.SelfAttention(a), want_b = model.SelfAttention(b);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 3, 16, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    const int32_t item_a = 1, item_b = 0;
    // Item a takes a prompt of 5, item b of 2.
    ASSERT_EQ(
        attngen_kv_cache_append(model.handle(), cache.get(), 1, &item_a, 5, a.data(), a.data()),
        ATTNGEN_OK);
    ASSERT_EQ(
        attngen_kv_cache_append(model.handle(), cache.get(), 1, &item_b, 2, b.data(), b.data()),
        ATTNGEN_OK);
    for (int step = 0; step < 4; ++step) {
        const int ta = 5 + step, tb = 2 + step;
        std::vector<float> x(2 * d), out(2 * d, kSentinel);
        std::memcpy(&x[0], Rows(a, ta, d), d * sizeof(float));
        std::memcpy(&x[d], Rows(b, tb, d), d * sizeof(float));
        const int32_t items[2] = {item_a, item_b};
        ASSERT_EQ(
            attngen_kv_cache_append(model.handle(), cache.get(), 2, items, 1, x.data(), x.data()),
            ATTNGEN_OK)
            << attngen_last_error();
        ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 2, items, 1, x.data(),
                                             ATTNGEN_CAUSAL_BOTTOM_RIGHT, out.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        model.Check("item a", &out[0], 1, want_a, ta);
        model.Check("item b", &out[d], 1, want_b, tb);
    }
    int32_t lengths[3];
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], 6);
    EXPECT_EQ(lengths[1], 9);
    EXPECT_EQ(lengths[2], 0);
}

// Nothing visible: attention contributes 0 and the output is the output projection's bias.
TEST(Decode, AnEmptyItemGivesTheOutputBias) {
    const MhaTester tester = Model(16, 2);
    DecodeModel model(tester);
    const int d = model.d_model();
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 2, 4, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    const std::vector<float> x = model.Tokens(3, 5);
    std::vector<float> out(3 * d, kSentinel);
    const int32_t item = 1;
    ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 1, &item, 3, x.data(),
                                         ATTNGEN_CAUSAL_NONE, out.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    for (int r = 0; r < 3; ++r)
        for (int o = 0; o < d; ++o) EXPECT_EQ(out[r * d + o], model.model().bo[o]) << r << " " << o;
}

TEST(Decode, ResetEmptiesAnItemAndItDecodesAgain) {
    const MhaTester tester = Model(16, 4).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
    DecodeModel model(tester);
    const int d = model.d_model();
    const std::vector<float> seq = model.Tokens(5, 3), other = model.Tokens(4, 4);
    const DecodeModel::Expected want = model.SelfAttention(seq);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 2, 8, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, 4, other.data(),
                                      other.data()),
              ATTNGEN_OK);
    ASSERT_EQ(attngen_kv_cache_reset(cache.get(), 0), ATTNGEN_OK);
    int32_t lengths[2] = {-1, -1};
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], 0);
    std::vector<float> out(size_t(5) * d, kSentinel);
    ASSERT_EQ(
        attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, 5, seq.data(), seq.data()),
        ATTNGEN_OK);
    ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 1, nullptr, 5, seq.data(),
                                         ATTNGEN_CAUSAL_BOTTOM_RIGHT, out.data()),
              ATTNGEN_OK);
    model.Check("after reset", out.data(), 5, want, 0);
    ASSERT_EQ(attngen_kv_cache_reset(cache.get(), -1), ATTNGEN_OK);
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], 0);
    EXPECT_EQ(lengths[1], 0);
}

// An encoder-decoder's decoder: the encoder output appended once, every step attends to all of
// it (causal NONE).
TEST(Decode, CrossAttentionAppendsTheMemoryOnce) {
    const MhaTester tester = Model(32, 4).num_kv_heads(2);
    DecodeModel model(tester);
    const int d = model.d_model();
    const std::vector<float> memory = model.Tokens(11, 31), queries = model.Tokens(4, 32);
    const DecodeModel::Expected want = model.CrossAttention(queries, memory);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 1, 11, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, 11, memory.data(),
                                      memory.data()),
              ATTNGEN_OK);
    for (int step = 0; step < 4; ++step) {
        std::vector<float> out(d, kSentinel);
        ASSERT_EQ(
            attngen_mha_forward_cached(model.handle(), cache.get(), 1, nullptr, 1,
                                       Rows(queries, step, d), ATTNGEN_CAUSAL_NONE, out.data()),
            ATTNGEN_OK)
            << attngen_last_error();
        model.Check("cross-attention step", out.data(), 1, want, step);
    }
}

// The C++ layer: the same decode through attngen::KvCache.
TEST(Decode, CppKvCache) {
    attngen::MhaConfig config;
    config.d_model = 16;
    config.num_heads = 4;
    config.num_kv_heads = 2;
    config.rope = ATTNGEN_ROPE_HALF;
    attngen::MultiHeadAttention mha(config);
    MhaTester tester = Model(16, 4).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
    const MhaTester::Model m = tester.MakeModel();
    mha.set_weights({m.wq.data(), {16, 16}}, {m.wk.data(), {8, 16}}, {m.wv.data(), {8, 16}},
                    {m.wo.data(), {16, 16}}, {m.bq.data(), {16}}, {m.bk.data(), {8}},
                    {m.bv.data(), {8}}, {m.bo.data(), {16}});
    DecodeModel model(tester);
    const std::vector<float> seq = model.Tokens(3, 9);
    const DecodeModel::Expected want = model.SelfAttention(seq);
    attngen::KvCache cache(mha, 1, 4);
    std::vector<float> out(16);
    for (int t = 0; t < 3; ++t) {
        cache.append({Rows(seq, t, 16), {1, 1, 16}}, {Rows(seq, t, 16), {1, 1, 16}});
        cache.forward({Rows(seq, t, 16), {1, 1, 16}}, {out.data(), {1, 1, 16}});
        model.Check("C++ step", out.data(), 1, want, t);
    }
    EXPECT_EQ(cache.lengths(), std::vector<int32_t>{3});
    EXPECT_THROW(cache.append({seq.data(), {1, 2, 16}}, {seq.data(), {1, 2, 16}}),
                 attngen::Error);  // past max_len
}

// Different caches of one handle decode concurrently, with the results of running alone.
TEST(Decode, DifferentCachesConcurrently) {
    const MhaTester tester = Model(32, 8).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
    DecodeModel model(tester);
    const int d = model.d_model(), len = 24;
    const auto decode = [&](uint32_t seed, std::vector<float> *out) {
        const std::vector<float> seq = model.Tokens(len, seed);
        attngen_kv_cache *raw = nullptr;
        if (attngen_kv_cache_create(model.handle(), 1, len, &raw) != ATTNGEN_OK) return;
        CacheHandle cache(raw);
        out->assign(size_t(len) * d, kSentinel);
        for (int t = 0; t < len; ++t) {
            const float *x = Rows(seq, t, d);
            if (attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, 1, x, x) ||
                attngen_mha_forward_cached(model.handle(), cache.get(), 1, nullptr, 1, x,
                                           ATTNGEN_CAUSAL_BOTTOM_RIGHT, &(*out)[size_t(t) * d]))
                return;
        }
    };
    std::vector<std::vector<float>> alone(4), together(4);
    for (int k = 0; k < 4; ++k) decode(100 + k, &alone[k]);
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) threads.emplace_back(decode, 100 + k, &together[k]);
    for (std::thread &th : threads) th.join();
    for (int k = 0; k < 4; ++k) {
        ASSERT_EQ(alone[k].size(), together[k].size());
        EXPECT_EQ(0, std::memcmp(alone[k].data(), together[k].data(), alone[k].size() * 4)) << k;
    }
}

// ---------------------------------------------------------------------------------------------
// Refusals: each leaves the cache and the outputs as they were.

class DecodeErrors : public ::testing::Test {
  protected:
    DecodeErrors() : model_(Model(16, 4).num_kv_heads(2)) {
        attngen_kv_cache *raw = nullptr;
        EXPECT_EQ(attngen_kv_cache_create(model_.handle(), 2, 4, &raw), ATTNGEN_OK);
        cache_.reset(raw);
        x_ = model_.Tokens(8, 1);
    }
    std::vector<int32_t> Lengths() const {
        std::vector<int32_t> n(2, -1);
        EXPECT_EQ(attngen_kv_cache_lengths(cache_.get(), n.data()), ATTNGEN_OK);
        return n;
    }
    attngen_status Append(int batch, const int32_t *items, int len) {
        return attngen_kv_cache_append(model_.handle(), cache_.get(), batch, items, len, x_.data(),
                                       x_.data());
    }
    attngen_status Forward(int batch, const int32_t *items, int q_len, attngen_causal causal,
                           std::vector<float> *out) {
        out->assign(size_t(batch) * q_len * 16, kSentinel);
        return attngen_mha_forward_cached(model_.handle(), cache_.get(), batch, items, q_len,
                                          x_.data(), causal, out->data());
    }
    static bool Untouched(const std::vector<float> &out) {
        for (float v : out)
            if (v != kSentinel) return false;
        return true;
    }

    DecodeModel model_;
    CacheHandle cache_;
    std::vector<float> x_;
};

TEST_F(DecodeErrors, ItemsOutOfRangeOrDuplicate) {
    const int32_t out_of_range[1] = {2}, negative[1] = {-1}, twice[2] = {1, 1};
    EXPECT_EQ(Append(1, out_of_range, 1), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(Append(1, negative, 1), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(Append(2, twice, 1), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(attngen_last_error(), "twice"), nullptr) << attngen_last_error();
    EXPECT_EQ(Append(3, nullptr, 1), ATTNGEN_ERROR_SHAPE) << "batch past max_batch";
    std::vector<float> out;
    EXPECT_EQ(Forward(2, twice, 1, ATTNGEN_CAUSAL_NONE, &out), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(Untouched(out));
    EXPECT_EQ(Lengths(), (std::vector<int32_t>{0, 0}));
}

TEST_F(DecodeErrors, NonPositiveLengths) {
    EXPECT_EQ(Append(1, nullptr, 0), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(Append(1, nullptr, -3), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(Append(0, nullptr, 1), ATTNGEN_ERROR_INVALID_ARGUMENT);
    std::vector<float> out;
    EXPECT_EQ(Forward(1, nullptr, 0, ATTNGEN_CAUSAL_NONE, &out), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(Lengths(), (std::vector<int32_t>{0, 0}));
}

TEST_F(DecodeErrors, OverflowPastMaxLenAppendsToNoItem) {
    const int32_t items[2] = {0, 1};
    ASSERT_EQ(Append(1, &items[1], 3), ATTNGEN_OK);       // item 1 holds 3 of 4
    EXPECT_EQ(Append(2, items, 2), ATTNGEN_ERROR_SHAPE);  // item 0 would fit, item 1 not
    EXPECT_NE(std::strstr(attngen_last_error(), "max_len"), nullptr) << attngen_last_error();
    EXPECT_EQ(Lengths(), (std::vector<int32_t>{0, 3}));
    // The cache's contents are unchanged too: a forward gives what it gave before.
    std::vector<float> before, after;
    ASSERT_EQ(Forward(1, &items[1], 1, ATTNGEN_CAUSAL_NONE, &before), ATTNGEN_OK);
    EXPECT_EQ(Append(1, &items[1], 5), ATTNGEN_ERROR_SHAPE);
    ASSERT_EQ(Forward(1, &items[1], 1, ATTNGEN_CAUSAL_NONE, &after), ATTNGEN_OK);
    EXPECT_EQ(before, after);
}

TEST_F(DecodeErrors, ACacheOfAnotherHandle) {
    DecodeModel other(Model(16, 4).num_kv_heads(2));
    EXPECT_EQ(
        attngen_kv_cache_append(other.handle(), cache_.get(), 1, nullptr, 1, x_.data(), x_.data()),
        ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(attngen_last_error(), "another handle"), nullptr);
    std::vector<float> out(16, kSentinel);
    EXPECT_EQ(attngen_mha_forward_cached(other.handle(), cache_.get(), 1, nullptr, 1, x_.data(),
                                         ATTNGEN_CAUSAL_NONE, out.data()),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(Untouched(out));
}

TEST_F(DecodeErrors, TopLeftCausalAndNonFiniteInputsAreRefused) {
    std::vector<float> out;
    EXPECT_EQ(Forward(1, nullptr, 1, ATTNGEN_CAUSAL_TOP_LEFT, &out),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    x_[3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(Append(1, nullptr, 1), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(Forward(1, nullptr, 1, ATTNGEN_CAUSAL_NONE, &out), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(Untouched(out));
    EXPECT_EQ(Lengths(), (std::vector<int32_t>{0, 0}));
}

TEST_F(DecodeErrors, NullsAndBadCreateArguments) {
    attngen_kv_cache *c = nullptr;
    EXPECT_EQ(attngen_kv_cache_create(nullptr, 1, 1, &c), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_kv_cache_create(model_.handle(), 0, 1, &c), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_kv_cache_create(model_.handle(), 1, -1, &c), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_kv_cache_create(model_.handle(), 1 << 20, 1 << 20, &c), ATTNGEN_ERROR_SHAPE);
    EXPECT_EQ(c, nullptr);
    EXPECT_EQ(attngen_kv_cache_reset(cache_.get(), 2), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_kv_cache_reset(nullptr, 0), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_kv_cache_lengths(cache_.get(), nullptr), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(
        attngen_kv_cache_append(model_.handle(), cache_.get(), 1, nullptr, 1, nullptr, x_.data()),
        ATTNGEN_ERROR_INVALID_ARGUMENT);
    attngen_kv_cache_destroy(nullptr);  // fine
}

}  // namespace
}  // namespace attngen_test
