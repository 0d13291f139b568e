// MhaTester: builds one multi-head attention module and one forward call, runs them through the
// C API (create, set_weights, forward) and checks out and weights against the float64
// reference, e.g.
//
//   MhaTester().d_model(16).num_heads(3).head_dim(5).kdim(7).batch(2).q_len(4).kv_len(6)
//       .kv_lengths({6, 2}).with_weights(true).Test();
#ifndef ATTNGEN_TESTS_MHA_TESTER_H
#define ATTNGEN_TESTS_MHA_TESTER_H

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

class MhaTester {
  public:
    MhaTester &d_model(int v) { return config_.d_model = v, *this; }
    MhaTester &num_heads(int v) { return config_.num_heads = v, *this; }
    MhaTester &kdim(int v) { return config_.kdim = v, *this; }
    MhaTester &vdim(int v) { return config_.vdim = v, *this; }
    MhaTester &head_dim(int v) { return config_.head_dim = v, *this; }
    MhaTester &use_bias(bool b) { return config_.use_bias = b ? 1 : 0, *this; }
    MhaTester &device(attngen_device d) { return config_.device = d, *this; }
    MhaTester &num_kv_heads(int v) { return config_.num_kv_heads = v, *this; }
    MhaTester &v_head_dim(int v) { return config_.v_head_dim = v, *this; }
    MhaTester &precision(attngen_precision p) { return config_.precision = p, *this; }
    MhaTester &rope(attngen_rope r, int rotary_dim = 0, float theta = 0.0f) {
        config_.rope = r;
        config_.rotary_dim = rotary_dim;
        config_.rope_theta = theta;
        return *this;
    }

    MhaTester &batch(int v) { return batch_ = v, *this; }
    MhaTester &q_len(int v) { return q_len_ = v, *this; }
    MhaTester &kv_len(int v) { return kv_len_ = v, *this; }

    MhaTester &causal(attngen_causal c) { return mask_.causal = c, *this; }
    MhaTester &kv_lengths(std::vector<int32_t> lengths) {
        return mask_.kv_lengths = std::move(lengths), *this;
    }
    // Random boolean mask of mask_batch (1 or batch) items; 0 = none.
    MhaTester &bool_mask(int mask_batch, double density = 0.3) {
        return mask_.bool_mask_batch = mask_batch, mask_.bool_density = density, *this;
    }
    // Random additive mask [add_batch, add_heads, q_len, kv_len] in [-2, 2) with some -inf.
    MhaTester &additive(int add_batch, int add_heads, double neg_inf_fraction = 0.1) {
        mask_.additive_batch = add_batch;
        mask_.additive_heads = add_heads;
        mask_.neg_inf_fraction = neg_inf_fraction;
        return *this;
    }
    MhaTester &with_weights(bool w) { return with_weights_ = w, *this; }
    // Inputs uniform in +-scale instead of +-1: large scales give huge logits.
    MhaTester &input_scale(float s) { return input_scale_ = s, *this; }
    MhaTester &seed(uint32_t s) { return seed_ = s, *this; }
    // A negative control of the comparison: the reference with the scores scaled to nothing
    // (every visible logit its additive mask alone, a flat softmax) must lie outside the bound
    // somewhere, so that a kernel whose softmax came out flat fails the case. At inputs of +-1
    // and torch's weights the logits are a few tenths and the bound does not see that: an AMX
    // exp that gave every probability 1 passed every bfloat16 case but those of huge logits.
    MhaTester &expect_softmax_matters(bool on) { return softmax_matters_ = on, *this; }
    // key and value are the same tensor (the tutorials' k = v); needs kdim == vdim.
    MhaTester &same_key_value(bool s) { return same_key_value_ = s, *this; }
    // Self-attention: query, key and value are one tensor; needs kv_len == q_len and
    // kdim == vdim == d_model.
    MhaTester &self_attention(bool s) { return self_attention_ = s, *this; }

    attngen_mha_config config() const { return config_; }
    float input_scale() const { return input_scale_; }
    bool softmax_matters() const { return softmax_matters_; }
    // The reference's scale for expect_softmax_matters: every visible logit its additive mask
    // alone, a flat softmax.
    static constexpr double kFlatSoftmaxScale = 1e-30;

    // expect_softmax_matters' check, for this tester and the decoding one: the reference of the
    // same call with a flat softmax lies outside `bound` around `ref` at some output element.
    static ::testing::AssertionResult FlatSoftmaxOutsideBound(
        const attngen_mha_config &config, const attngen_ref::MhaWeights &w, int batch, int q_len,
        int kv_len, const float *query, const float *key, const float *value,
        const attngen_mask *mask, const attngen_ref::MhaResult &ref,
        const std::vector<double> &bound) {
        const attngen_ref::MhaResult flat = attngen_ref::mha(config, w, batch, q_len, kv_len, query,
                                                             key, value, mask, kFlatSoftmaxScale);
        for (size_t e = 0; e < ref.out.size(); ++e) {
            const double allowed = bound[e] + kRelTol * std::fabs(ref.out[e]);
            if (std::fabs(flat.out[e] - ref.out[e]) > allowed) {
                return ::testing::AssertionSuccess();
            }
        }
        return ::testing::AssertionFailure()
               << "a flat softmax passes this case's bound: raise input_scale";
    }
    attngen_ref::MhaDims dims() const { return attngen_ref::resolve(config_); }

    // Weights of the module in torch.nn.Linear layout, drawn as torch initializes them
    // (uniform in +-1/sqrt(in_features)), with nonzero biases so that they show in results.
    struct Model {
        attngen_mha_config config{};
        std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo;
        attngen_ref::MhaWeights ref() const {
            attngen_ref::MhaWeights w;
            w.wq = wq.data(), w.wk = wk.data(), w.wv = wv.data(), w.wo = wo.data();
            if (config.use_bias) {
                w.bq = bq.data(), w.bk = bk.data(), w.bv = bv.data(), w.bo = bo.data();
            }
            return w;
        }
        attngen_status SetWeights(attngen_mha *m) const {
            const bool b = config.use_bias != 0;
            return attngen_mha_set_weights(m, wq.data(), wk.data(), wv.data(), wo.data(),
                                           b ? bq.data() : nullptr, b ? bk.data() : nullptr,
                                           b ? bv.data() : nullptr, b ? bo.data() : nullptr);
        }
    };

    Model MakeModel() const {
        Model m;
        m.config = config_;
        const attngen_ref::MhaDims d = dims();
        Rng rng(seed_ ^ 0x5eed0001u);  // independent of the inputs' stream
        auto init = [&](size_t out, int in) {
            const float bound = 1.0f / std::sqrt(float(in));
            return rng.Uniform(out * size_t(in), -bound, bound);
        };
        m.wq = init(d.inner(), d.d_model);
        m.wk = init(d.kv_inner(), d.kdim);
        m.wv = init(d.v_inner(), d.vdim);
        m.wo = init(d.d_model, d.out_inner());
        if (d.use_bias) {
            m.bq = rng.Uniform(d.inner(), -0.5f, 0.5f);
            m.bk = rng.Uniform(d.kv_inner(), -0.5f, 0.5f);
            m.bv = rng.Uniform(d.v_inner(), -0.5f, 0.5f);
            m.bo = rng.Uniform(d.d_model, -0.5f, 0.5f);
        }
        return m;
    }

    // A handle of this configuration holding the model's weights; null, with the failure
    // recorded, where either call fails.
    MhaHandle Open(const Model &model) const {
        attngen_mha *raw = nullptr;
        if (attngen_mha_create(&config_, &raw) != ATTNGEN_OK) {
            ADD_FAILURE() << "attngen_mha_create: " << attngen_last_error();
            return nullptr;
        }
        MhaHandle handle(raw);
        if (model.SetWeights(raw) != ATTNGEN_OK) {
            ADD_FAILURE() << "attngen_mha_set_weights: " << attngen_last_error();
            return nullptr;
        }
        return handle;
    }

    // Inputs, mask and outputs of one forward call. mask points into the run's own vectors, so
    // a run moves but never copies.
    struct Run {
        Run() = default;
        Run(Run &&) = default;
        Run &operator=(Run &&) = default;
        Run(const Run &) = delete;
        Run &operator=(const Run &) = delete;

        std::vector<float> query, key, value;
        const float *key_ptr = nullptr;    // key.data(), or query's when shared
        const float *value_ptr = nullptr;  // value.data(), or key's or query's when shared
        OwnedMask masks;                   // the mask's buffers and the attngen_mask over them
        std::vector<float> out, weights;   // NaN before the call; weights empty unless requested
        attngen_status status = ATTNGEN_OK;
    };

    Run Prepare(uint32_t input_seed) const {
        Run r;
        Rng rng(input_seed);
        const attngen_ref::MhaDims d = dims();
        const float s = input_scale_;
        r.query = rng.Uniform(size_t(batch_) * q_len_ * d.d_model, -s, s);
        if (!self_attention_) {
            r.key = rng.Uniform(size_t(batch_) * kv_len_ * d.kdim, -s, s);
            if (!same_key_value_) {
                r.value = rng.Uniform(size_t(batch_) * kv_len_ * d.vdim, -s, s);
            }
        }
        r.key_ptr = self_attention_ ? r.query.data() : r.key.data();
        r.value_ptr = self_attention_   ? r.query.data()
                      : same_key_value_ ? r.key.data()
                                        : r.value.data();

        r.masks = MakeMask(mask_, q_len_, kv_len_, rng);
        r.out = NaNs(size_t(batch_) * q_len_ * d.d_model);
        if (with_weights_) r.weights = NaNs(size_t(batch_) * d.num_heads * q_len_ * kv_len_);
        return r;
    }

    void Call(attngen_mha *m, Run &r) const {
        r.status = attngen_mha_forward(m, batch_, q_len_, kv_len_, r.query.data(), r.key_ptr,
                                       r.value_ptr, &r.masks.mask, r.out.data(),
                                       with_weights_ ? r.weights.data() : nullptr);
    }

    // Compares a successful run with the reference.
    void Check(const Model &model, const Run &r) const {
        const attngen_ref::MhaDims d = dims();
        const attngen_ref::MhaWeights w = model.ref();
        const attngen_ref::MhaResult ref =
            attngen_ref::mha(config_, w, batch_, q_len_, kv_len_, r.query.data(), r.key_ptr,
                             r.value_ptr, &r.masks.mask);
        const MhaBounds bounds = MhaErrorBounds(config_, w, batch_, q_len_, kv_len_, r.query.data(),
                                                r.key_ptr, r.value_ptr, ref);
        const std::string reason =
            "atol: fp32 rounding bound of this element propagated through projections, "
            "softmax and output projection (error_bounds.h); rtol: fast exp and fp32 sums in "
            "any order";
        EXPECT_TRUE(AllClose("out", {batch_, q_len_, d.d_model}, ref.out, r.out.data(),
                             {bounds.out, kRelTol, reason}));
        if (with_weights_) {
            EXPECT_TRUE(AllClose("weights", {batch_, d.num_heads, q_len_, kv_len_}, ref.weights,
                                 r.weights.data(), {bounds.weights, kRelTol, reason}));
        }
        if (softmax_matters_) {
            EXPECT_TRUE(FlatSoftmaxOutsideBound(config_, w, batch_, q_len_, kv_len_, r.query.data(),
                                                r.key_ptr, r.value_ptr, &r.masks.mask, ref,
                                                bounds.out));
        }
    }

    // One forward call on a fresh handle holding the model's weights.
    Run Execute() const {
        Run r = Prepare(seed_);
        attngen_mha *raw = nullptr;
        r.status = attngen_mha_create(&config_, &raw);
        if (r.status != ATTNGEN_OK) return r;
        MhaHandle handle(raw);
        r.status = MakeModel().SetWeights(raw);
        if (r.status == ATTNGEN_OK) Call(raw, r);
        return r;
    }

    // Once without the weights output and once with it: on a GPU these are different kernels
    // (flash attention, and the one that materializes the probabilities).
    void TestWithAndWithoutWeights() const {
        MhaTester t = *this;
        t.with_weights(false).Test();
        t.with_weights(true).Test();
    }

    void Test() const {
        SCOPED_TRACE(Describe());
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&config_, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle handle(raw);
        ASSERT_NE(handle, nullptr);
        const Model model = MakeModel();
        ASSERT_EQ(model.SetWeights(handle.get()), ATTNGEN_OK) << attngen_last_error();

        Run r = Prepare(seed_);
        const Run pristine = Prepare(seed_);
        Call(handle.get(), r);
        ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
        EXPECT_STREQ(attngen_last_error(), "") << "a successful call leaves no error behind";
        EXPECT_TRUE(BitIdentical("query (input)", r.query, pristine.query));
        EXPECT_TRUE(BitIdentical("key (input)", r.key, pristine.key));
        EXPECT_TRUE(BitIdentical("value (input)", r.value, pristine.value));
        Check(model, r);
    }

    std::string Describe() const {
        const attngen_ref::MhaDims d = dims();
        std::ostringstream s;
        s << "MhaTester: seed " << seed_ << ", d_model " << d.d_model << ", num_heads "
          << d.num_heads << ", kdim " << d.kdim << ", vdim " << d.vdim << ", head_dim "
          << d.head_dim << ", precision " << int(config_.precision) << ", kv_heads "
          << d.num_kv_heads << ", v_head_dim " << d.v_head_dim << ", rope " << int(d.rope) << "/"
          << d.rotary_dim << "/" << d.rope_theta << ", bias " << d.use_bias << ", batch " << batch_
          << ", q_len " << q_len_ << ", kv_len " << kv_len_ << ", causal " << int(mask_.causal)
          << ", kv_lengths "
          << (mask_.kv_lengths.empty() ? "none" : ::testing::PrintToString(mask_.kv_lengths))
          << ", bool_mask_batch " << mask_.bool_mask_batch << ", additive " << mask_.additive_batch
          << "x" << mask_.additive_heads << ", weights " << with_weights_ << ", self "
          << self_attention_ << ", same kv " << same_key_value_ << ", input scale " << input_scale_;
        return s.str();
    }

  private:
    attngen_mha_config config_{
        8, 2,   0, 0, 0, 1, ATTNGEN_DEVICE_CPU, 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
        0, 0.0f};
    int batch_ = 1, q_len_ = 3, kv_len_ = 4;
    MaskSpec mask_;
    bool with_weights_ = true;
    float input_scale_ = 1.0f;
    bool softmax_matters_ = false;
    uint32_t seed_ = DefaultSeed();
    bool same_key_value_ = false;
    bool self_attention_ = false;
};

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_MHA_TESTER_H
