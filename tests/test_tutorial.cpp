// The examples of the classic attention tutorials that DESIGN.md lists as test data.
#include "mha_tester.h"
#include "reference.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>
#include <attngen/attngen.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace attngen_test {
namespace {

// The TensorFlow tutorial's scaled_dot_product_attention example: four keys of dk 3 and four
// values of dv 2; each query selects keys through large dot products (scale 1/sqrt(3)).
const std::vector<float> kTutorialKeys = {10, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 10};
const std::vector<float> kTutorialValues = {1, 0, 10, 0, 100, 5, 1000, 6};

struct TutorialQuery {
    std::string name;
    std::vector<float> query;     // [3]
    std::vector<double> weights;  // [4]
    std::vector<double> output;   // [2]
};

const std::vector<TutorialQuery> &TutorialQueries() {
    static const std::vector<TutorialQuery> queries = {
        {"SelectsTheRepeatedKey", {0, 0, 10}, {0, 0, 0.5, 0.5}, {550, 5.5}},
        {"SelectsTheSecondKey", {0, 10, 0}, {0, 1, 0, 0}, {10, 0}},
        {"SelectsTheFirstTwoKeys", {10, 10, 0}, {0.5, 0.5, 0, 0}, {5.5, 0}},
    };
    return queries;
}

// The tutorial prints weights exactly; the other keys get exp(-100/sqrt(3)) ~ 1e-25 of weight.
constexpr double kWeightsAtol = 1e-6;
// Outputs to 1e-3 relative, as the tutorial states them; the absolute part covers the 0
// entries, where a weight error of kWeightsAtol meets values up to 1000.
constexpr double kOutputRtol = 1e-3;
constexpr double kOutputAtol = kWeightsAtol * 1000;

void ExpectTutorialResult(const std::vector<float> &weights, const std::vector<float> &out,
                          const std::vector<TutorialQuery> &queries) {
    std::vector<double> expected_weights, expected_out;
    for (const TutorialQuery &t : queries) {
        expected_weights.insert(expected_weights.end(), t.weights.begin(), t.weights.end());
        expected_out.insert(expected_out.end(), t.output.begin(), t.output.end());
    }
    const int64_t q_len = int64_t(queries.size());
    EXPECT_TRUE(AllClose("weights", {q_len, 4}, expected_weights, weights.data(),
                         {{kWeightsAtol}, 0.0, "the tutorial's weights are exact"}));
    EXPECT_TRUE(AllClose("out", {q_len, 2}, expected_out, out.data(),
                         {{kOutputAtol}, kOutputRtol, "the tutorial's outputs, 1e-3 relative"}));
}

class TutorialSdpaQuery : public ::testing::TestWithParam<TutorialQuery> {};

TEST_P(TutorialSdpaQuery, MatchesTheTutorial) {
    const TutorialQuery &t = GetParam();
    std::vector<float> out = NaNs(2), weights = NaNs(4);
    ASSERT_EQ(attngen_sdpa(1, 1, 1, 4, 3, 2, t.query.data(), kTutorialKeys.data(),
                           kTutorialValues.data(), nullptr, 0.0f, out.data(), weights.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    ExpectTutorialResult(weights, out, {t});
}

TEST_P(TutorialSdpaQuery, MatchesTheTutorialWithoutWeightsOutput) {
    const TutorialQuery &t = GetParam();
    std::vector<float> out = NaNs(2);
    ASSERT_EQ(attngen_sdpa(1, 1, 1, 4, 3, 2, t.query.data(), kTutorialKeys.data(),
                           kTutorialValues.data(), nullptr, 0.0f, out.data(), nullptr),
              ATTNGEN_OK)
        << attngen_last_error();
    std::vector<double> expected(t.output.begin(), t.output.end());
    EXPECT_TRUE(AllClose("out", {2}, expected, out.data(),
                         {{kOutputAtol}, kOutputRtol, "the tutorial's outputs, 1e-3 relative"}));
}

// The reference is the oracle of every other test: it must reproduce the tutorial too.
TEST_P(TutorialSdpaQuery, ReferenceMatchesTheTutorial) {
    const TutorialQuery &t = GetParam();
    attngen_ref::SdpaShape s;
    s.kv_len = 4, s.dk = 3, s.dv = 2;
    const attngen_ref::SdpaResult ref = attngen_ref::sdpa(s, t.query.data(), kTutorialKeys.data(),
                                                          kTutorialValues.data(), nullptr, 0.0);
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(ref.weights[j], t.weights[j], 1e-20) << "key " << j;
    for (int c = 0; c < 2; ++c) EXPECT_NEAR(ref.out[c], t.output[c], 1e-9 * 1000) << "column " << c;
}

INSTANTIATE_TEST_SUITE_P(Tutorial, TutorialSdpaQuery, ::testing::ValuesIn(TutorialQueries()),
                         [](const ::testing::TestParamInfo<TutorialQuery> &info) {
                             return info.param.name;
                         });

// The tutorial also runs the three queries as one [3, 3] query matrix.
TEST(TutorialSdpa, AllQueriesAtOnce) {
    std::vector<float> queries;
    for (const TutorialQuery &t : TutorialQueries()) {
        queries.insert(queries.end(), t.query.begin(), t.query.end());
    }
    std::vector<float> out = NaNs(3 * 2), weights = NaNs(3 * 4);
    ASSERT_EQ(attngen_sdpa(1, 1, 3, 4, 3, 2, queries.data(), kTutorialKeys.data(),
                           kTutorialValues.data(), nullptr, 0.0f, out.data(), weights.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    ExpectTutorialResult(weights, out, TutorialQueries());
}

TEST(TutorialSdpa, ThroughTheCppApi) {
    std::vector<float> queries;
    for (const TutorialQuery &t : TutorialQueries()) {
        queries.insert(queries.end(), t.query.begin(), t.query.end());
    }
    std::vector<float> out = NaNs(3 * 2), weights = NaNs(3 * 4);
    attngen::scaled_dot_product_attention(
        {queries.data(), {1, 1, 3, 3}}, {kTutorialKeys.data(), {1, 1, 4, 3}},
        {kTutorialValues.data(), {1, 1, 4, 2}}, {out.data(), {1, 1, 3, 2}}, {}, 0.0f,
        {weights.data(), {1, 1, 3, 4}});
    ExpectTutorialResult(weights, out, TutorialQueries());
}

// MultiHeadAttention(d_model=512, num_heads=8) applied to q [1, 62, 512] and k = v [1, 60, 512].
TEST(TutorialMha, QueryOf62AttendsToSharedKeyValueOf60) {
    MhaTester()
        .d_model(512)
        .num_heads(8)
        .batch(1)
        .q_len(62)
        .kv_len(60)
        .same_key_value(true)
        .with_weights(true)
        .Test();
}

// The same through the C++ API, which checks the shapes the tutorial prints:
// out [1, 62, 512] and weights [1, 8, 62, 60].
TEST(TutorialMha, CppApiProducesTheTutorialShapes) {
    MhaTester tester;
    tester.d_model(512).num_heads(8).batch(1).q_len(62).kv_len(60).same_key_value(true);
    const MhaTester::Model model = tester.MakeModel();
    MhaTester::Run run = tester.Prepare(DefaultSeed());

    attngen::MhaConfig config;
    config.d_model = 512;
    config.num_heads = 8;
    attngen::MultiHeadAttention mha(config);
    mha.set_weights({model.wq.data(), {512, 512}}, {model.wk.data(), {512, 512}},
                    {model.wv.data(), {512, 512}}, {model.wo.data(), {512, 512}},
                    {model.bq.data(), {512}}, {model.bk.data(), {512}}, {model.bv.data(), {512}},
                    {model.bo.data(), {512}});
    mha.forward({run.query.data(), {1, 62, 512}}, {run.key_ptr, {1, 60, 512}},
                {run.value_ptr, {1, 60, 512}}, {run.out.data(), {1, 62, 512}}, {},
                {run.weights.data(), {1, 8, 62, 60}});
    tester.Check(model, run);
}

// Encoder-decoder attention of the tutorial's training shapes: batch 32, 10 queries, 20 keys.
TEST(TutorialMha, Batch32Query10KeyValue20) {
    MhaTester().d_model(512).num_heads(8).batch(32).q_len(10).kv_len(20).with_weights(true).Test();
}

TEST(TutorialMha, Batch32Query10KeyValue20WithoutWeightsOutput) {
    MhaTester().d_model(512).num_heads(8).batch(32).q_len(10).kv_len(20).with_weights(false).Test();
}

// Stable Diffusion's CrossAttention: query_dim 320, context_dim 768 (CLIP text, 77 tokens),
// 8 heads of 40, projections without bias; 64 queries stand for an 8x8 latent.
TEST(TutorialMha, StableDiffusionCrossAttention) {
    MhaTester()
        .d_model(320)
        .num_heads(8)
        .kdim(768)
        .vdim(768)
        .use_bias(false)
        .batch(2)
        .q_len(64)
        .kv_len(77)
        .same_key_value(true)
        .with_weights(false)
        .Test();
}

TEST(TutorialMha, CrossAttentionWithWeightsAndPaddedContext) {
    MhaTester()
        .d_model(320)
        .num_heads(8)
        .kdim(768)
        .vdim(768)
        .use_bias(false)
        .batch(2)
        .q_len(16)
        .kv_len(77)
        .same_key_value(true)
        .kv_lengths({77, 12})
        .with_weights(true)
        .Test();
}

}  // namespace
}  // namespace attngen_test
