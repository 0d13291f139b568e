// Decoding with a KV cache: attngen_kv_cache_* and attngen_mha_forward_cached against the
// float64 reference of attention over the whole sequence, for MHA, GQA, MQA, rotary positions
// in both layouts, partial rotary and a value head size of its own; prompts, items at
// different lengths, empty items, reset, cross-attention, and every refusal.
#include "decode_cases.h"
#include "decode_tester.h"
#include "layout.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>
#include <attngen/attngen.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace attngen_test {
namespace {

MhaTester Model(int d_model, int heads) {
    MhaTester t;
    t.d_model(d_model).num_heads(heads);
    return t;
}

TEST(Decode, StepByStepEqualsCausalAttentionOverTheSequence) {
    CheckStepByStepEqualsCausalAttention(MhaTester());
}

TEST(Decode, GroupedQueryAndMultiQuery) {
    CheckGroupedQueryAndMultiQuery(MhaTester());
}

TEST(Decode, RotaryPositionsBothLayoutsAndPartial) {
    CheckRotaryPositionsBothLayoutsAndPartial(MhaTester());
}

TEST(Decode, ValueHeadSizeOfItsOwn) {
    CheckValueHeadSizeOfItsOwn(MhaTester());
}

TEST(Decode, PromptThenSteps) {
    CheckPromptThenSteps(MhaTester());
}

// Projections of up to 8 rows split their reduction over input features into parallel tasks
// of one weight panel each (schedule_cpu_projection.cpp, schedule_split_reduction): 130 features
// over 3 panels of outputs make ranges of 24 features with a last one of 10, and the output
// projection's ranges take whole heads. Their register tiles are 4 rows (2 on 16-register
// targets), from calls of as many rows, the last tile shifted in: prompts of 1 to 5 rows fall
// on either side of the tile, 7, 8 and 9 on either side of the split's row limit.
TEST(Decode, PromptsAroundTheSplitReductionsRowLimit) {
    for (int prompt : {1, 2, 3, 4, 5, 7, 8, 9}) {
        DecodeAndCheck(Model(130, 2).num_kv_heads(1), prompt + 2, prompt, prompt + 2);
        DecodeAndCheck(Model(130, 5).rope(ATTNGEN_ROPE_HALF), prompt + 2, prompt, prompt + 2);
    }
}

// A prompt's keys are written to the cache in tiles of a vector's positions by a vector's
// features, transposed from the rotated keys (schedule_cache_key_rows_cpu); fewer positions
// than a vector are stored along the features. Vectors are 16 floats on AVX-512, 8 on AVX2
// and 4 on SSE4.1 and NEON: head sizes and prompts on either side of each, both rotary
// layouts, partial rotation and none, in every precision, then single steps.
TEST(Decode, PromptKeysInTilesAroundTheVectorWidth) {
    for (attngen_precision p :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        SCOPED_TRACE(p);
        for (int prompt : {3, 4, 5, 7, 8, 9, 15, 16, 17}) {
            SCOPED_TRACE(prompt);
            const int len = prompt + 2;
            DecodeAndCheck(Model(32, 2).rope(ATTNGEN_ROPE_INTERLEAVED).precision(p), len, prompt,
                           len);
            DecodeAndCheck(Model(34, 2).rope(ATTNGEN_ROPE_HALF, 16).precision(p), len, prompt, len);
            DecodeAndCheck(Model(18, 2).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF, 8).precision(p),
                           len, prompt, len);
            DecodeAndCheck(Model(10, 2).rope(ATTNGEN_ROPE_INTERLEAVED, 4).precision(p), len, prompt,
                           len);
        }
        DecodeAndCheck(Model(66, 2).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF, 32).precision(p), 42,
                       40, 42);
        DecodeAndCheck(Model(128, 4).num_kv_heads(2).rope(ATTNGEN_ROPE_INTERLEAVED).precision(p),
                       35, 33, 35);
        DecodeAndCheck(Model(30, 2).precision(p), 35, 33, 35);  // no rotation, 15-wide heads
    }
}

// Two items appended in one call of 20 positions each: the key tiles' tasks are (kv head,
// item) pairs.
TEST(Decode, PromptsOfTwoItemsInOneAppend) {
    DecodeModel model(Model(34, 2).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF, 16));
    const int d = model.d_model(), len = 20;
    const std::vector<float> first = model.Tokens(len, 31), second = model.Tokens(len, 32);
    std::vector<float> both(first);
    both.insert(both.end(), second.begin(), second.end());
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 2, len, &raw), ATTNGEN_OK);
    CacheHandle cache(raw);
    ASSERT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 2, nullptr, len, both.data(),
                                      both.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    std::vector<float> out(size_t(2) * len * d, kSentinel);
    ASSERT_EQ(attngen_mha_forward_cached(model.handle(), cache.get(), 2, nullptr, len, both.data(),
                                         ATTNGEN_CAUSAL_BOTTOM_RIGHT, out.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    model.Check("item 0", out.data(), len, model.SelfAttention(first), 0);
    model.Check("item 1", out.data() + size_t(len) * d, len, model.SelfAttention(second), 0);
}

// A split-reduction task reads at most 128 KiB of its panel's weights (kSplitReductionRunBytes:
// 512 float32 features, 512 bfloat16 pairs, 1024 float16 features): 1040 features over 17
// panels of outputs make 3 ranges in float32, the last one shorter, and 2 in the 16-bit formats.
TEST(Decode, ProjectionsWideEnoughToBoundATasksRun) {
    for (attngen_precision p :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        SCOPED_TRACE(p);
        DecodeAndCheck(Model(1040, 8).num_kv_heads(2).precision(p), 7, 5, 7);
    }
}

// The decode kernel's probs x values tiles are up to 64 value features wide for heads of up to
// 64 and up to 128 for wider heads (schedule_cpu_decode.cpp, 32-register variants), with tiles of
// their own for a single query row, and the cache keeps values in panels of 32 features (layout.h,
// kCacheValuePanel), the last one padded: head sizes at either side of both widths and of one
// panel, with two query rows per key/value head (grouped) and with one (single-token steps of
// multi-head attention).
TEST(Decode, ValueHeadSizesAtTheValueTileEdges) {
    for (int dv : {31, 32, 33, 63, 64, 65, 128, 129}) {
        DecodeAndCheck(Model(32, 2).num_kv_heads(1).v_head_dim(dv), 5, 3, 5);
        DecodeAndCheck(Model(32, 2).v_head_dim(dv), 5, 3, 5);
    }
}

// A cache longer than one split of the decode kernel (at most decode_split_keys keys: 256 by
// default, 512 in the x86 tuned file): splits merged by their log-sum-exp, the keys shared out
// evenly among them (define_decode_attention). With 256: steps from 512 keys (two whole splits)
// to 516 (three of 176), and over 596-600 keys (three of 208); with 512: from 1024 (two whole
// splits) to 1028 (three of 352), and 516 and 600 keys in two splits.
TEST(Decode, LongCacheAcrossSplits) {
    DecodeAndCheck(Model(16, 4).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF), 600, 595, 600);
    DecodeAndCheck(Model(16, 4), 516, 511, 516);
    DecodeAndCheck(Model(16, 4).num_kv_heads(2), 1028, 1023, 1028);
}

TEST(Decode, ItemsAtDifferentLengthsInOneCall) {
    CheckItemsAtDifferentLengthsInOneCall(MhaTester());
}

TEST(Decode, PromptsAroundTheFlashSwitch) {
    CheckPromptsAroundTheFlashSwitch(MhaTester());
}

TEST(Decode, LongCacheCallsAroundTheFlashSwitch) {
#ifdef ATTNGEN_TEST_EMULATED
    GTEST_SKIP() << "a cache of 8632 positions checked against float64 takes minutes under an "
                    "emulator";
#endif
    CheckLongCacheCallsAroundTheFlashSwitch(MhaTester());
}

// A call of many queries per item (the flash kernel on CPUs) over items of different lengths.
TEST(Decode, ItemsAtDifferentLengthsInOneLongCall) {
    CheckItemsAtDifferentLengthsInOneCall(MhaTester(), 5, 2,
                                          {1, attngen::kCacheFlashMinQueries + 1});
}

TEST(Decode, AnEmptyItemGivesTheOutputBiasToManyQueries) {
    CheckAnEmptyItemGivesTheOutputBias(MhaTester(), attngen::kCacheFlashMinQueries);
}

TEST(Decode, CrossAttentionWithManyQueriesPerCall) {
    CheckCrossAttentionAppendsTheMemoryOnce(MhaTester(), attngen::kCacheFlashMinQueries + 3, 2);
}

TEST(Decode, AnEmptyItemGivesTheOutputBias) {
    CheckAnEmptyItemGivesTheOutputBias(MhaTester());
}

TEST(Decode, ResetEmptiesAnItemAndItDecodesAgain) {
    CheckResetEmptiesAnItemAndItDecodesAgain(MhaTester());
}

TEST(Decode, CrossAttentionAppendsTheMemoryOnce) {
    CheckCrossAttentionAppendsTheMemoryOnce(MhaTester());
}

TEST(Decode, RefusedAppendChangesNothingInEveryPrecision) {
    for (attngen_precision p :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        SCOPED_TRACE("precision " + std::to_string(int(p)));
        CheckRefusedAppendChangesNothing(ATTNGEN_DEVICE_CPU, p);
    }
}

// The C++ layer's model of the decode tests: d_model 16, 4 query heads over 2 KV heads, its
// weights those of the MhaTester the decode model is built from.
attngen::MhaConfig CppDecodeConfig(attngen_rope rope) {
    attngen::MhaConfig config;
    config.d_model = 16;
    config.num_heads = 4;
    config.num_kv_heads = 2;
    config.rope = rope;
    return config;
}

void SetCppDecodeWeights(attngen::MultiHeadAttention &mha, const MhaTester &tester) {
    const MhaTester::Model m = tester.MakeModel();
    mha.set_weights({m.wq.data(), {16, 16}}, {m.wk.data(), {8, 16}}, {m.wv.data(), {8, 16}},
                    {m.wo.data(), {16, 16}}, {m.bq.data(), {16}}, {m.bk.data(), {8}},
                    {m.bv.data(), {8}}, {m.bo.data(), {16}});
}

// Decodes the 3 tokens of seq one at a time through cache, checking each step's output.
void DecodeCppSteps(attngen::KvCache &cache, const DecodeModel &model,
                    const std::vector<float> &seq, const char *what) {
    const DecodeModel::Expected want = model.SelfAttention(seq);
    std::vector<float> out(16);
    for (int t = 0; t < 3; ++t) {
        cache.append({TokenRows(seq, t, 16), {1, 1, 16}}, {TokenRows(seq, t, 16), {1, 1, 16}});
        cache.forward({TokenRows(seq, t, 16), {1, 1, 16}}, {out.data(), {1, 1, 16}});
        model.Check(what, out.data(), 1, want, t);
    }
    EXPECT_EQ(cache.lengths(), std::vector<int32_t>{3});
}

// The C++ layer: the same decode through attngen::KvCache.
TEST(Decode, CppKvCache) {
    attngen::MultiHeadAttention mha(CppDecodeConfig(ATTNGEN_ROPE_HALF));
    const MhaTester tester = Model(16, 4).num_kv_heads(2).rope(ATTNGEN_ROPE_HALF);
    SetCppDecodeWeights(mha, tester);
    DecodeModel model(tester);
    const std::vector<float> seq = model.Tokens(3, 9);
    attngen::KvCache cache(mha, 1, 4);
    DecodeCppSteps(cache, model, seq, "C++ step");
    EXPECT_THROW(cache.append({seq.data(), {1, 2, 16}}, {seq.data(), {1, 2, 16}}),
                 attngen::Error);  // past max_len
}

// A KvCache holds the handle, which moves with its MultiHeadAttention: moving the module (a
// vector of layers that grows) leaves the cache working, and a cache moves by assignment too.
TEST(Decode, CppKvCacheSurvivesMoves) {
    std::vector<attngen::MultiHeadAttention> layers;
    layers.emplace_back(CppDecodeConfig(ATTNGEN_ROPE_NONE));
    const MhaTester tester = Model(16, 4).num_kv_heads(2);
    SetCppDecodeWeights(layers[0], tester);
    DecodeModel model(tester);
    attngen::KvCache first(layers[0], 1, 4);
    for (int grow = 0; grow < 8; ++grow) {
        layers.emplace_back(CppDecodeConfig(ATTNGEN_ROPE_NONE));  // reallocates
    }
    attngen::KvCache cache(layers[1], 1, 2);
    cache = std::move(first);
    EXPECT_EQ(first.handle(), nullptr);  // NOLINT(bugprone-use-after-move): checking the move
    DecodeCppSteps(cache, model, model.Tokens(3, 11), "C++ step after moves");
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
            const float *x = TokenRows(seq, t, d);
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

// attngen.h makes the handle outlive its caches; a handle created after the owner was destroyed
// may get its address, and is still another handle (it had been taken as the owner: an append
// dropped features, a forward failed inside its kernel with a bounds error).
TEST(DecodeHandles, ACacheOfADestroyedHandleRefusesOneAtItsAddress) {
    const MhaTester tester = Model(16, 4).num_kv_heads(2);
    const attngen_mha_config config = tester.config();
    const MhaTester::Model model = tester.MakeModel();
    attngen_mha *first = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &first), ATTNGEN_OK) << attngen_last_error();
    ASSERT_EQ(model.SetWeights(first), ATTNGEN_OK) << attngen_last_error();
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(first, 1, 4, &raw), ATTNGEN_OK) << attngen_last_error();
    CacheHandle cache(raw);
    attngen_mha_destroy(first);
    // The allocator hands a freed block of the same size back; a few tries make it likely.
    std::vector<MhaHandle> others;
    attngen_mha *same_address = nullptr;
    for (int i = 0; i < 8 && same_address == nullptr; ++i) {
        attngen_mha *m = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &m), ATTNGEN_OK) << attngen_last_error();
        others.emplace_back(m);
        if (m == first) same_address = m;
    }
    if (same_address == nullptr) GTEST_SKIP() << "no new handle reused the address";
    ASSERT_EQ(model.SetWeights(same_address), ATTNGEN_OK) << attngen_last_error();
    const std::vector<float> x(16, 0.5f);
    EXPECT_EQ(attngen_kv_cache_append(same_address, cache.get(), 1, nullptr, 1, x.data(), x.data()),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(attngen_last_error(), "destroyed since"), nullptr)
        << attngen_last_error();
}

TEST_F(DecodeErrors, TopLeftCausalAndNonFiniteInputsAreRefused) {
    std::vector<float> out;
    EXPECT_EQ(Forward(1, nullptr, 1, ATTNGEN_CAUSAL_TOP_LEFT, &out),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    x_[3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(Append(1, nullptr, 1), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(attngen_last_error(), "key holds a non-finite value at element 3"),
              nullptr)
        << attngen_last_error();
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
    EXPECT_EQ(attngen_kv_cache_create(model_.handle(), 1, INT32_MAX, &c), ATTNGEN_ERROR_SHAPE);
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
