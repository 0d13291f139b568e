// Grouped key/value heads (GQA, MQA), a value head size of its own and rotary positions
// (RoPE), through attngen_sdpa_gqa and attngen_mha_forward, against the float64 reference;
// and the configurations the 0.2 fields refuse.
#include "mha_tester.h"
#include "reference.h"
#include "sdpa_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace attngen_test {
namespace {

// ---------------------------------------------------------------------------------------------
// attngen_sdpa_gqa

struct GqaCase {
    int heads, kv_heads, q_len, kv_len, dk, dv;
};

class SdpaGqa : public ::testing::TestWithParam<GqaCase> {};

TEST_P(SdpaGqa, MatchesReference) {
    const GqaCase c = GetParam();
    SdpaTester t;
    t.batch(2)
        .heads(c.heads)
        .kv_heads(c.kv_heads)
        .q_len(c.q_len)
        .kv_len(c.kv_len)
        .dk(c.dk)
        .dv(c.dv);
    t.with_weights(false).Test();
    t.with_weights(true).Test();
    t.causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).with_weights(false).Test();
    t.causal(ATTNGEN_CAUSAL_NONE).kv_lengths({c.kv_len, c.kv_len / 2}).additive(1, c.heads).Test();
}

INSTANTIATE_TEST_SUITE_P(Groups, SdpaGqa,
                         ::testing::Values(GqaCase{8, 2, 5, 7, 8, 8},       // GQA, 4 per group
                                           GqaCase{4, 1, 3, 9, 16, 8},      // MQA, dv != dk
                                           GqaCase{6, 3, 1, 33, 8, 5},      // one query
                                           GqaCase{32, 8, 2, 257, 16, 16},  // Llama's ratio
                                           GqaCase{3, 3, 4, 4, 4, 4}));     // as attngen_sdpa

// Grouped keys and values give exactly what the same keys and values repeated per query head
// (PyTorch's repeat_interleave) give through attngen_sdpa: the arithmetic is the same.
TEST(SdpaGqa, EqualsRepeatedKeysAndValuesBitForBit) {
    const int batch = 2, heads = 6, kv_heads = 2, q_len = 5, kv_len = 40, dk = 8, dv = 12;
    const int group = heads / kv_heads;
    Rng rng(7);
    const std::vector<float> q = rng.Uniform(size_t(batch) * heads * q_len * dk, -1, 1);
    const std::vector<float> k = rng.Uniform(size_t(batch) * kv_heads * kv_len * dk, -1, 1);
    const std::vector<float> v = rng.Uniform(size_t(batch) * kv_heads * kv_len * dv, -1, 1);
    std::vector<float> k_rep(size_t(batch) * heads * kv_len * dk);
    std::vector<float> v_rep(size_t(batch) * heads * kv_len * dv);
    for (int b = 0; b < batch; ++b) {
        for (int h = 0; h < heads; ++h) {
            const size_t from = size_t(b) * kv_heads + h / group, to = size_t(b) * heads + h;
            std::memcpy(&k_rep[to * kv_len * dk], &k[from * kv_len * dk], kv_len * dk * 4);
            std::memcpy(&v_rep[to * kv_len * dv], &v[from * kv_len * dv], kv_len * dv * 4);
        }
    }
    for (attngen_causal causal : {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT}) {
        attngen_mask mask{};
        mask.causal = causal;
        std::vector<float> grouped(size_t(batch) * heads * q_len * dv), repeated(grouped.size());
        ASSERT_EQ(attngen_sdpa_gqa(batch, heads, kv_heads, q_len, kv_len, dk, dv, q.data(),
                                   k.data(), v.data(), &mask, 0.0f, grouped.data(), nullptr),
                  ATTNGEN_OK)
            << attngen_last_error();
        ASSERT_EQ(attngen_sdpa(batch, heads, q_len, kv_len, dk, dv, q.data(), k_rep.data(),
                               v_rep.data(), &mask, 0.0f, repeated.data(), nullptr),
                  ATTNGEN_OK)
            << attngen_last_error();
        EXPECT_EQ(0, std::memcmp(grouped.data(), repeated.data(), grouped.size() * 4));
    }
}

TEST(SdpaGqa, RefusesKvHeadsThatDoNotDivideHeads) {
    std::vector<float> buf(1024, 0.0f);
    EXPECT_EQ(attngen_sdpa_gqa(1, 6, 4, 2, 2, 2, 2, buf.data(), buf.data(), buf.data(), nullptr,
                               0.0f, buf.data(), nullptr),
              ATTNGEN_ERROR_SHAPE);
    EXPECT_NE(std::strstr(attngen_last_error(), "kv_heads"), nullptr) << attngen_last_error();
    EXPECT_EQ(attngen_sdpa_gqa(1, 6, 0, 2, 2, 2, 2, buf.data(), buf.data(), buf.data(), nullptr,
                               0.0f, buf.data(), nullptr),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------------------------
// attngen_mha_forward with grouped heads, v_head_dim and rotary positions

TEST(MhaGroupedHeads, GqaMqaAndValueHeadSize) {
    for (int kv_heads : {1, 2, 4}) {
        for (int v_head_dim : {0, 5, 12}) {
            MhaTester t;
            t.d_model(32).num_heads(8).num_kv_heads(kv_heads).v_head_dim(v_head_dim);
            t.batch(2).q_len(5).kv_len(9);
            t.with_weights(true).Test();
            t.with_weights(false).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).Test();
        }
    }
}

TEST(MhaGroupedHeads, LongKeysTakeTheFlashPathPerGroup) {
    MhaTester t;
    t.d_model(64).num_heads(8).num_kv_heads(2).v_head_dim(16).use_bias(false);
    t.batch(1).q_len(33).kv_len(300).with_weights(false);
    t.Test();
    t.causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).Test();
}

// Value heads of one register tile (8, 16 and 64 features: SSE4.1, AVX2 and AVX-512) past the
// 32 KiB read in place: with one key/value head the flash kernel reads the projected rows where
// they are, with several it copies them into panels (PackedScore::values_in_place).
TEST(MhaGroupedHeads, OneTileValueHeadsInPlaceOrCopied) {
    for (int v_head_dim : {8, 16, 64}) {
        for (int kv_heads : {1, 2}) {
            MhaTester t;
            t.d_model(64).num_heads(2).num_kv_heads(kv_heads).v_head_dim(v_head_dim);
            t.batch(2).q_len(19).kv_len(1050).kv_lengths({1050, 1031}).with_weights(false);
            t.Test();
            t.causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).Test();
        }
    }
}

TEST(MhaRotary, BothLayoutsFullAndPartial) {
    for (attngen_rope mode : {ATTNGEN_ROPE_HALF, ATTNGEN_ROPE_INTERLEAVED}) {
        for (int rotary_dim : {0, 4, 6}) {  // 0 = head_dim (8)
            MhaTester t;
            t.d_model(32).num_heads(4).rope(mode, rotary_dim).batch(2).q_len(4).kv_len(11);
            t.with_weights(true).Test();
            t.with_weights(false).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).Test();
        }
    }
}

TEST(MhaRotary, WithGroupedHeadsThetaAndQueriesLongerThanKeys) {
    MhaTester t;
    t.d_model(48).num_heads(6).num_kv_heads(2).head_dim(10).rope(ATTNGEN_ROPE_HALF, 0, 500000.0f);
    t.batch(2).q_len(13).kv_len(7).with_weights(true).Test();  // query positions start at -6
    t.with_weights(false).q_len(40).kv_len(300).Test();        // the flash path
}

// Head sizes past one vector but not whole vectors: the key transposition then shifts its last
// tile of features inwards (schedule_transpose), over a rotation computed where it is staged
// (20 overlaps on AVX2 and AVX-512, 24 on AVX-512), in float32 and bfloat16.
TEST(MhaRotary, HeadSizesPastOneVectorNotWholeVectors) {
    for (attngen_precision precision : {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16}) {
        for (int head_dim : {20, 24}) {
            MhaTester t;
            t.precision(precision).d_model(2 * head_dim).num_heads(2).head_dim(head_dim);
            t.rope(ATTNGEN_ROPE_INTERLEAVED).batch(2).q_len(9).kv_len(37).with_weights(false);
            t.Test();
            t.rope(ATTNGEN_ROPE_HALF, head_dim - 4).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).Test();
        }
    }
}

// Rotation changes results: a test that passed with rope ignored would prove nothing.
TEST(MhaRotary, ChangesTheOutput) {
    MhaTester plain, rotated;
    plain.d_model(16).num_heads(2).batch(1).q_len(3).kv_len(5).with_weights(false);
    rotated = plain;
    rotated.rope(ATTNGEN_ROPE_HALF);
    const MhaTester::Run a = plain.Execute(), b = rotated.Execute();
    ASSERT_EQ(a.status, ATTNGEN_OK);
    ASSERT_EQ(b.status, ATTNGEN_OK);
    double max_diff = 0;
    for (size_t i = 0; i < a.out.size(); ++i)
        max_diff = std::max(max_diff, double(std::fabs(a.out[i] - b.out[i])));
    EXPECT_GT(max_diff, 1e-3);
}

// ---------------------------------------------------------------------------------------------
// Configurations the 0.2 fields refuse

attngen_status Create(attngen_mha_config c) {
    attngen_mha *m = nullptr;
    const attngen_status s = attngen_mha_create(&c, &m);
    attngen_mha_destroy(m);
    return s;
}

attngen_mha_config Base() {
    attngen_mha_config c{};
    c.d_model = 32;
    c.num_heads = 8;
    return c;
}

TEST(MhaConfig02, RefusesWhatItCannotServe) {
    attngen_mha_config c = Base();
    c.num_kv_heads = 3;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_SHAPE) << "num_kv_heads not dividing num_heads";
    EXPECT_NE(std::strstr(attngen_last_error(), "num_kv_heads"), nullptr);
    c = Base(), c.num_kv_heads = -1;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT);
    c = Base(), c.v_head_dim = -2;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT);
    c = Base(), c.rope = ATTNGEN_ROPE_HALF, c.rotary_dim = 3;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT) << "odd rotary_dim";
    EXPECT_NE(std::strstr(attngen_last_error(), "even"), nullptr) << attngen_last_error();
    c = Base(), c.rope = ATTNGEN_ROPE_INTERLEAVED, c.rotary_dim = 6;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_SHAPE) << "rotary_dim > head_dim (4)";
    c = Base(), c.head_dim = 5, c.rope = ATTNGEN_ROPE_HALF;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT) << "odd head_dim as the rotary_dim";
    c = Base(), c.head_dim = 5;  // an odd head_dim is fine without rotation
    EXPECT_EQ(Create(c), ATTNGEN_OK) << attngen_last_error();
    // An explicit rotary_dim is checked without rotation too (it was ignored).
    c = Base(), c.rotary_dim = 3;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT) << "odd rotary_dim without rope";
    c = Base(), c.rotary_dim = 6;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_SHAPE) << "rotary_dim > head_dim (4) without rope";
    EXPECT_NE(std::strstr(attngen_last_error(), "exceeds head_dim"), nullptr)
        << attngen_last_error();
    c = Base(), c.rotary_dim = 2;
    EXPECT_EQ(Create(c), ATTNGEN_OK) << attngen_last_error();
    c = Base(), c.rope = static_cast<attngen_rope>(7);
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT);
    c = Base(), c.rope = ATTNGEN_ROPE_HALF, c.rope_theta = -1.0f;
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT);
    c = Base(), c.precision = ATTNGEN_PRECISION_BF16;
    EXPECT_EQ(Create(c), ATTNGEN_OK) << attngen_last_error();
    c = Base(), c.precision = ATTNGEN_PRECISION_F16;
    EXPECT_EQ(Create(c), ATTNGEN_OK) << attngen_last_error();
    c = Base(), c.precision = static_cast<attngen_precision>(9);
    EXPECT_EQ(Create(c), ATTNGEN_ERROR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace attngen_test
