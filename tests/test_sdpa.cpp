// attngen_sdpa: shapes around tile boundaries, every mask part alone and combined, extreme
// logits, custom scales and the weights output, each against the float64 reference.
#include "reference.h"
#include "sdpa_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>
#include <attngen/attngen.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace attngen_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Sizes around the vector widths and tiles a schedule is likely to use (4, 8, 16, 32, 64):
// 1, primes, and each power of two with its neighbours.
const std::vector<int> kEdgeSizes = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65};

// ---------------------------------------------------------------------------------------------
// Shapes

class SdpaDkByKvLen : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SdpaDkByKvLen, MatchesReference) {
    const auto [dk, kv_len] = GetParam();
    SdpaTester t;
    t.batch(1).heads(2).q_len(5).kv_len(kv_len).dk(dk).dv(3);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, SdpaDkByKvLen,
                         ::testing::Combine(::testing::ValuesIn(kEdgeSizes),
                                            ::testing::ValuesIn(kEdgeSizes)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
                             return "dk" + std::to_string(std::get<0>(info.param)) + "_kv" +
                                    std::to_string(std::get<1>(info.param));
                         });

class SdpaDvByQLen : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SdpaDvByQLen, MatchesReference) {
    const auto [dv, q_len] = GetParam();
    SdpaTester t;
    t.batch(2).heads(1).q_len(q_len).kv_len(9).dk(8).dv(dv);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, SdpaDvByQLen,
                         ::testing::Combine(::testing::ValuesIn(kEdgeSizes),
                                            ::testing::Values(1, 2, 7, 8, 9, 17, 33, 65)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
                             return "dv" + std::to_string(std::get<0>(info.param)) + "_q" +
                                    std::to_string(std::get<1>(info.param));
                         });

TEST(SdpaShapes, EverythingOne) {
    SdpaTester().Test();
}

TEST(SdpaShapes, SingleQueryOverLongKv) {  // one decoding step against a long cache
    SdpaTester().batch(2).heads(4).q_len(1).kv_len(1000).dk(64).dv(64).with_weights(true).Test();
}

TEST(SdpaShapes, ManyQueriesOverOneKey) {  // every row's softmax is exactly 1
    SdpaTester().batch(2).heads(3).q_len(40).kv_len(1).dk(16).dv(16).Test();
}

TEST(SdpaShapes, QLenLongerThanKvLen) {
    SdpaTester().batch(2).heads(2).q_len(37).kv_len(11).dk(16).dv(8).Test();
}

TEST(SdpaShapes, KvLenLongerThanQLen) {
    SdpaTester().batch(2).heads(2).q_len(11).kv_len(37).dk(16).dv(8).Test();
}

TEST(SdpaShapes, DkDiffersFromDv) {
    SdpaTester().batch(1).heads(3).q_len(6).kv_len(10).dk(24).dv(5).Test();
    SdpaTester().batch(1).heads(3).q_len(6).kv_len(10).dk(5).dv(24).Test();
}

// Long enough that a kernel blocking over queries and keys runs several blocks of each.
TEST(SdpaShapes, LongSequencesWithoutWeights) {
    SdpaTester().batch(1).heads(2).q_len(130).kv_len(257).dk(64).dv(64).with_weights(false).Test();
}

TEST(SdpaShapes, LongSequencesWithWeights) {
    SdpaTester().batch(1).heads(2).q_len(130).kv_len(257).dk(64).dv(64).with_weights(true).Test();
}

TEST(SdpaShapes, ManyBatchesAndHeads) {
    SdpaTester().batch(5).heads(7).q_len(3).kv_len(4).dk(8).dv(8).Test();
}

// ---------------------------------------------------------------------------------------------
// Every mask part alone and in every combination, with q_len shorter, longer and equal to
// kv_len, with and without the weights output.

struct MaskCase {
    attngen_causal causal;
    bool kv_lengths;
    int bool_mask_batch;  // 0 none, 1 broadcast, 3 = batch
    int additive_batch;   // 0 none, 1 or 3
    int additive_heads;   // 1 or 2
    int q_len, kv_len;
};

std::string MaskCaseName(const MaskCase &c) {
    static const char *causal[] = {"NoCausal", "TopLeft", "BottomRight"};
    std::string n = causal[c.causal];
    if (c.kv_lengths) n += "_KvLengths";
    if (c.bool_mask_batch) n += "_Bool" + std::to_string(c.bool_mask_batch);
    if (c.additive_batch) {
        n += "_Add" + std::to_string(c.additive_batch) + "x" + std::to_string(c.additive_heads);
    }
    return n + "_q" + std::to_string(c.q_len) + "_kv" + std::to_string(c.kv_len);
}

std::vector<MaskCase> AllMaskCases() {
    std::vector<MaskCase> cases;
    const int additive[][2] = {{0, 0}, {1, 1}, {3, 1}, {1, 2}, {3, 2}};
    const int lens[][2] = {{5, 9}, {9, 5}, {6, 6}};
    for (attngen_causal causal :
         {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT})
        for (bool kv_lengths : {false, true})
            for (int bool_batch : {0, 1, 3})
                for (const auto &add : additive)
                    for (const auto &len : lens)
                        cases.push_back(
                            {causal, kv_lengths, bool_batch, add[0], add[1], len[0], len[1]});
    return cases;
}

class SdpaMaskCombination : public ::testing::TestWithParam<MaskCase> {};

TEST_P(SdpaMaskCombination, MatchesReference) {
    const MaskCase &c = GetParam();
    SdpaTester t;
    t.batch(3).heads(2).q_len(c.q_len).kv_len(c.kv_len).dk(7).dv(5).causal(c.causal);
    // Lengths 0 and kv_len are the edges; the middle one cuts through a causal band.
    if (c.kv_lengths) t.kv_lengths({c.kv_len, 0, c.kv_len / 2});
    if (c.bool_mask_batch) t.bool_mask(c.bool_mask_batch, 0.3);
    if (c.additive_batch) t.additive(c.additive_batch, c.additive_heads, 0.15);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

INSTANTIATE_TEST_SUITE_P(AllParts, SdpaMaskCombination, ::testing::ValuesIn(AllMaskCases()),
                         [](const ::testing::TestParamInfo<MaskCase> &info) {
                             return MaskCaseName(info.param);
                         });

// ---------------------------------------------------------------------------------------------
// Causal alignment

// Checks which weights a causal mask leaves: visible(i, j) says whether query i sees key j.
template <typename Visible>
void ExpectVisibility(const std::vector<float> &weights, int q_len, int kv_len, Visible visible) {
    for (int i = 0; i < q_len; ++i) {
        for (int j = 0; j < kv_len; ++j) {
            const float w = weights[size_t(i) * kv_len + j];
            if (visible(i, j)) {
                EXPECT_GT(w, 0.0f) << "query " << i << " should see key " << j;
            } else {
                EXPECT_EQ(w, 0.0f) << "query " << i << " should not see key " << j;
            }
        }
    }
}

// Small q and k so that no visible weight underflows to 0.
SdpaTester CausalTester(attngen_causal causal, int q_len, int kv_len) {
    SdpaTester t;
    t.q_len(q_len).kv_len(kv_len).dk(4).dv(3).causal(causal).qk_range(-0.5f, 0.5f);
    return t;
}

TEST(SdpaCausal, TopLeftHidesLaterKeys) {
    const SdpaTester t = CausalTester(ATTNGEN_CAUSAL_TOP_LEFT, 6, 6);
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    ExpectVisibility(r.weights, 6, 6, [](int i, int j) { return j <= i; });
}

TEST(SdpaCausal, TopLeftWithQShorterThanKvIgnoresTheExtraKeys) {
    const SdpaTester t = CausalTester(ATTNGEN_CAUSAL_TOP_LEFT, 3, 8);
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    ExpectVisibility(r.weights, 3, 8, [](int i, int j) { return j <= i; });
}

TEST(SdpaCausal, TopLeftWithQLongerThanKvLetsLateQueriesSeeAll) {
    const SdpaTester t = CausalTester(ATTNGEN_CAUSAL_TOP_LEFT, 8, 3);
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    ExpectVisibility(r.weights, 8, 3, [](int i, int j) { return j <= i; });
}

// The KV-cache case: the last query sees every key, earlier ones one key fewer each.
TEST(SdpaCausal, BottomRightWithQShorterThanKvAlignsToTheLastKey) {
    const SdpaTester t = CausalTester(ATTNGEN_CAUSAL_BOTTOM_RIGHT, 3, 8);
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    ExpectVisibility(r.weights, 3, 8, [](int i, int j) { return j <= i + 8 - 3; });
}

// Queries i < q_len - kv_len see no key at all: weights 0 and output 0, not NaN.
TEST(SdpaCausal, BottomRightWithQLongerThanKvFullyMasksLeadingRows) {
    const SdpaTester t = CausalTester(ATTNGEN_CAUSAL_BOTTOM_RIGHT, 7, 4);
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    ExpectVisibility(r.weights, 7, 4, [](int i, int j) { return j <= i + 4 - 7; });
    for (int i = 0; i < 3; ++i)
        for (int c = 0; c < 3; ++c) EXPECT_EQ(r.out[size_t(i) * 3 + c], 0.0f) << "row " << i;
}

TEST(SdpaCausal, BottomRightWithQLongerThanKvWithoutWeights) {
    SdpaTester t = CausalTester(ATTNGEN_CAUSAL_BOTTOM_RIGHT, 7, 4);
    t.with_weights(false).Test();
}

TEST(SdpaCausal, BothAlignmentsAgreeWhenSquare) {
    const SdpaTester::Run top = CausalTester(ATTNGEN_CAUSAL_TOP_LEFT, 9, 9).Execute();
    const SdpaTester::Run bottom = CausalTester(ATTNGEN_CAUSAL_BOTTOM_RIGHT, 9, 9).Execute();
    ASSERT_EQ(top.status, ATTNGEN_OK);
    ASSERT_EQ(bottom.status, ATTNGEN_OK);
    ExpectVisibility(top.weights, 9, 9, [](int i, int j) { return j <= i; });
    ExpectVisibility(bottom.weights, 9, 9, [](int i, int j) { return j <= i; });
}

TEST(SdpaCausal, CausalOverManyHeadsAndBatches) {
    SdpaTester()
        .batch(3)
        .heads(4)
        .q_len(17)
        .kv_len(33)
        .dk(8)
        .dv(8)
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .Test();
    SdpaTester()
        .batch(3)
        .heads(4)
        .q_len(33)
        .kv_len(17)
        .dk(8)
        .dv(8)
        .causal(ATTNGEN_CAUSAL_TOP_LEFT)
        .Test();
}

// ---------------------------------------------------------------------------------------------
// Key padding

TEST(SdpaKeyPadding, DifferentLengthPerBatchItem) {
    SdpaTester t;
    t.batch(5).heads(2).q_len(4).kv_len(9).dk(8).dv(6).kv_lengths({0, 1, 9, 4, 8});
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

TEST(SdpaKeyPadding, ZeroLengthGivesZeroOutput) {
    SdpaTester t;
    t.batch(2).heads(2).q_len(3).kv_len(5).dk(4).dv(4).kv_lengths({0, 5});
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    const size_t item = size_t(2) * 3 * 4;  // batch item 0: 2 heads of 3 rows of 4
    for (size_t i = 0; i < item; ++i) EXPECT_EQ(r.out[i], 0.0f) << "element " << i;
    for (size_t i = 0; i < size_t(2) * 3 * 5; ++i) EXPECT_EQ(r.weights[i], 0.0f) << i;
}

// Padding keys away must give what the unpadded shorter sequence gives: checked against the
// reference of the truncated problem, which never sees the padded keys.
TEST(SdpaKeyPadding, EqualsTheTruncatedSequence) {
    const int kv_len = 12, valid = 7, dk = 5, dv = 3, q_len = 4;
    SdpaTester padded;
    padded.q_len(q_len).kv_len(kv_len).dk(dk).dv(dv).kv_lengths({valid}).with_weights(true);
    const SdpaTester::Run r = padded.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();

    // With batch = heads = 1 the first `valid` keys and values are the leading rows.
    SdpaTester truncated;
    truncated.q_len(q_len).kv_len(valid).dk(dk).dv(dv).q_values(r.q);
    truncated.k_values({r.k.begin(), r.k.begin() + valid * dk});
    truncated.v_values({r.v.begin(), r.v.begin() + valid * dv});
    const SdpaTester::Expected e = truncated.Expectation(truncated.Prepare());

    std::vector<float> valid_weights;
    for (int i = 0; i < q_len; ++i) {
        for (int j = 0; j < kv_len; ++j) {
            const float w = r.weights[size_t(i) * kv_len + j];
            if (j < valid) {
                valid_weights.push_back(w);
            } else {
                EXPECT_EQ(w, 0.0f) << "padded key " << j << " of query " << i;
            }
        }
    }
    EXPECT_TRUE(AllClose("out", {q_len, dv}, e.ref.out, r.out.data(),
                         {e.bounds.out, kRelTol, "bounds of the truncated problem"}));
    EXPECT_TRUE(AllClose("weights", {q_len, valid}, e.ref.weights, valid_weights.data(),
                         {e.bounds.weights, kRelTol, "bounds of the truncated problem"}));
}

TEST(SdpaKeyPadding, CombinedWithBottomRightCausal) {
    // The causal band follows kv_len, not the valid length: a query may see no valid key.
    SdpaTester()
        .batch(3)
        .heads(2)
        .q_len(6)
        .kv_len(8)
        .dk(4)
        .dv(4)
        .kv_lengths({2, 8, 5})
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .Test();
}

// ---------------------------------------------------------------------------------------------
// Boolean mask

TEST(SdpaBoolMask, BroadcastOverBatch) {
    SdpaTester t;
    t.batch(4).heads(3).q_len(6).kv_len(10).dk(8).dv(4).bool_mask(1, 0.4);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

TEST(SdpaBoolMask, OnePerBatchItem) {
    SdpaTester t;
    t.batch(4).heads(3).q_len(6).kv_len(10).dk(8).dv(4).bool_mask(4, 0.4);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

// Nonzero means masked, whatever the value: 1, 2, 128 and 255 alike.
TEST(SdpaBoolMask, AnyNonzeroByteMasks) {
    const int q_len = 2, kv_len = 5;
    const std::vector<uint8_t> mask = {0,   1, 2, 128, 255,  //
                                       255, 0, 0, 7,   0};
    SdpaTester t;
    t.q_len(q_len).kv_len(kv_len).dk(3).dv(2).bool_mask_values(1, mask);
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    for (size_t e = 0; e < mask.size(); ++e) {
        if (mask[e]) {
            EXPECT_EQ(r.weights[e], 0.0f) << "mask byte " << int(mask[e]) << " at " << e;
        } else {
            EXPECT_GT(r.weights[e], 0.0f) << "unmasked key at " << e;
        }
    }
}

TEST(SdpaBoolMask, FullyMaskedRowGivesZeros) {
    const int q_len = 3, kv_len = 4;
    const std::vector<uint8_t> mask = {0, 1, 0, 1,  //
                                       1, 1, 1, 1,  // query 1 sees nothing
                                       0, 0, 0, 0};
    SdpaTester t;
    t.heads(2).q_len(q_len).kv_len(kv_len).dk(3).dv(2).bool_mask_values(1, mask);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

// The bool mask and an additive -inf at the same entries are the same mask.
TEST(SdpaBoolMask, EqualsNegativeInfinityAdditive) {
    const int batch = 2, heads = 2, q_len = 5, kv_len = 7;
    SdpaTester with_bool;
    with_bool.batch(batch).heads(heads).q_len(q_len).kv_len(kv_len).dk(6).dv(3).bool_mask(batch,
                                                                                          0.4);
    const SdpaTester::Run b = with_bool.Execute();
    ASSERT_EQ(b.status, ATTNGEN_OK) << attngen_last_error();

    std::vector<float> additive(size_t(batch) * q_len * kv_len);
    for (size_t e = 0; e < additive.size(); ++e) additive[e] = b.masks.bool_mask[e] ? -kInf : 0.0f;
    SdpaTester with_additive;
    with_additive.batch(batch).heads(heads).q_len(q_len).kv_len(kv_len).dk(6).dv(3);
    with_additive.q_values(b.q).k_values(b.k).v_values(b.v).additive_values(batch, 1, additive);
    with_additive.Test();
    const SdpaTester::Run a = with_additive.Execute();
    ASSERT_EQ(a.status, ATTNGEN_OK) << attngen_last_error();

    EXPECT_TRUE(with_additive.OutputsAgree(b, a));
}

// ---------------------------------------------------------------------------------------------
// Additive mask

TEST(SdpaAdditive, PerBatchAndHead) {
    SdpaTester().batch(3).heads(4).q_len(5).kv_len(9).dk(8).dv(8).additive(3, 4, 0.0).Test();
}

TEST(SdpaAdditive, BroadcastOverBatch) {
    SdpaTester().batch(3).heads(4).q_len(5).kv_len(9).dk(8).dv(8).additive(1, 4, 0.0).Test();
}

TEST(SdpaAdditive, BroadcastOverHeads) {
    SdpaTester().batch(3).heads(4).q_len(5).kv_len(9).dk(8).dv(8).additive(3, 1, 0.0).Test();
}

TEST(SdpaAdditive, BroadcastOverBatchAndHeads) {
    SdpaTester().batch(3).heads(4).q_len(5).kv_len(9).dk(8).dv(8).additive(1, 1, 0.0).Test();
}

TEST(SdpaAdditive, WithNegativeInfinityEntries) {
    SdpaTester t;
    t.batch(2).heads(3).q_len(7).kv_len(11).dk(8).dv(4).additive(2, 3, 0.4);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

TEST(SdpaAdditive, FullyNegativeInfinityRowGivesZeros) {
    const int q_len = 3, kv_len = 5;
    std::vector<float> additive = {0.5f,  -1,    0,     2,     -kInf,  //
                                   -kInf, -kInf, -kInf, -kInf, -kInf,  // query 1: nothing
                                   0,     0,     -kInf, 1,     0};
    SdpaTester t;
    t.heads(2).q_len(q_len).kv_len(kv_len).dk(4).dv(3).additive_values(1, 1, additive);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
    const SdpaTester::Run r = t.with_weights(true).Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    for (int h = 0; h < 2; ++h) {
        const size_t row = size_t(h) * q_len + 1;
        for (int c = 0; c < 3; ++c) EXPECT_EQ(r.out[row * 3 + c], 0.0f) << "head " << h;
        for (int j = 0; j < kv_len; ++j) EXPECT_EQ(r.weights[row * kv_len + j], 0.0f);
    }
}

TEST(SdpaAdditive, EverythingNegativeInfinity) {
    const int q_len = 4, kv_len = 6;
    SdpaTester t;
    t.batch(2).q_len(q_len).kv_len(kv_len).dk(4).dv(3).additive_values(
        1, 1, std::vector<float>(size_t(q_len) * kv_len, -kInf));
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

// A finite additive shifts logits: +3 on one key multiplies its unnormalized weight by e^3.
TEST(SdpaAdditive, ShiftsLogitsByItsValue) {
    const std::vector<float> q = {0, 0}, k = {0, 0, 0, 0};  // all logits 0
    const std::vector<float> v = {1, 0, 0, 1};
    SdpaTester t;
    t.kv_len(2).dk(2).dv(2).q_values(q).k_values(k).v_values(v).additive_values(1, 1, {3, 0});
    t.Test();
    const SdpaTester::Run r = t.Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    const double p0 = std::exp(3.0) / (std::exp(3.0) + 1.0);
    EXPECT_NEAR(r.weights[0], p0, kRelTol * p0);
    EXPECT_NEAR(r.weights[1], 1.0 - p0, kRelTol * p0);
}

TEST(SdpaAdditive, CombinedWithEveryOtherPart) {
    SdpaTester t;
    t.batch(3).heads(2).q_len(8).kv_len(13).dk(9).dv(7);
    t.causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .kv_lengths({13, 6, 0})
        .bool_mask(3, 0.2)
        .additive(1, 2, 0.2);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

// ---------------------------------------------------------------------------------------------
// Extreme logits: without subtracting the row maximum, exp() overflows (logits > 88) or every
// term underflows to 0 (logits < -104).

// Logits near 1024 that differ by O(1): a real softmax, with exp(1024) far beyond float.
SdpaTester NearTiesAt(float common) {
    const int q_len = 4, kv_len = 9, dk = 8;
    Rng rng(DefaultSeed());
    std::vector<float> q = rng.Uniform(size_t(q_len) * dk, -1.0f, 1.0f);
    std::vector<float> k = rng.Uniform(size_t(kv_len) * dk, -1.0f, 1.0f);
    for (int i = 0; i < q_len; ++i) q[size_t(i) * dk] = 32.0f;
    for (int j = 0; j < kv_len; ++j) k[size_t(j) * dk] = common;
    SdpaTester t;
    t.q_len(q_len).kv_len(kv_len).dk(dk).dv(5).scale(1.0f).q_values(q).k_values(k);
    return t;
}

TEST(SdpaExtremeLogits, HugePositiveLogitsNearTies) {
    SdpaTester t = NearTiesAt(32.0f);  // logits 1024 +- 7
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

TEST(SdpaExtremeLogits, HugeNegativeLogitsNearTies) {
    SdpaTester t = NearTiesAt(-32.0f);  // logits -1024 +- 7
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

// Entries of magnitude 1e3: logits of order 1e6 that differ by 1e5, so each row is one-hot
// and every other exp(logit - max) underflows.
TEST(SdpaExtremeLogits, HugeLogitsFarApart) {
    SdpaTester t;
    t.batch(2).heads(2).q_len(6).kv_len(17).dk(8).dv(4).qk_range(-1000.0f, 1000.0f);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
    const SdpaTester::Run r = t.with_weights(true).Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    for (float x : r.out) EXPECT_TRUE(std::isfinite(x)) << x;
}

TEST(SdpaExtremeLogits, HugeAdditiveOffsetsAreNotMasks) {
    // A finite -1e4 on every key of a row shifts the whole row: the softmax ignores it.
    const int q_len = 2, kv_len = 6;
    std::vector<float> additive(size_t(q_len) * kv_len, 0.0f);
    for (int j = 0; j < kv_len; ++j) additive[j] = -1e4f;
    SdpaTester t;
    t.q_len(q_len).kv_len(kv_len).dk(4).dv(3).additive_values(1, 1, additive);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

// ---------------------------------------------------------------------------------------------
// Scale

TEST(SdpaScale, CustomScales) {
    for (float scale : {1.0f, 0.37f, 2.5f, 0.01f}) {
        SCOPED_TRACE(scale);
        SdpaTester().batch(2).heads(2).q_len(5).kv_len(8).dk(16).dv(4).scale(scale).Test();
    }
}

TEST(SdpaScale, NegativeScaleFlipsThePreference) {
    SdpaTester().batch(1).heads(2).q_len(5).kv_len(8).dk(16).dv(4).scale(-0.25f).Test();
}

// scale 0 is 1/sqrt(dk): both runs see the same inputs and must agree to rounding.
TEST(SdpaScale, ZeroMeansInverseSqrtDk) {
    for (int dk : {1, 3, 16, 65}) {
        SCOPED_TRACE(dk);
        SdpaTester t;
        t.batch(1).heads(2).q_len(4).kv_len(7).dk(dk).dv(3);
        const SdpaTester::Run by_default = t.scale(0.0f).Execute();
        const SdpaTester::Run explicit_scale = t.scale(1.0f / std::sqrt(float(dk))).Execute();
        ASSERT_EQ(by_default.status, ATTNGEN_OK) << attngen_last_error();
        ASSERT_EQ(explicit_scale.status, ATTNGEN_OK) << attngen_last_error();
        EXPECT_TRUE(t.OutputsAgree(explicit_scale, by_default));
        t.scale(0.0f).Test();
    }
}

// ---------------------------------------------------------------------------------------------
// Weights output

TEST(SdpaWeights, RowsSumToOneOrZeroUnderHeavyMasking) {
    // SdpaTester checks the row sums whenever weights are requested; a dense mask makes many
    // rows fully masked and many nearly so.
    SdpaTester()
        .batch(3)
        .heads(3)
        .q_len(16)
        .kv_len(16)
        .dk(8)
        .dv(8)
        .bool_mask(3, 0.8)
        .kv_lengths({16, 3, 0})
        .with_weights(true)
        .Test();
}

TEST(SdpaWeights, OutputIsTheSameWithAndWithoutWeights) {
    SdpaTester t;
    t.batch(2).heads(3).q_len(9).kv_len(33).dk(16).dv(8).causal(ATTNGEN_CAUSAL_TOP_LEFT);
    const SdpaTester::Run with = t.with_weights(true).Execute();
    const SdpaTester::Run without = t.with_weights(false).Execute();
    ASSERT_EQ(with.status, ATTNGEN_OK) << attngen_last_error();
    ASSERT_EQ(without.status, ATTNGEN_OK) << attngen_last_error();
    // Two code paths may block the softmax differently: equal up to both runs' rounding.
    EXPECT_TRUE(t.OutputsAgree(with, without));
}

// Value heads of whole probs x values tiles (cpu_value_tile in generators/schedule_cpu.h: with
// the tuned x86 knobs 64 features on AVX-512, 16 on AVX2, 8 on SSE4.1) within 32 KiB are read
// where they are (120 keys of up to 64 features); other sizes, and longer heads (530 keys, one
// tile or several), through aligned panels of a tile's features. Both, on every dispatch
// variant, across key blocks and with grouped heads, with a key length inside the last block,
// for both algorithms.
TEST(SdpaValues, InPlaceAndPacked) {
    for (const auto &[kv_len, short_len] :
         std::vector<std::pair<int, int>>{{530, 517}, {120, 97}}) {
        for (int dv : {8, 20, 24, 48, 64, 80, 128}) {
            SCOPED_TRACE("dv " + std::to_string(dv) + ", kv_len " + std::to_string(kv_len));
            SdpaTester t;
            t.batch(2).heads(4).kv_heads(2).q_len(33).kv_len(kv_len).dk(24).dv(dv).kv_lengths(
                {kv_len, short_len});
            t.with_weights(true).Test();
            t.with_weights(false).Test();
            t.causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).with_weights(false).Test();
        }
    }
}

// Both sides of the 32 KiB edge between values read in place and values in panels, for heads of
// one tile or several: 128 keys of 64 features are exactly 32 KiB (in place on AVX-512, one tile,
// and on AVX2, four), 129 keys one row past it; 64 keys of 128 features are in place on AVX-512
// too.
TEST(SdpaValues, EitherSideOfTheInPlaceLimit) {
    for (const auto &[dv, kv_len] :
         std::vector<std::pair<int, int>>{{32, 128}, {64, 128}, {64, 129}, {128, 64}, {128, 65}}) {
        SCOPED_TRACE("dv " + std::to_string(dv) + ", kv_len " + std::to_string(kv_len));
        SdpaTester t;
        t.batch(2).heads(2).q_len(19).kv_len(kv_len).dk(16).dv(dv).kv_lengths(
            {kv_len, 101 % kv_len});
        t.with_weights(true).Test();
        t.with_weights(false).Test();
    }
}

// ---------------------------------------------------------------------------------------------
// The C++ wrapper

TEST(SdpaCpp, MatchesReference) {
    SdpaTester t;
    t.batch(2).heads(2).q_len(3).kv_len(5).dk(4).dv(6).kv_lengths({5, 2});
    SdpaTester::Run r = t.Prepare();
    attngen::Mask mask;
    mask.kv_lengths = {r.masks.kv_lengths.data(), {2}};
    attngen::scaled_dot_product_attention({r.q.data(), {2, 2, 3, 4}}, {r.k.data(), {2, 2, 5, 4}},
                                          {r.v.data(), {2, 2, 5, 6}}, {r.out.data(), {2, 2, 3, 6}},
                                          mask, 0.0f, {r.weights.data(), {2, 2, 3, 5}});
    t.Check(r);
}

TEST(SdpaCpp, ShapeMismatchThrowsBeforeWriting) {
    std::vector<float> q(2 * 3 * 4), k(2 * 5 * 4), v(2 * 5 * 6), out(2 * 3 * 6, kSentinel);
    try {
        // k has batch 1 and 2 heads where q has batch 2 and 1 head.
        attngen::scaled_dot_product_attention({q.data(), {2, 1, 3, 4}}, {k.data(), {1, 2, 5, 4}},
                                              {v.data(), {2, 1, 5, 6}}, {out.data(), {2, 1, 3, 6}});
        FAIL() << "expected attngen::Error";
    } catch (const attngen::Error &e) {
        EXPECT_EQ(e.status(), ATTNGEN_ERROR_SHAPE);
        EXPECT_NE(std::string(e.what()).find("k: "), std::string::npos) << e.what();
    }
    EXPECT_TRUE(Untouched("out", out));
}

// A mask part the call would read past: refused by the C++ layer before any kernel runs.
TEST(SdpaCpp, MaskPartOfTheWrongShapeThrowsBeforeWriting) {
    std::vector<float> q(2 * 2 * 3 * 4), k(2 * 1 * 5 * 4), v(2 * 1 * 5 * 6);
    std::vector<float> out(2 * 2 * 3 * 6, kSentinel), additive(2 * 3 * 3 * 5, 0.0f);
    const std::vector<uint8_t> bools(3 * 5, 0);
    const std::vector<int32_t> lengths = {5};
    struct Case {
        const char *name;
        attngen::Mask mask;
    };
    std::vector<Case> cases(3);
    cases[0].name = "additive";  // 3 heads where the call has 2 query heads
    cases[0].mask.additive = {additive.data(), {2, 3, 3, 5}};
    cases[1].name = "bool_mask";  // q_len 5 where the call has 3
    cases[1].mask.bool_mask = {bools.data(), {1, 5, 3}};
    cases[2].name = "kv_lengths";  // one length for a batch of 2
    cases[2].mask.kv_lengths = {lengths.data(), {1}};
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        try {
            attngen::scaled_dot_product_attention(
                {q.data(), {2, 2, 3, 4}}, {k.data(), {2, 1, 5, 4}}, {v.data(), {2, 1, 5, 6}},
                {out.data(), {2, 2, 3, 6}}, c.mask);
            FAIL() << "expected attngen::Error";
        } catch (const attngen::Error &e) {
            EXPECT_EQ(e.status(), ATTNGEN_ERROR_SHAPE);
            EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
        }
        EXPECT_TRUE(Untouched("out", out));
    }
}

}  // namespace
}  // namespace attngen_test
