// Decoding cases written once, run by the CPU suite (test_decode.cpp) and the GPU suite
// (test_device_decode.cpp): each takes a tester of the device and precision to run on and sets
// the model's shape itself.
#ifndef ATTNGEN_TESTS_DECODE_CASES_H
#define ATTNGEN_TESTS_DECODE_CASES_H

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "decode_tester.h"
#include "layout.h"

namespace attngen_test {

// Token rows t0.. of a sequence.
inline const float *TokenRows(const std::vector<float> &tokens, int t0, int d_model) {
    return tokens.data() + size_t(t0) * d_model;
}

// base with a model shape of d_model features and `heads` query heads.
inline MhaTester Shaped(MhaTester base, int d_model, int heads) {
    base.d_model(d_model).num_heads(heads);
    return base;
}

inline void CheckStepByStepEqualsCausalAttention(const MhaTester &base) {
    DecodeAndCheck(Shaped(base, 32, 4), 12, 0, 16);
}

inline void CheckGroupedQueryAndMultiQuery(const MhaTester &base) {
    DecodeAndCheck(Shaped(base, 32, 8).num_kv_heads(2), 10, 0, 10);  // 4 query heads per KV head
    DecodeAndCheck(Shaped(base, 32, 4).num_kv_heads(1), 9, 0, 9);    // MQA
}

inline void CheckRotaryPositionsBothLayoutsAndPartial(const MhaTester &base) {
    DecodeAndCheck(Shaped(base, 32, 4).rope(ATTNGEN_ROPE_HALF), 9, 0, 9);
    DecodeAndCheck(Shaped(base, 32, 4).rope(ATTNGEN_ROPE_INTERLEAVED), 9, 0, 9);
    DecodeAndCheck(Shaped(base, 32, 2).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF, 6, 500000.0f), 7, 0,
                   8);
}

inline void CheckValueHeadSizeOfItsOwn(const MhaTester &base) {
    DecodeAndCheck(Shaped(base, 24, 4).num_kv_heads(2).v_head_dim(5), 8, 0, 8);
    DecodeAndCheck(Shaped(base, 24, 4).v_head_dim(11).rope(ATTNGEN_ROPE_INTERLEAVED), 6, 0, 6);
}

inline void CheckPromptThenSteps(const MhaTester &base) {
    DecodeAndCheck(Shaped(base, 32, 4).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF), 14, 9, 20);
}

// On CPUs a call of kCacheFlashMinQueries queries or more per item runs the flash kernel, and
// fewer the split-KV kernel: prompts on either side of the switch, a prompt that falls across
// the flash kernel's key blocks with odd head sizes, and a long chunk appended after a short
// one (its causal mask ends at the item's length, past its own first query).
inline void CheckPromptsAroundTheFlashSwitch(const MhaTester &base) {
    const int many = attngen::kCacheFlashMinQueries;
    const MhaTester grouped = Shaped(base, 32, 4).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
    DecodeAndCheck(grouped, many + 2, many - 1, many + 2);
    DecodeAndCheck(grouped, many + 2, many, many + 2);
    DecodeAndCheck(Shaped(base, 24, 4).num_kv_heads(1).v_head_dim(5).rope(ATTNGEN_ROPE_INTERLEAVED),
                   2 * many + 7, 2 * many + 5, 2 * many + 9);
    DecodeChunksAndCheck(grouped, many + 14, {10, many + 1}, many + 16);
}

// Against a long cache the flash kernel takes one query per kCacheFlashKeysPerQuery cached
// positions as well: after 8500 tokens, a call of 65 queries (8565 positions: 66 needed) runs
// the split-KV kernel, and then one of 67 (8632 positions: 67 needed) the flash kernel. Each
// call is checked against its own rows of causal self-attention only (the whole sequence's
// reference held 11 GB).
inline void CheckLongCacheCallsAroundTheFlashSwitch(const MhaTester &base) {
    const int prompt = 8500, below = 65, at = 67, len = prompt + below + at;
    ASSERT_LT(below, (prompt + below) / attngen::kCacheFlashKeysPerQuery);
    ASSERT_GE(at, len / attngen::kCacheFlashKeysPerQuery);
    ASSERT_GE(below, attngen::kCacheFlashMinQueries);
    DecodeModel model(Shaped(base, 16, 4).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF));
    const int d = model.d_model();
    const std::vector<float> tokens = model.Tokens(len, 41);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 1, len, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, prompt,
                                      tokens.data(), tokens.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    int t = prompt;
    for (int rows : {below, at}) {
        SCOPED_TRACE(std::to_string(rows) + " queries after " + std::to_string(t) + " positions");
        const float *x = TokenRows(tokens, t, d);
        ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, rows, x, x),
                  ATTNGEN_OK)
            << attngen_last_error();
        std::vector<float> out(size_t(rows) * d, kSentinel);
        ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 1, nullptr, rows, x,
                                             ATTNGEN_CAUSAL_BOTTOM_RIGHT, out.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        t += rows;
        const std::vector<float> seen(tokens.begin(), tokens.begin() + ptrdiff_t(t) * d);
        model.Check("long-cache call", out.data(), rows, model.LastRowsOfSelfAttention(seen, rows),
                    0);
    }
}

// Two items that started at different times (prompts of prompt_a and prompt_b tokens),
// decoded in one call with items {1, 0}.
// Four steps of one token per item, then one of three by default: with several queries, the
// causal mask ends at each item's own length.
inline void CheckItemsAtDifferentLengthsInOneCall(MhaTester tester, int prompt_a = 5,
                                                  int prompt_b = 2,
                                                  const std::vector<int> &calls = {1, 1, 1, 1, 3}) {
    tester.d_model(32).num_heads(8).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
    DecodeModel model(tester);
    const int d = model.d_model();
    int steps = 0;  // tokens after the prompts, per item
    for (int rows : calls) steps += rows;
    const std::vector<float> a = model.Tokens(prompt_a + steps, 21);
    const std::vector<float> b = model.Tokens(prompt_b + steps, 22);
    const DecodeModel::Expected want_a = model.SelfAttention(a), want_b = model.SelfAttention(b);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(
        attngen_kv_cache_create(model.handle(), 3, std::max(prompt_a, prompt_b) + steps, &raw),
        ATTNGEN_OK);
    CacheHandle cache(raw);
    const int32_t item_a = 1, item_b = 0;
    ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, &item_a, prompt_a, a.data(),
                                      a.data()),
              ATTNGEN_OK);
    ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, &item_b, prompt_b, b.data(),
                                      b.data()),
              ATTNGEN_OK);
    int ta = prompt_a, tb = prompt_b;
    for (int rows : calls) {
        const size_t block = size_t(rows) * d;
        std::vector<float> x(2 * block), out(2 * block, kSentinel);
        std::memcpy(&x[0], TokenRows(a, ta, d), block * sizeof(float));
        std::memcpy(&x[block], TokenRows(b, tb, d), block * sizeof(float));
        const int32_t items[2] = {item_a, item_b};
        ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 2, items, rows, x.data(),
                                          x.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 2, items, rows, x.data(),
                                             ATTNGEN_CAUSAL_BOTTOM_RIGHT, out.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        model.Check("item a", &out[0], rows, want_a, ta);
        model.Check("item b", &out[block], rows, want_b, tb);
        ta += rows;
        tb += rows;
    }
    int32_t lengths[3];
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], prompt_b + steps);
    EXPECT_EQ(lengths[1], prompt_a + steps);
    EXPECT_EQ(lengths[2], 0);
}

// Nothing visible: attention contributes 0 and the output is the output projection's bias.
inline void CheckAnEmptyItemGivesTheOutputBias(MhaTester tester, int q_len = 3) {
    tester.d_model(16).num_heads(2);
    DecodeModel model(tester);
    const int d = model.d_model();
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 2, 4, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    const std::vector<float> x = model.Tokens(q_len, 5);
    std::vector<float> out(size_t(q_len) * d, kSentinel);
    const int32_t item = 1;
    ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 1, &item, q_len, x.data(),
                                         ATTNGEN_CAUSAL_NONE, out.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    for (int r = 0; r < q_len; ++r)
        for (int o = 0; o < d; ++o) EXPECT_EQ(out[r * d + o], model.model().bo[o]) << r << " " << o;
}

inline void CheckResetEmptiesAnItemAndItDecodesAgain(MhaTester tester) {
    tester.d_model(16).num_heads(4).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
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
// The memory appended once, then attended to by calls of `per_call` queries, without a causal
// mask.
inline void CheckCrossAttentionAppendsTheMemoryOnce(MhaTester tester, int per_call = 1,
                                                    int calls = 4, int memory_len = 11) {
    tester.d_model(32).num_heads(4).num_kv_heads(2);
    DecodeModel model(tester);
    const int d = model.d_model();
    const std::vector<float> memory = model.Tokens(memory_len, 31),
                             queries = model.Tokens(per_call * calls, 32);
    const DecodeModel::Expected want = model.CrossAttention(queries, memory);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 1, memory_len, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 1, nullptr, memory_len,
                                      memory.data(), memory.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    for (int call = 0; call < calls; ++call) {
        std::vector<float> out(size_t(per_call) * d, kSentinel);
        const int first = call * per_call;
        ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 1, nullptr, per_call,
                                             TokenRows(queries, first, d), ATTNGEN_CAUSAL_NONE,
                                             out.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        model.Check("cross-attention call", out.data(), per_call, want, first);
    }
}

// A handle of d_model 8, 2 heads and no bias on `device` in `precision`, with w (64 floats) as
// each of its four weights.
inline MhaHandle SmallHandle(attngen_device device, attngen_precision precision,
                             const std::vector<float> &w) {
    attngen_mha_config c{};
    c.d_model = 8;
    c.num_heads = 2;
    c.device = device;
    c.precision = precision;
    attngen_mha *raw = nullptr;
    EXPECT_EQ(attngen_mha_create(&c, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    if (m) {
        EXPECT_EQ(attngen_mha_set_weights(m.get(), w.data(), w.data(), w.data(), w.data(), nullptr,
                                          nullptr, nullptr, nullptr),
                  ATTNGEN_OK)
            << attngen_last_error();
    }
    return m;
}

// A float16 cache on `device` refuses an append whose projected keys pass 65504: nothing is
// appended to any item, and the cache stays usable.
inline void CheckFloat16CacheRefusesKeysBeyondItsRange(attngen_device device) {
    MhaHandle m = SmallHandle(device, ATTNGEN_PRECISION_F16, std::vector<float>(64, 0.5f));
    ASSERT_NE(m, nullptr);
    attngen_kv_cache *cache_raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(m.get(), 2, 4, &cache_raw), ATTNGEN_OK)
        << attngen_last_error();
    CacheHandle cache(cache_raw);
    // Item 0 fine, item 1's projected keys 8 x 0.5 x 20000 = 80000: past float16's 65504.
    std::vector<float> x(16, 1.0f);
    for (int i = 8; i < 16; ++i) x[i] = 20000.0f;
    EXPECT_EQ(attngen_kv_cache_append(m.get(), cache.get(), 2, nullptr, 1, x.data(), x.data()),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(attngen_last_error(), "float16"), nullptr) << attngen_last_error();
    int32_t lengths[2] = {-1, -1};
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], 0);
    EXPECT_EQ(lengths[1], 0);
    // The cache stays usable: item 0, appended now, attends to its one row only, whose value
    // row is 8 x 0.5 x 1 = 4 per feature, so every output is 8 x 0.5 x 4 = 16, exactly.
    ASSERT_EQ(attngen_kv_cache_append(m.get(), cache.get(), 1, nullptr, 1, x.data(), x.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], 1);
    std::vector<float> out(8, kSentinel);
    ASSERT_EQ(attngen_mha_forward_cached(m.get(), cache.get(), 1, nullptr, 1, x.data(),
                                         ATTNGEN_CAUSAL_BOTTOM_RIGHT, out.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    for (float v : out) EXPECT_EQ(v, 16.0f);
}

// Finite inputs whose projection is not finite (3e38 x 8 features x 0.5 passes float32's
// range; float16's at once) are refused in every precision, and the refused rows reach no
// item: the short item's next positions lie inside the keys a call with a longer item reads
// (as masked keys, weighted 0, where an infinity would make NaN), and its outputs stay the same
// bit for bit.
inline void CheckRefusedAppendChangesNothing(attngen_device device, attngen_precision precision) {
    MhaHandle m = SmallHandle(device, precision, std::vector<float>(64, 0.5f));
    ASSERT_NE(m, nullptr);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(m.get(), 2, 8, &raw), ATTNGEN_OK) << attngen_last_error();
    CacheHandle cache(raw);
    std::vector<float> x(6 * 8);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) / 4;
    const int32_t long_item = 0, short_item = 1, both[2] = {0, 1};
    ASSERT_EQ(attngen_kv_cache_append(m.get(), cache.get(), 1, &long_item, 6, x.data(), x.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    ASSERT_EQ(attngen_kv_cache_append(m.get(), cache.get(), 1, &short_item, 2, x.data(), x.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    const auto forward = [&](std::vector<float> *out) {
        out->assign(2 * 8, kSentinel);
        return attngen_mha_forward_cached(m.get(), cache.get(), 2, both, 1, x.data(),
                                          ATTNGEN_CAUSAL_NONE, out->data());
    };
    std::vector<float> before, after;
    ASSERT_EQ(forward(&before), ATTNGEN_OK) << attngen_last_error();
    // Row 0 (the long item) is fine; row 1 overflows.
    std::vector<float> rows(2 * 8, 0.25f);
    for (int f = 8; f < 16; ++f) rows[size_t(f)] = 3e38f;
    EXPECT_EQ(attngen_kv_cache_append(m.get(), cache.get(), 2, both, 1, rows.data(), rows.data()),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(attngen_last_error(), "nothing was appended"), nullptr)
        << attngen_last_error();
    int32_t lengths[2] = {-1, -1};
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], 6);
    EXPECT_EQ(lengths[1], 2);
    ASSERT_EQ(forward(&after), ATTNGEN_OK) << attngen_last_error();
    EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
}

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_DECODE_CASES_H
