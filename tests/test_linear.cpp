// attngen_linear: the projection stage on its own, y = x wᵀ + bias.
#include "linear_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>
#include <attngen/attngen.hpp>

#include <string>
#include <tuple>
#include <vector>

namespace attngen_test {
namespace {

using LinearShape = std::tuple<int, int, int, bool>;  // rows, in, out, bias

class LinearOddShapes : public ::testing::TestWithParam<LinearShape> {};

TEST_P(LinearOddShapes, MatchesReference) {
    const auto [rows, in, out, bias] = GetParam();
    LinearTester().rows(rows).in_features(in).out_features(out).use_bias(bias).Test();
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearOddShapes,
    ::testing::Combine(::testing::Values(1, 5, 33), ::testing::Values(1, 7, 64, 100),
                       ::testing::Values(1, 9, 16, 17, 130), ::testing::Bool()),
    [](const ::testing::TestParamInfo<LinearShape> &info) {
        const LinearShape &s = info.param;
        return "rows" + std::to_string(std::get<0>(s)) + "_in" + std::to_string(std::get<1>(s)) +
               "_out" + std::to_string(std::get<2>(s)) + (std::get<3>(s) ? "_bias" : "_nobias");
    });

// Inputs up to 640 KiB make panels of output features the parallel tasks; larger ones, blocks
// of rows (schedule_projection_cpu). Rows at both sides of that edge, with row and feature
// tails: 1280 x 128 floats is 655,360 bytes, the last size with panels.
TEST(Linear, BothParallelSchedules) {
    for (int rows : {1279, 1280, 1281, 1377}) {
        SCOPED_TRACE(rows);
        LinearTester().rows(rows).in_features(128).out_features(130).use_bias(true).Test();
    }
}

// In row blocks, the parallel tasks are (row block, group of 4 panels of output features):
// outputs at either side of one group of 4 x 64 and across several, rows at either side of the
// edges of 128-row blocks.
TEST(Linear, RowBlocksAcrossOutputGroups) {
    for (int out : {255, 257, 520}) {
        for (int rows : {1281, 1407, 1409}) {
            SCOPED_TRACE(std::to_string(rows) + " rows, " + std::to_string(out) + " outputs");
            LinearTester().rows(rows).in_features(128).out_features(out).use_bias(true).Test();
        }
    }
}

// 8 rows split the reduction over tasks (decoding); from 9 rows on, inputs of up to 1024
// features keep each register tile's sum in registers (DirectPath, where the tile spans a
// weight panel), wider ones sum blocks of features into a buffer.
TEST(Linear, AcrossTheDirectPathsEdges) {
    for (int rows : {8, 9, 70}) {
        for (int in : {1023, 1024, 1025}) {
            SCOPED_TRACE(std::to_string(rows) + " rows, " + std::to_string(in) + " inputs");
            LinearTester().rows(rows).in_features(in).out_features(129).use_bias(true).Test();
        }
    }
}

TEST(Linear, LargeReduction) {
    LinearTester().rows(17).in_features(768).out_features(320).use_bias(true).Test();
}

// Small integers make every product and sum exact in float: the result must be exact too.
TEST(Linear, ExactOnSmallIntegers) {
    const std::vector<float> x = {1, 2,  //
                                  -3, 4};
    const std::vector<float> w = {1, 0,  // out 0 reads x[0]
                                  0, 1,  // out 1 reads x[1]
                                  2, -1};
    const std::vector<float> bias = {0.5f, 0, -1};
    std::vector<float> y = NaNs(2 * 3);
    ASSERT_EQ(attngen_linear(2, 2, 3, x.data(), w.data(), bias.data(), y.data()), ATTNGEN_OK)
        << attngen_last_error();
    EXPECT_EQ(y, (std::vector<float>{1.5f, 2, -1, -2.5f, 4, -11}));

    y = NaNs(2 * 3);
    ASSERT_EQ(attngen_linear(2, 2, 3, x.data(), w.data(), nullptr, y.data()), ATTNGEN_OK)
        << attngen_last_error();
    EXPECT_EQ(y, (std::vector<float>{1, 2, 0, -3, 4, -10}));
}

// w is [out, in] as torch.nn.Linear stores it, not [in, out]: a transposed read changes this.
TEST(Linear, WeightLayoutIsOutByIn) {
    const std::vector<float> x = {1, 10, 100};        // [1, 3]
    const std::vector<float> w = {1, 0, 0, 0, 1, 0};  // [2, 3]: picks x[0], x[1]
    std::vector<float> y = NaNs(2);
    ASSERT_EQ(attngen_linear(1, 3, 2, x.data(), w.data(), nullptr, y.data()), ATTNGEN_OK)
        << attngen_last_error();
    EXPECT_EQ(y, (std::vector<float>{1, 10}));
}

TEST(LinearCpp, MatchesTheCApi) {
    Rng rng(DefaultSeed());
    const std::vector<float> x = rng.Uniform(5 * 7, -1, 1), w = rng.Uniform(9 * 7, -1, 1),
                             b = rng.Uniform(9, -1, 1);
    std::vector<float> y_c = NaNs(5 * 9), y_cpp = NaNs(5 * 9);
    ASSERT_EQ(attngen_linear(5, 7, 9, x.data(), w.data(), b.data(), y_c.data()), ATTNGEN_OK);
    attngen::linear({x.data(), {5, 7}}, {w.data(), {9, 7}}, {b.data(), {9}},
                    {y_cpp.data(), {5, 9}});
    EXPECT_TRUE(BitIdentical("y", y_c, y_cpp));
}

TEST(LinearCpp, ShapeMismatchThrowsBeforeWriting) {
    const std::vector<float> x(5 * 7), w(9 * 6);
    std::vector<float> y(5 * 9, kSentinel);
    try {
        attngen::linear({x.data(), {5, 7}}, {w.data(), {9, 6}}, {}, {y.data(), {5, 9}});
        FAIL() << "w [9, 6] does not fit x [5, 7]";
    } catch (const attngen::Error &e) {
        EXPECT_EQ(e.status(), ATTNGEN_ERROR_SHAPE);
        EXPECT_NE(std::string(e.what()).find("w: "), std::string::npos) << e.what();
    }
    EXPECT_TRUE(Untouched("y", y));
}

}  // namespace
}  // namespace attngen_test
