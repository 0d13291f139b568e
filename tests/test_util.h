// Shared helpers of the attngen tests: reproducible random data, the tolerance policy and a
// comparison that explains its verdict.
#ifndef ATTNGEN_TESTS_TEST_UTIL_H
#define ATTNGEN_TESTS_TEST_UTIL_H

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace attngen_test {

// ---------------------------------------------------------------------------------------------
// Tolerance policy: float32 kernels with fp32 accumulation against a float64 reference.
//
// Every comparison is |got - ref| <= atol + rtol * |ref|, where atol is an element's own
// rounding bound: the worst-case float32 error of the sums that produce it, propagated from
// the magnitudes of the actual inputs (error_bounds.h). A bound from the data itself stays
// tight for small values and still holds for huge logits or long reductions.

// Unit roundoff of float32 (2^-24): each float operation is exact up to a factor (1 +- u).
constexpr double kFloatUnitRoundoff = 0x1p-24;

// rtol of every comparison. The kernels use a fast exp (~1e-6 relative) and may sum fp32 in any
// order or blocking; 2e-4 (about 1700 float ulps) is far above honest rounding of the shapes
// tested here, yet any indexing, masking or scaling mistake moves results by more than 1e-2.
constexpr double kRelTol = 2e-4;

// Relative error allowed for the kernels' exp. The design targets ~1e-6; Halide's fast_exp is
// documented as exact up to the last 5 mantissa bits (2^-18 ~ 3.8e-6); 8e-6 is twice that.
constexpr double kFastExpRelError = 8e-6;

// Absolute floor for attention weights. They are probabilities in [0, 1]; an error below 1e-7
// (about one float ulp of 1.0) is invisible in p·v and lets kernels flush exp() results that
// underflow.
constexpr double kProbabilityFloor = 1e-7;

// Worst-case error of a float32 sum of n terms of total magnitude abs_sum, in any order.
// For n <= 64 this is Higham's deterministic gamma_n = n*u. Beyond that the deterministic bound
// grows far past anything observed, so we use Higham & Mary's probabilistic bound
// lambda*sqrt(n)*u with lambda = 8: it fails with probability below 2*exp(-lambda^2/2) ~ 3e-14
// per element.
inline double SumErrorBound(int64_t n, double abs_sum) {
    const double terms = std::min(double(n), 8.0 * std::sqrt(double(n)));
    return terms * kFloatUnitRoundoff * abs_sum;
}

// Written into output buffers to detect writes that should not happen (error paths).
constexpr float kSentinel = 12345.0f;

// ---------------------------------------------------------------------------------------------
// Reproducible random data.

// The seed of every tester unless a test picks one; ATTNGEN_TEST_SEED overrides it so a run can
// explore other data. The seed is always printed with a failure.
inline uint32_t DefaultSeed() {
    if (const char *env = std::getenv("ATTNGEN_TEST_SEED")) {
        return static_cast<uint32_t>(std::strtoul(env, nullptr, 0));
    }
    return 20240611u;
}

// std::mt19937 is fully specified, but the standard distributions are not: mapping the raw bits
// ourselves gives the same data with every standard library.
class Rng {
  public:
    explicit Rng(uint32_t seed) : gen_(seed) {}

    // Uniform in [lo, hi] (the top may be reached by rounding to float).
    float Uniform(float lo, float hi) {
        const double unit = double(gen_() >> 8) * 0x1p-24;  // 24 bits fit a float exactly
        return float(lo + (double(hi) - double(lo)) * unit);
    }
    std::vector<float> Uniform(size_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (float &x : v) x = Uniform(lo, hi);
        return v;
    }
    bool Bernoulli(double p) { return double(gen_() >> 8) * 0x1p-24 < p; }

  private:
    std::mt19937 gen_;
};

// ---------------------------------------------------------------------------------------------
// Comparison.

inline std::string Coordinates(const std::vector<int64_t> &shape, size_t flat) {
    std::vector<int64_t> c(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        c[d] = int64_t(flat % size_t(shape[d]));
        flat /= size_t(shape[d]);
    }
    std::ostringstream s;
    s << "[";
    for (size_t d = 0; d < c.size(); ++d) s << (d ? ", " : "") << c[d];
    s << "]";
    return s.str();
}

inline size_t Elements(const std::vector<int64_t> &shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    return n;
}

// |got - expected| <= atol[i] + rtol*|expected| for every element, where atol holds one value
// per element or a single value for all. NaN or inf in got fails unless expected is the same.
// On failure the message names the worst element (largest error over allowance) by its
// coordinates in shape, with expected, got, the allowance and why it is what it is.
struct Tolerance {
    std::vector<double> atol;
    double rtol = kRelTol;
    std::string reason;
};

inline ::testing::AssertionResult AllClose(const std::string &what,
                                           const std::vector<int64_t> &shape,
                                           const std::vector<double> &expected, const float *got,
                                           const Tolerance &tol) {
    const size_t n = Elements(shape);
    if (expected.size() != n || (tol.atol.size() != 1 && tol.atol.size() != n)) {
        return ::testing::AssertionFailure()
               << what << ": test bug, sizes disagree (shape " << n << ", expected "
               << expected.size() << ", atol " << tol.atol.size() << ")";
    }
    size_t failures = 0, worst = 0;
    double worst_ratio = -1.0;
    for (size_t i = 0; i < n; ++i) {
        const double e = expected[i], g = double(got[i]);
        const double allowed = tol.atol[tol.atol.size() == 1 ? 0 : i] + tol.rtol * std::fabs(e);
        const double err = std::fabs(g - e);
        const bool same_special = std::isinf(e) && g == e;
        if (same_special || err <= allowed) continue;
        ++failures;
        // NaN compares false everywhere: rank it worst so it is the one reported.
        const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity()
                                             : err / std::max(allowed, 1e-300);
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    if (failures == 0) return ::testing::AssertionSuccess();
    const double e = expected[worst];
    const double allowed = tol.atol[tol.atol.size() == 1 ? 0 : worst] + tol.rtol * std::fabs(e);
    return ::testing::AssertionFailure()
           << what << ": " << failures << " of " << n << " elements out of tolerance; worst at "
           << Coordinates(shape, worst) << " (flat " << worst << "): expected "
           << ::testing::PrintToString(e) << ", got " << ::testing::PrintToString(got[worst])
           << ", |error| " << std::fabs(double(got[worst]) - e) << " > allowed " << allowed
           << " (atol " << tol.atol[tol.atol.size() == 1 ? 0 : worst] << " + rtol " << tol.rtol
           << " * |expected|; " << tol.reason << ")";
}

// Every element of buf still holds kSentinel (no write happened).
inline ::testing::AssertionResult Untouched(const std::string &what,
                                            const std::vector<float> &buf) {
    for (size_t i = 0; i < buf.size(); ++i) {
        if (std::memcmp(&buf[i], &kSentinel, sizeof(float)) != 0) {
            return ::testing::AssertionFailure()
                   << what << "[" << i << "] was written (" << buf[i] << ") on an error path";
        }
    }
    return ::testing::AssertionSuccess();
}

// Bitwise equality, which also treats two identical NaNs as equal.
inline ::testing::AssertionResult BitIdentical(const std::string &what, const std::vector<float> &a,
                                               const std::vector<float> &b) {
    if (a.size() != b.size()) {
        return ::testing::AssertionFailure()
               << what << ": sizes " << a.size() << " vs " << b.size();
    }
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            return ::testing::AssertionFailure()
                   << what << "[" << i << "]: " << ::testing::PrintToString(a[i]) << " vs "
                   << ::testing::PrintToString(b[i]);
        }
    }
    return ::testing::AssertionSuccess();
}

inline std::vector<float> NaNs(size_t n) {
    return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// Owns an attngen_mha handle.
struct MhaDeleter {
    void operator()(attngen_mha *m) const { attngen_mha_destroy(m); }
};
using MhaHandle = std::unique_ptr<attngen_mha, MhaDeleter>;

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_TEST_UTIL_H
