// attngen_mha_*: projections with and without bias, kdim/vdim/head_dim variants, masks through
// the MHA entry point, the weights output, the handle's weight handling, and the C++ API.
#include "mha_tester.h"
#include "reference.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>
#include <attngen/attngen.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

namespace attngen_test {
namespace {

// ---------------------------------------------------------------------------------------------
// Module shapes

struct ModuleShape {
    int d_model, num_heads, kdim, vdim, head_dim;
};

std::string ModuleShapeName(const ModuleShape &m) {
    return "d" + std::to_string(m.d_model) + "_h" + std::to_string(m.num_heads) + "_k" +
           std::to_string(m.kdim) + "_v" + std::to_string(m.vdim) + "_hd" +
           std::to_string(m.head_dim);
}

const std::vector<ModuleShape> kModuleShapes = {
    {8, 1, 0, 0, 0},     // one head
    {8, 2, 0, 0, 0},     // head_dim 4
    {12, 3, 0, 0, 0},    // head_dim 4, d_model not a power of two
    {64, 8, 0, 0, 0},    // head_dim 8
    {96, 12, 0, 0, 0},   // BERT's 12 heads, head_dim 8
    {10, 5, 0, 0, 0},    // head_dim 2
    {7, 7, 0, 0, 0},     // head_dim 1
    {16, 2, 7, 11, 0},   // kdim and vdim differ from d_model and each other
    {16, 3, 0, 0, 5},    // explicit head_dim, 3*5 != 16
    {16, 3, 0, 0, 12},   // head_dim 12: 36 > 16
    {16, 2, 9, 9, 20},   // head_dim 20, kdim = vdim != d_model
    {24, 4, 0, 0, 6},    // explicit head_dim equal to the default
    {33, 1, 65, 17, 0},  // odd sizes everywhere
};

class MhaModuleShape : public ::testing::TestWithParam<std::tuple<ModuleShape, bool>> {};

TEST_P(MhaModuleShape, MatchesReference) {
    const auto [m, bias] = GetParam();
    MhaTester t;
    t.d_model(m.d_model).num_heads(m.num_heads).kdim(m.kdim).vdim(m.vdim).head_dim(m.head_dim);
    t.use_bias(bias).batch(2).q_len(5).kv_len(7);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

INSTANTIATE_TEST_SUITE_P(Shapes, MhaModuleShape,
                         ::testing::Combine(::testing::ValuesIn(kModuleShapes), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<ModuleShape, bool>> &info) {
                             return ModuleShapeName(std::get<0>(info.param)) +
                                    (std::get<1>(info.param) ? "_bias" : "_nobias");
                         });

class MhaSequenceLengths : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(MhaSequenceLengths, MatchesReference) {
    const auto [q_len, kv_len] = GetParam();
    MhaTester t;
    t.d_model(24).num_heads(3).batch(2).q_len(q_len).kv_len(kv_len);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

INSTANTIATE_TEST_SUITE_P(Lengths, MhaSequenceLengths,
                         ::testing::Combine(::testing::Values(1, 8, 17, 33),
                                            ::testing::Values(1, 9, 16, 65)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
                             return "q" + std::to_string(std::get<0>(info.param)) + "_kv" +
                                    std::to_string(std::get<1>(info.param));
                         });

TEST(Mha, SelfAttentionWithOneTensorForQueryKeyAndValue) {
    MhaTester().d_model(32).num_heads(4).batch(2).q_len(9).kv_len(9).self_attention(true).Test();
}

TEST(Mha, SharedKeyValueTensor) {
    MhaTester()
        .d_model(32)
        .num_heads(4)
        .kdim(20)
        .vdim(20)
        .batch(2)
        .q_len(5)
        .kv_len(11)
        .same_key_value(true)
        .Test();
}

TEST(Mha, HeadDimNotAMultipleOfEight) {
    for (int head_dim : {5, 12, 20}) {
        SCOPED_TRACE(head_dim);
        MhaTester t;
        t.d_model(16).num_heads(3).head_dim(head_dim).batch(2).q_len(6).kv_len(9);
        t.with_weights(true).Test();
        t.with_weights(false).Test();
    }
}

// The projections take the rows of all batches as one sequence: register tiles (4-12 rows)
// straddle the batch boundaries here, and the causal mask and key lengths must still apply per
// batch.
TEST(Mha, ProjectionTilesStraddleBatches) {
    MhaTester t;
    t.d_model(32).num_heads(2).batch(7).q_len(5).kv_len(11);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
    t.causal(ATTNGEN_CAUSAL_TOP_LEFT).kv_lengths({11, 3, 0, 7, 1, 11, 5}).Test();
}

// Projection inputs past 640 KiB (2 x 701 x 128 floats) take the row-block schedule, the
// smaller ones panel tasks (schedule_projection_cpu); a row block (32-48 rows) straddles the
// boundary between the two batches.
TEST(Mha, ProjectionsWithRowBlocks) {
    MhaTester()
        .d_model(128)
        .num_heads(2)
        .batch(2)
        .q_len(701)
        .kv_len(650)
        .with_weights(false)
        .Test();
}

// Projections of more than 8 rows over at most 1024 input features keep each register tile's
// whole reduction in registers where the tile spans a weight panel (AVX-512: DirectPath in
// generators/stages.h); wider inputs, and every input on narrower targets, sum blocks of the
// features into a buffer. Both sides of the edge, in every precision, with the attention's
// output (1024 and 1040 features over 8 heads) the output projection's input.
TEST(Mha, ProjectionsAtTheDirectPathsEdge) {
    for (attngen_precision p :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        for (int d_model : {1024, 1040}) {
            SCOPED_TRACE(std::to_string(d_model) + " features, precision " + std::to_string(p));
            MhaTester()
                .d_model(d_model)
                .num_heads(8)
                .precision(p)
                .batch(2)
                .q_len(9)
                .kv_len(13)
                .with_weights(false)
                .Test();
        }
    }
}

TEST(Mha, LargerModel) {
    MhaTester().d_model(256).num_heads(4).batch(2).q_len(33).kv_len(47).with_weights(false).Test();
}

// ---------------------------------------------------------------------------------------------
// Masks through the MHA entry point

struct MhaMaskCase {
    std::string name;
    attngen_causal causal;
    bool kv_lengths;
    int bool_mask_batch;
    int additive_batch, additive_heads;
};

const std::vector<MhaMaskCase> kMhaMaskCases = {
    {"CausalTopLeft", ATTNGEN_CAUSAL_TOP_LEFT, false, 0, 0, 0},
    {"CausalBottomRight", ATTNGEN_CAUSAL_BOTTOM_RIGHT, false, 0, 0, 0},
    {"KvLengths", ATTNGEN_CAUSAL_NONE, true, 0, 0, 0},
    {"BoolBroadcast", ATTNGEN_CAUSAL_NONE, false, 1, 0, 0},
    {"BoolPerBatch", ATTNGEN_CAUSAL_NONE, false, 3, 0, 0},
    {"Additive1x1", ATTNGEN_CAUSAL_NONE, false, 0, 1, 1},
    {"AdditiveBx1", ATTNGEN_CAUSAL_NONE, false, 0, 3, 1},
    {"Additive1xH", ATTNGEN_CAUSAL_NONE, false, 0, 1, 2},
    {"AdditiveBxH", ATTNGEN_CAUSAL_NONE, false, 0, 3, 2},
    {"Everything", ATTNGEN_CAUSAL_BOTTOM_RIGHT, true, 3, 3, 2},
};

class MhaMask : public ::testing::TestWithParam<std::tuple<MhaMaskCase, std::tuple<int, int>>> {};

TEST_P(MhaMask, MatchesReference) {
    const auto &[c, lens] = GetParam();
    const auto [q_len, kv_len] = lens;
    MhaTester t;
    t.d_model(12).num_heads(2).batch(3).q_len(q_len).kv_len(kv_len).causal(c.causal);
    if (c.kv_lengths) t.kv_lengths({kv_len, 0, kv_len / 2});
    if (c.bool_mask_batch) t.bool_mask(c.bool_mask_batch, 0.3);
    if (c.additive_batch) t.additive(c.additive_batch, c.additive_heads, 0.15);
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, MhaMask,
    ::testing::Combine(::testing::ValuesIn(kMhaMaskCases),
                       ::testing::Values(std::make_tuple(4, 7), std::make_tuple(7, 4))),
    [](const ::testing::TestParamInfo<std::tuple<MhaMaskCase, std::tuple<int, int>>> &info) {
        const auto &lens = std::get<1>(info.param);
        return std::get<0>(info.param).name + "_q" + std::to_string(std::get<0>(lens)) + "_kv" +
               std::to_string(std::get<1>(lens));
    });

TEST(MhaMasks, BatchWithDifferentKvLengths) {
    MhaTester t;
    t.d_model(16).num_heads(4).batch(4).q_len(3).kv_len(6).kv_lengths({6, 1, 0, 4});
    t.with_weights(true).Test();
    t.with_weights(false).Test();
}

// A query that sees no key attends to nothing: its heads are 0, so its output is the output
// projection's bias alone.
TEST(MhaMasks, FullyMaskedQueryOutputsTheOutputBias) {
    MhaTester t;
    t.d_model(8).num_heads(2).batch(2).q_len(3).kv_len(4).kv_lengths({0, 4});
    t.Test();

    attngen_mha *raw = nullptr;
    const attngen_mha_config config = t.config();
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const MhaTester::Model model = t.MakeModel();
    ASSERT_EQ(model.SetWeights(m.get()), ATTNGEN_OK) << attngen_last_error();
    MhaTester::Run r = t.Prepare(DefaultSeed());
    t.Call(m.get(), r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    for (int i = 0; i < 3; ++i) {
        for (int o = 0; o < 8; ++o) {
            // 0 * Wo + bo is exact in float, whatever the order of the sum.
            EXPECT_EQ(r.out[size_t(i) * 8 + o], model.bo[o]) << "query " << i << " feature " << o;
        }
    }
    for (size_t e = 0; e < size_t(2) * 3 * 4; ++e) EXPECT_EQ(r.weights[e], 0.0f) << e;
}

// ---------------------------------------------------------------------------------------------
// The handle and its weights

struct Handle {
    MhaHandle m;
    MhaTester::Model model;
};

Handle CreateWithWeights(const MhaTester &t) {
    Handle h;
    attngen_mha *raw = nullptr;
    const attngen_mha_config config = t.config();
    EXPECT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    h.m.reset(raw);
    h.model = t.MakeModel();
    if (raw) {
        EXPECT_EQ(h.model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    }
    return h;
}

TEST(MhaHandle, SetWeightsCopiesTheWeights) {
    MhaTester t;
    t.d_model(16).num_heads(2).kdim(6).vdim(10).batch(2).q_len(4).kv_len(5);
    Handle h = CreateWithWeights(t);
    ASSERT_NE(h.m, nullptr);
    // Overwrite the very arrays given to set_weights: the handle must still use the originals.
    const MhaTester::Model original = h.model;
    for (auto *w : {&h.model.wq, &h.model.wk, &h.model.wv, &h.model.wo, &h.model.bq, &h.model.bk,
                    &h.model.bv, &h.model.bo}) {
        for (float &x : *w) x = 1e3f;
    }
    MhaTester::Run r = t.Prepare(DefaultSeed());
    t.Call(h.m.get(), r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    t.Check(original, r);
}

TEST(MhaHandle, SetWeightsAgainReplacesTheWeights) {
    MhaTester first, second;
    first.d_model(16).num_heads(4).batch(1).q_len(3).kv_len(5).seed(1);
    second.d_model(16).num_heads(4).batch(1).q_len(3).kv_len(5).seed(2);
    Handle h = CreateWithWeights(first);
    ASSERT_NE(h.m, nullptr);
    const MhaTester::Model replacement = second.MakeModel();
    ASSERT_EQ(replacement.SetWeights(h.m.get()), ATTNGEN_OK) << attngen_last_error();
    MhaTester::Run r = first.Prepare(7);
    first.Call(h.m.get(), r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    first.Check(replacement, r);
}

// A handle is bound to its module, not to a sequence shape.
TEST(MhaHandle, OneHandleServesManyShapes) {
    MhaTester t;
    t.d_model(24).num_heads(3).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT);
    Handle h = CreateWithWeights(t);
    ASSERT_NE(h.m, nullptr);
    const int shapes[][3] = {{1, 1, 1}, {3, 7, 2}, {2, 1, 30}, {1, 40, 40}, {4, 5, 9}};
    for (const auto &s : shapes) {
        SCOPED_TRACE(::testing::Message() << "batch " << s[0] << " q " << s[1] << " kv " << s[2]);
        t.batch(s[0]).q_len(s[1]).kv_len(s[2]);
        MhaTester::Run r = t.Prepare(DefaultSeed() + uint32_t(s[1]));
        t.Call(h.m.get(), r);
        ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
        t.Check(h.model, r);
    }
}

TEST(MhaHandle, RepeatedForwardIsBitIdentical) {
    MhaTester t;
    t.d_model(32).num_heads(4).batch(2).q_len(9).kv_len(13).kv_lengths({13, 5});
    Handle h = CreateWithWeights(t);
    ASSERT_NE(h.m, nullptr);
    MhaTester::Run a = t.Prepare(DefaultSeed()), b = t.Prepare(DefaultSeed());
    t.Call(h.m.get(), a);
    t.Call(h.m.get(), b);
    ASSERT_EQ(a.status, ATTNGEN_OK) << attngen_last_error();
    ASSERT_EQ(b.status, ATTNGEN_OK) << attngen_last_error();
    EXPECT_TRUE(BitIdentical("out", a.out, b.out));
    EXPECT_TRUE(BitIdentical("weights", a.weights, b.weights));
}

// ---------------------------------------------------------------------------------------------
// The C++ API

attngen::MhaConfig CppConfig(int d_model, int num_heads, int kdim = 0, int vdim = 0,
                             int head_dim = 0, bool bias = true) {
    attngen::MhaConfig c;
    c.d_model = d_model;
    c.num_heads = num_heads;
    c.kdim = kdim;
    c.vdim = vdim;
    c.head_dim = head_dim;
    c.use_bias = bias;
    return c;
}

void SetCppWeights(attngen::MultiHeadAttention &mha, const MhaTester::Model &w,
                   const attngen_ref::MhaDims &d) {
    const int64_t inner = d.inner();
    mha.set_weights({w.wq.data(), {inner, d.d_model}}, {w.wk.data(), {inner, d.kdim}},
                    {w.wv.data(), {inner, d.vdim}}, {w.wo.data(), {d.d_model, inner}},
                    {w.bq.data(), {inner}}, {w.bk.data(), {inner}}, {w.bv.data(), {inner}},
                    {w.bo.data(), {d.d_model}});
}

TEST(MhaCpp, ForwardMatchesReference) {
    MhaTester t;
    t.d_model(20).num_heads(2).kdim(6).vdim(9).head_dim(7).batch(2).q_len(4).kv_len(5);
    t.kv_lengths({5, 3}).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT);
    const attngen_ref::MhaDims d = t.dims();
    attngen::MultiHeadAttention mha(CppConfig(20, 2, 6, 9, 7));
    const MhaTester::Model model = t.MakeModel();
    SetCppWeights(mha, model, d);

    MhaTester::Run r = t.Prepare(DefaultSeed());
    attngen::Mask mask;
    mask.causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT;
    mask.kv_lengths = {r.masks.kv_lengths.data(), {2}};
    mha.forward({r.query.data(), {2, 4, 20}}, {r.key_ptr, {2, 5, 6}}, {r.value_ptr, {2, 5, 9}},
                {r.out.data(), {2, 4, 20}}, mask, {r.weights.data(), {2, 2, 4, 5}});
    t.Check(model, r);
}

TEST(MhaCpp, ConfigResolvesDefaults) {
    attngen::MultiHeadAttention mha(CppConfig(24, 4));
    EXPECT_EQ(mha.config().kdim, 24);
    EXPECT_EQ(mha.config().vdim, 24);
    EXPECT_EQ(mha.config().head_dim, 6);
    EXPECT_NE(mha.handle(), nullptr);
}

TEST(MhaCpp, BadConfigThrowsWithStatus) {
    try {
        attngen::MultiHeadAttention mha(CppConfig(10, 3));
        FAIL() << "d_model 10 with 3 heads should not construct";
    } catch (const attngen::Error &e) {
        EXPECT_EQ(e.status(), ATTNGEN_ERROR_SHAPE) << e.what();
    }
    try {
        attngen::MultiHeadAttention mha(CppConfig(0, 1));
        FAIL() << "d_model 0 should not construct";
    } catch (const attngen::Error &e) {
        EXPECT_EQ(e.status(), ATTNGEN_ERROR_INVALID_ARGUMENT) << e.what();
        EXPECT_NE(std::string(e.what()).find("d_model"), std::string::npos) << e.what();
    }
}

TEST(MhaCpp, WrongWeightShapeThrowsShape) {
    attngen::MultiHeadAttention mha(CppConfig(8, 2));
    std::vector<float> w(64), b(8);
    try {
        mha.set_weights({w.data(), {8, 7}}, {w.data(), {8, 8}}, {w.data(), {8, 8}},
                        {w.data(), {8, 8}}, {b.data(), {8}}, {b.data(), {8}}, {b.data(), {8}},
                        {b.data(), {8}});
        FAIL() << "wq [8, 7] should be rejected";
    } catch (const attngen::Error &e) {
        EXPECT_EQ(e.status(), ATTNGEN_ERROR_SHAPE);
        EXPECT_NE(std::string(e.what()).find("wq"), std::string::npos) << e.what();
    }
}

TEST(MhaCpp, ForwardBeforeSetWeightsThrowsInvalidArgument) {
    attngen::MultiHeadAttention mha(CppConfig(8, 2));
    std::vector<float> x(2 * 8), out(2 * 8, kSentinel);
    try {
        mha.forward({x.data(), {1, 2, 8}}, {x.data(), {1, 2, 8}}, {x.data(), {1, 2, 8}},
                    {out.data(), {1, 2, 8}});
        FAIL() << "forward without weights should throw";
    } catch (const attngen::Error &e) {
        EXPECT_EQ(e.status(), ATTNGEN_ERROR_INVALID_ARGUMENT) << e.what();
    }
    EXPECT_TRUE(Untouched("out", out));
}

TEST(MhaCpp, WrongInputShapesThrowShapeBeforeWriting) {
    MhaTester t;
    t.d_model(8).num_heads(2);
    attngen::MultiHeadAttention mha(CppConfig(8, 2));
    SetCppWeights(mha, t.MakeModel(), t.dims());
    std::vector<float> q(2 * 3 * 8), kv(2 * 4 * 8), out(2 * 3 * 8, kSentinel), w(2 * 2 * 3 * 4);
    struct Case {
        const char *name;
        std::vector<int64_t> q, k, v, out, weights;
    };
    const std::vector<Case> cases = {
        {"key", {2, 3, 8}, {1, 4, 8}, {2, 4, 8}, {2, 3, 8}, {}},    // batch differs
        {"value", {2, 3, 8}, {2, 4, 8}, {2, 3, 8}, {2, 3, 8}, {}},  // kv_len differs
        {"out", {2, 3, 8}, {2, 4, 8}, {2, 4, 8}, {2, 3, 7}, {}},    // feature size
        {"query", {2, 3, 6}, {2, 4, 8}, {2, 4, 8}, {2, 3, 8}, {}},  // not d_model
        {"weights", {2, 3, 8}, {2, 4, 8}, {2, 4, 8}, {2, 3, 8}, {2, 2, 4, 3}},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        try {
            attngen::TensorView<float> weights;
            if (!c.weights.empty()) weights = {w.data(), c.weights};
            mha.forward({q.data(), c.q}, {kv.data(), c.k}, {kv.data(), c.v}, {out.data(), c.out},
                        {}, weights);
            FAIL() << "expected attngen::Error";
        } catch (const attngen::Error &e) {
            EXPECT_EQ(e.status(), ATTNGEN_ERROR_SHAPE);
            EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
        }
        EXPECT_TRUE(Untouched("out", out));
    }
}

// The C API cannot see a mask part's extents: the C++ layer checks them against the call, where
// a part too small would have been read past its end.
TEST(MhaCpp, MaskPartsOfTheWrongShapeThrowShapeBeforeWriting) {
    MhaTester t;
    t.d_model(8).num_heads(2);
    attngen::MultiHeadAttention mha(CppConfig(8, 2));
    SetCppWeights(mha, t.MakeModel(), t.dims());
    // batch 2, q_len 3, kv_len 4, 2 heads
    std::vector<float> q(2 * 3 * 8), kv(2 * 4 * 8), out(2 * 3 * 8, kSentinel);
    const std::vector<int32_t> lengths = {4, 4, 4};
    const std::vector<uint8_t> bools(2 * 3 * 5, 0);
    const std::vector<float> additive(2 * 3 * 3 * 4, 0.0f);
    struct Case {
        const char *name;
        std::vector<int64_t> lengths, bools, additive;
    };
    const std::vector<Case> cases = {
        {"kv_lengths", {3}, {}, {}},            // not batch
        {"kv_lengths", {1}, {}, {}},            // not broadcast
        {"bool_mask", {}, {2, 3, 5}, {}},       // kv_len
        {"bool_mask", {}, {3, 3, 4}, {}},       // batch neither 1 nor 2
        {"bool_mask", {}, {3, 4}, {}},          // rank
        {"additive", {}, {}, {1, 3, 3, 4}},     // heads neither 1 nor 2
        {"additive", {}, {}, {2, 2, 2, 4}},     // q_len
        {"additive", {}, {}, {2, 1, 3, 4, 1}},  // rank
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(std::string(c.name) + " " + ::testing::PrintToString(c.lengths) +
                     ::testing::PrintToString(c.bools) + ::testing::PrintToString(c.additive));
        attngen::Mask mask;
        if (!c.lengths.empty()) mask.kv_lengths = {lengths.data(), c.lengths};
        if (!c.bools.empty()) mask.bool_mask = {bools.data(), c.bools};
        if (!c.additive.empty()) mask.additive = {additive.data(), c.additive};
        try {
            mha.forward({q.data(), {2, 3, 8}}, {kv.data(), {2, 4, 8}}, {kv.data(), {2, 4, 8}},
                        {out.data(), {2, 3, 8}}, mask);
            FAIL() << "expected attngen::Error";
        } catch (const attngen::Error &e) {
            EXPECT_EQ(e.status(), ATTNGEN_ERROR_SHAPE);
            EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
        }
        EXPECT_TRUE(Untouched("out", out));
    }
    // Parts of 1 where they broadcast are taken: batch for both masks, heads for the additive.
    for (const std::vector<int64_t> &additive_shape :
         {std::vector<int64_t>{1, 2, 3, 4}, {2, 1, 3, 4}, {1, 1, 3, 4}}) {
        SCOPED_TRACE(::testing::PrintToString(additive_shape));
        attngen::Mask mask;
        mask.kv_lengths = {lengths.data(), {2}};
        mask.bool_mask = {bools.data(), {1, 3, 4}};
        mask.additive = {additive.data(), additive_shape};
        std::fill(out.begin(), out.end(), kSentinel);
        mha.forward({q.data(), {2, 3, 8}}, {kv.data(), {2, 4, 8}}, {kv.data(), {2, 4, 8}},
                    {out.data(), {2, 3, 8}}, mask);
        EXPECT_FALSE(Untouched("out", out));
    }
}

TEST(MhaCpp, MoveTransfersTheHandle) {
    MhaTester t;
    t.d_model(8).num_heads(2).batch(1).q_len(2).kv_len(3).with_weights(false);
    attngen::MultiHeadAttention a(CppConfig(8, 2));
    attngen_mha *const handle = a.handle();
    attngen::MultiHeadAttention b(std::move(a));
    EXPECT_EQ(a.handle(), nullptr);  // NOLINT(bugprone-use-after-move): checking the move
    EXPECT_EQ(b.handle(), handle);
    attngen::MultiHeadAttention c(CppConfig(4, 1));
    c = std::move(b);
    EXPECT_EQ(c.handle(), handle);
    EXPECT_EQ(c.config().d_model, 8);

    const MhaTester::Model model = t.MakeModel();
    SetCppWeights(c, model, t.dims());
    MhaTester::Run r = t.Prepare(DefaultSeed());
    c.forward({r.query.data(), {1, 2, 8}}, {r.key_ptr, {1, 3, 8}}, {r.value_ptr, {1, 3, 8}},
              {r.out.data(), {1, 2, 8}});
    t.Check(model, r);
}

// "Biases are ignored (and may be empty) when the config has use_bias = false."
TEST(MhaCpp, BiasesGivenToABiaslessModuleAreIgnored) {
    MhaTester t;
    t.d_model(8).num_heads(2).use_bias(false).batch(1).q_len(3).kv_len(4).with_weights(false);
    const MhaTester::Model model = t.MakeModel();  // no biases
    attngen::MultiHeadAttention mha(CppConfig(8, 2, 0, 0, 0, false));
    const std::vector<float> bias(8, 100.0f);  // would dominate the output if applied
    mha.set_weights({model.wq.data(), {8, 8}}, {model.wk.data(), {8, 8}}, {model.wv.data(), {8, 8}},
                    {model.wo.data(), {8, 8}}, {bias.data(), {8}}, {bias.data(), {8}},
                    {bias.data(), {8}}, {bias.data(), {8}});
    MhaTester::Run r = t.Prepare(DefaultSeed());
    mha.forward({r.query.data(), {1, 3, 8}}, {r.key_ptr, {1, 4, 8}}, {r.value_ptr, {1, 4, 8}},
                {r.out.data(), {1, 3, 8}});
    t.Check(model, r);
}

TEST(MhaCpp, BiaslessModuleAcceptsEmptyBiases) {
    MhaTester t;
    t.d_model(8).num_heads(2).use_bias(false).batch(1).q_len(3).kv_len(4).with_weights(false);
    const MhaTester::Model model = t.MakeModel();
    attngen::MultiHeadAttention mha(CppConfig(8, 2, 0, 0, 0, false));
    mha.set_weights({model.wq.data(), {8, 8}}, {model.wk.data(), {8, 8}}, {model.wv.data(), {8, 8}},
                    {model.wo.data(), {8, 8}});
    MhaTester::Run r = t.Prepare(DefaultSeed());
    mha.forward({r.query.data(), {1, 3, 8}}, {r.key_ptr, {1, 4, 8}}, {r.value_ptr, {1, 4, 8}},
                {r.out.data(), {1, 3, 8}});
    t.Check(model, r);
}

}  // namespace
}  // namespace attngen_test
