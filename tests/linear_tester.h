// LinearTester: one attngen_linear call checked against the float64 reference, e.g.
//
//   LinearTester().rows(5).in_features(7).out_features(17).use_bias(true).Test();
#ifndef ATTNGEN_TESTS_LINEAR_TESTER_H
#define ATTNGEN_TESTS_LINEAR_TESTER_H

#include "error_bounds.h"
#include "reference.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace attngen_test {

class LinearTester {
  public:
    LinearTester &rows(int v) { return rows_ = v, *this; }
    LinearTester &in_features(int v) { return in_ = v, *this; }
    LinearTester &out_features(int v) { return out_ = v, *this; }
    LinearTester &use_bias(bool b) { return use_bias_ = b, *this; }
    LinearTester &seed(uint32_t s) { return seed_ = s, *this; }

    void Test() const {
        SCOPED_TRACE(Describe());
        Rng rng(seed_);
        const float bound = 1.0f / std::sqrt(float(in_));  // torch.nn.Linear's initialization
        const std::vector<float> x = rng.Uniform(size_t(rows_) * in_, -1.0f, 1.0f);
        const std::vector<float> w = rng.Uniform(size_t(out_) * in_, -bound, bound);
        const std::vector<float> bias = rng.Uniform(size_t(out_), -bound, bound);
        const float *b = use_bias_ ? bias.data() : nullptr;

        std::vector<float> y = NaNs(size_t(rows_) * out_);
        ASSERT_EQ(attngen_linear(rows_, in_, out_, x.data(), w.data(), b, y.data()), ATTNGEN_OK)
            << attngen_last_error();
        EXPECT_STREQ(attngen_last_error(), "");

        const std::vector<double> ref =
            attngen_ref::linear(rows_, in_, out_, x.data(), w.data(), b);
        const std::vector<double> atol = LinearErrorBounds(rows_, in_, out_, x.data(), w.data(), b);
        EXPECT_TRUE(AllClose("y", {rows_, out_}, ref, y.data(),
                             {atol, kRelTol,
                              "atol: fp32 rounding bound of in_features products and the bias "
                              "(SumErrorBound); rtol: fp32 sums in any order"}));
    }

    std::string Describe() const {
        std::ostringstream s;
        s << "LinearTester: seed " << seed_ << ", rows " << rows_ << ", in " << in_ << ", out "
          << out_ << ", bias " << use_bias_;
        return s.str();
    }

  private:
    int rows_ = 1, in_ = 1, out_ = 1;
    bool use_bias_ = true;
    uint32_t seed_ = DefaultSeed();
};

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_LINEAR_TESTER_H
