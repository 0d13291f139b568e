// SdpaTester: builds one attngen_sdpa problem, runs it through the C API and checks out and
// weights against the float64 reference, e.g.
//
//   SdpaTester().batch(2).heads(3).q_len(5).kv_len(7).dk(9).dv(4)
//       .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT).bool_mask(1).additive(2, 1).with_weights(true)
//       .Test();
#ifndef ATTNGEN_TESTS_SDPA_TESTER_H
#define ATTNGEN_TESTS_SDPA_TESTER_H

#include "error_bounds.h"
#include "random_mask.h"
#include "reference.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace attngen_test {

class SdpaTester {
  public:
    SdpaTester &batch(int v) { return shape_.batch = v, *this; }
    SdpaTester &heads(int v) { return shape_.heads = v, *this; }
    // Grouped key/value heads (attngen_sdpa_gqa); 0 = heads (attngen_sdpa).
    SdpaTester &kv_heads(int v) { return shape_.kv_heads = v, *this; }
    SdpaTester &q_len(int v) { return shape_.q_len = v, *this; }
    SdpaTester &kv_len(int v) { return shape_.kv_len = v, *this; }
    SdpaTester &dk(int v) { return shape_.dk = v, *this; }
    SdpaTester &dv(int v) { return shape_.dv = v, *this; }

    SdpaTester &causal(attngen_causal c) { return mask_.causal = c, *this; }
    // One valid length per batch item; empty = no key padding.
    SdpaTester &kv_lengths(std::vector<int32_t> lengths) {
        return mask_.kv_lengths = std::move(lengths), *this;
    }
    // A random boolean mask of mask_batch (1 or batch) items, each entry masked with
    // probability density; mask_batch 0 = none.
    SdpaTester &bool_mask(int mask_batch, double density = 0.3) {
        mask_.bool_mask_batch = mask_batch;
        mask_.bool_density = density;
        return *this;
    }
    // An explicit boolean mask [mask_batch, q_len, kv_len].
    SdpaTester &bool_mask_values(int mask_batch, std::vector<uint8_t> values) {
        mask_.bool_mask_batch = mask_batch;
        mask_.bool_values = std::move(values);
        return *this;
    }
    // A random additive mask [add_batch, add_heads, q_len, kv_len] in [-2, 2), an entry being
    // -inf with probability neg_inf_fraction; add_batch 0 = none.
    SdpaTester &additive(int add_batch, int add_heads, double neg_inf_fraction = 0.1) {
        mask_.additive_batch = add_batch;
        mask_.additive_heads = add_heads;
        mask_.neg_inf_fraction = neg_inf_fraction;
        return *this;
    }
    SdpaTester &additive_values(int add_batch, int add_heads, std::vector<float> values) {
        mask_.additive_batch = add_batch;
        mask_.additive_heads = add_heads;
        mask_.additive_values = std::move(values);
        return *this;
    }
    SdpaTester &scale(float s) { return scale_ = s, *this; }
    SdpaTester &with_weights(bool w) { return with_weights_ = w, *this; }
    // A GPU runs the problem through attngen_sdpa_device on attngen_device_alloc memory.
    SdpaTester &device(attngen_device d) { return device_ = d, *this; }
    SdpaTester &seed(uint32_t s) { return seed_ = s, *this; }
    // Range of the random q and k entries (v keeps its own): large ranges give large logits.
    SdpaTester &qk_range(float lo, float hi) { return qk_lo_ = lo, qk_hi_ = hi, *this; }
    SdpaTester &v_range(float lo, float hi) { return v_lo_ = lo, v_hi_ = hi, *this; }
    // Explicit inputs instead of random ones.
    SdpaTester &q_values(std::vector<float> x) { return q_ = std::move(x), *this; }
    SdpaTester &k_values(std::vector<float> x) { return k_ = std::move(x), *this; }
    SdpaTester &v_values(std::vector<float> x) { return v_ = std::move(x), *this; }

    // The inputs, mask and results of one run. mask points into the run's own vectors, so a run
    // moves but never copies.
    struct Run {
        Run() = default;
        Run(Run &&) = default;
        Run &operator=(Run &&) = default;
        Run(const Run &) = delete;
        Run &operator=(const Run &) = delete;

        std::vector<float> q, k, v;
        OwnedMask masks;                  // the mask's buffers and the attngen_mask over them
        std::vector<float> out, weights;  // weights empty unless with_weights
        attngen_status status = ATTNGEN_OK;
    };

    // Builds the inputs, deterministic for a seed. out and weights start as NaN so that any
    // element the kernel leaves unwritten fails the comparison.
    Run Prepare() const {
        Run r;
        Rng rng(seed_);
        const attngen_ref::SdpaShape &s = shape_;
        const size_t bh = size_t(s.batch) * s.heads, bkv = size_t(s.batch) * s.key_heads();
        r.q = q_.empty() ? rng.Uniform(bh * s.q_len * s.dk, qk_lo_, qk_hi_) : q_;
        r.k = k_.empty() ? rng.Uniform(bkv * s.kv_len * s.dk, qk_lo_, qk_hi_) : k_;
        r.v = v_.empty() ? rng.Uniform(bkv * s.kv_len * s.dv, v_lo_, v_hi_) : v_;

        r.masks = MakeMask(mask_, s.q_len, s.kv_len, rng);

        r.out = NaNs(bh * s.q_len * s.dv);
        if (with_weights_) r.weights = NaNs(bh * s.q_len * s.kv_len);
        return r;
    }

    void Call(Run &r) const {
        if (device_ != ATTNGEN_DEVICE_CPU) return CallOnDevice(r);
        const attngen_ref::SdpaShape &s = shape_;
        float *weights = with_weights_ ? r.weights.data() : nullptr;
        if (s.kv_heads == 0) {
            r.status =
                attngen_sdpa(s.batch, s.heads, s.q_len, s.kv_len, s.dk, s.dv, r.q.data(),
                             r.k.data(), r.v.data(), &r.masks.mask, scale_, r.out.data(), weights);
        } else {
            r.status = attngen_sdpa_gqa(s.batch, s.heads, s.kv_heads, s.q_len, s.kv_len, s.dk, s.dv,
                                        r.q.data(), r.k.data(), r.v.data(), &r.masks.mask, scale_,
                                        r.out.data(), weights);
        }
    }

    // Uploads the inputs (and the outputs' NaNs), runs attngen_sdpa_device and downloads the
    // outputs when it succeeded.
    void CallOnDevice(Run &r) const {
        const attngen_ref::SdpaShape &s = shape_;
        struct Memory {
            attngen_device device;
            std::vector<uint64_t> addresses;
            ~Memory() {
                for (uint64_t a : addresses) attngen_device_free(device, a);
            }
            uint64_t Upload(const std::vector<float> &host, attngen_status *status) {
                uint64_t address = 0;
                if (*status == ATTNGEN_OK) {
                    *status = attngen_device_alloc(device, host.size() * sizeof(float), &address);
                }
                if (*status != ATTNGEN_OK) return 0;
                addresses.push_back(address);
                *status = attngen_device_upload(device, address, host.data(),
                                                host.size() * sizeof(float));
                return address;
            }
        } memory{device_, {}};
        attngen_status status = ATTNGEN_OK;
        const uint64_t q = memory.Upload(r.q, &status), k = memory.Upload(r.k, &status),
                       v = memory.Upload(r.v, &status), out = memory.Upload(r.out, &status);
        const uint64_t weights = with_weights_ ? memory.Upload(r.weights, &status) : 0;
        if (status != ATTNGEN_OK) {
            r.status = status;
            return;
        }
        r.status =
            attngen_sdpa_device(device_, nullptr, s.batch, s.heads, s.key_heads(), s.q_len,
                                s.kv_len, s.dk, s.dv, q, k, v, &r.masks.mask, scale_, out, weights);
        if (r.status != ATTNGEN_OK) return;
        EXPECT_EQ(attngen_device_download(device_, r.out.data(), out, r.out.size() * 4),
                  ATTNGEN_OK);
        if (with_weights_) {
            EXPECT_EQ(
                attngen_device_download(device_, r.weights.data(), weights, r.weights.size() * 4),
                ATTNGEN_OK);
        }
    }

    Run Execute() const {
        Run r = Prepare();
        Call(r);
        return r;
    }

    // The reference result for a run's inputs, and the rounding bound of each element.
    struct Expected {
        attngen_ref::SdpaResult ref;
        AttentionBounds bounds;
    };

    Expected Expectation(const Run &r) const {
        const attngen_ref::SdpaShape &s = shape_;
        Expected e;
        e.ref = attngen_ref::sdpa(s, r.q.data(), r.k.data(), r.v.data(), &r.masks.mask, scale_);
        const std::vector<double> q(r.q.begin(), r.q.end()), k(r.k.begin(), r.k.end()),
            v(r.v.begin(), r.v.end());
        const double applied_scale =
            scale_ != 0.0f ? double(scale_) : 1.0 / std::sqrt(double(s.dk));
        e.bounds = AttentionErrorBounds(s, q.data(), k.data(), v.data(), nullptr, nullptr, nullptr,
                                        applied_scale, e.ref);
        return e;
    }

    // Compares a successful run's out (and weights, when requested) with the reference.
    void Check(const Run &r) const {
        const attngen_ref::SdpaShape &s = shape_;
        const Expected e = Expectation(r);
        EXPECT_TRUE(AllClose("out", {s.batch, s.heads, s.q_len, s.dv}, e.ref.out, r.out.data(),
                             {e.bounds.out, kRelTol, kReason}));
        if (with_weights_) {
            EXPECT_TRUE(AllClose("weights", {s.batch, s.heads, s.q_len, s.kv_len}, e.ref.weights,
                                 r.weights.data(), {e.bounds.weights, kRelTol, kReason}));
            EXPECT_TRUE(RowsSumToOneOrZero(r.weights, e.ref));
        }
    }

    // Two successful runs of the same problem (other options, another code path) agree within
    // the sum of their allowed errors.
    ::testing::AssertionResult OutputsAgree(const Run &a, const Run &b) const {
        const attngen_ref::SdpaShape &s = shape_;
        const Expected e = Expectation(a);
        std::vector<double> twice(e.bounds.out);
        for (double &x : twice) x *= 2;
        return AllClose("out of the second run vs the first", {s.batch, s.heads, s.q_len, s.dv},
                        std::vector<double>(a.out.begin(), a.out.end()), b.out.data(),
                        {twice, 2 * kRelTol, "both runs within their bounds of the reference"});
    }

    void Test() const {
        SCOPED_TRACE(Describe());
        Run r = Prepare();
        const Run pristine = Prepare();
        Call(r);
        ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
        EXPECT_STREQ(attngen_last_error(), "") << "a successful call leaves no error behind";
        EXPECT_TRUE(BitIdentical("q (input)", r.q, pristine.q));
        EXPECT_TRUE(BitIdentical("k (input)", r.k, pristine.k));
        EXPECT_TRUE(BitIdentical("v (input)", r.v, pristine.v));
        EXPECT_TRUE(BitIdentical("additive (input)", r.masks.additive, pristine.masks.additive));
        EXPECT_EQ(r.masks.bool_mask, pristine.masks.bool_mask) << "the kernel wrote into its input";
        Check(r);
    }

    std::string Describe() const {
        std::ostringstream d;
        d << "SdpaTester: seed " << seed_ << ", batch " << shape_.batch << ", heads "
          << shape_.heads << ", q_len " << shape_.q_len << ", kv_len " << shape_.kv_len << ", dk "
          << shape_.dk << ", dv " << shape_.dv << ", kv_heads " << shape_.kv_heads << ", causal "
          << int(mask_.causal) << ", kv_lengths "
          << (mask_.kv_lengths.empty() ? "none" : ::testing::PrintToString(mask_.kv_lengths))
          << ", bool_mask_batch " << mask_.bool_mask_batch << ", additive " << mask_.additive_batch
          << "x" << mask_.additive_heads << ", scale " << scale_ << ", weights " << with_weights_;
        return d.str();
    }

  private:
    static constexpr const char *kReason =
        "atol: fp32 rounding bound of this element propagated from the input magnitudes "
        "(error_bounds.h), 0 where masked; rtol: fast exp and fp32 sums in any order";

    // Each row of weights sums to 1, or is all 0 when the reference masks the whole row. The
    // kernel normalizes by its own fp32 sum, so only rounding of kv_len terms separates the
    // sum from 1; kRelTol leaves room for rescaled partial sums of blocked softmax.
    ::testing::AssertionResult RowsSumToOneOrZero(const std::vector<float> &w,
                                                  const attngen_ref::SdpaResult &ref) const {
        const int n = shape_.kv_len;
        for (size_t row = 0; row < ref.row_fully_masked.size(); ++row) {
            double sum = 0.0;
            for (int j = 0; j < n; ++j) sum += double(w[row * n + j]);
            const double expected = ref.row_fully_masked[row] ? 0.0 : 1.0;
            const double allowed = ref.row_fully_masked[row] ? 0.0 : kRelTol + SumErrorBound(n, 1);
            if (!(std::fabs(sum - expected) <= allowed)) {
                return ::testing::AssertionFailure()
                       << "weights row " << row << " sums to " << sum << ", expected " << expected
                       << " within " << allowed;
            }
        }
        return ::testing::AssertionSuccess();
    }

    attngen_ref::SdpaShape shape_;
    attngen_device device_ = ATTNGEN_DEVICE_CPU;
    MaskSpec mask_;
    float scale_ = 0.0f;
    bool with_weights_ = true;
    uint32_t seed_ = DefaultSeed();
    float qk_lo_ = -1.0f, qk_hi_ = 1.0f;
    float v_lo_ = -1.0f, v_hi_ = 1.0f;
    std::vector<float> q_, k_, v_;
};

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_SDPA_TESTER_H
