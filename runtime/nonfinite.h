// The numerical policy for inputs holding NaN or +-Inf (README, "Robustness"): such a value
// reaches, as NaN, exactly the outputs that depend on it, and changes no other output by a bit.
//
// The kernels cannot do that themselves: Halide compiles them with fast-math flags, under
// which a NaN logit comes out of exp() as a finite number, and masked keys enter p.v as 0 * v.
// So the runtime scans the inputs (O(inputs), small beside the kernel). All finite, the usual
// case: nothing else happens. Otherwise the kernel runs on copies with those values zeroed,
// and afterwards every output that depends on one of them (by the structure of attention and
// the mask, not by value) is set to NaN.
#ifndef ATTNGEN_RUNTIME_NONFINITE_H
#define ATTNGEN_RUNTIME_NONFINITE_H

#include <attngen/attngen.h>

#include <cstdint>
#include <vector>

namespace attngen::rt {

class NonFiniteInputs {
  public:
    // A row-major input [batch, heads, len, width]; heads is 1 for the MHA inputs, whose rows
    // feed every head, or a divisor of the query heads for grouped keys and values.
    struct Tensor {
        const float *data;
        int32_t heads, len, width;
    };

    // mask must have passed validate_mask (it may be NULL). Throws std::bad_alloc.
    NonFiniteInputs(const Tensor &q, const Tensor &k, const Tensor &v, const attngen_mask *mask,
                    int32_t batch, int32_t heads, int32_t q_len, int32_t kv_len);

    bool any() const { return any_; }

    // What the kernel reads: the caller's data when all is finite, else the zeroed copies.
    const float *q() const { return any_ ? q_copy_.data() : q_.data; }
    const float *k() const { return any_ ? k_copy_.data() : k_.data; }
    const float *v() const { return any_ ? v_copy_.data() : v_.data; }
    const attngen_mask *mask() const { return any_ ? &mask_copy_ : caller_mask_; }

    // Sets the dependent outputs to NaN. SDPA: out [batch, heads, q_len, dv], column-exact
    // for values. MHA: out [batch, q_len, d_model], whole rows (the projections mix every
    // feature and head). probs [batch, heads, q_len, kv_len] or NULL.
    void poison_sdpa_outputs(float *out, float *probs) const;
    void poison_mha_outputs(float *out, int32_t d_model, float *probs) const;

  private:
    float additive_at(int32_t b, int32_t h, int32_t i, int32_t j) const;  // mask has one
    bool visible(int32_t b, int32_t h, int32_t i, int32_t j) const;
    bool row_has_visible_key(int32_t b, int32_t h, int32_t i) const;
    bool additive_poisons(int32_t b, int32_t h, int32_t i, int32_t j) const;
    // The head of t that query head h reads.
    int32_t head_of(const Tensor &t, int32_t h) const;
    bool row_bad(const std::vector<uint8_t> &rows, const Tensor &t, int32_t b, int32_t h,
                 int32_t row) const;
    // Whether head h of row (b, i) depends on a bad query, key or additive entry (its probabilities
    // and output), and, when values is set, on a bad value element (only column c when c >= 0).
    bool head_probs_poisoned(int32_t b, int32_t h, int32_t i) const;
    bool head_output_poisoned(int32_t b, int32_t h, int32_t i, int32_t c) const;

    Tensor q_, k_, v_;
    const attngen_mask *caller_mask_;
    attngen_mask mask_{};
    int32_t batch_, heads_, q_len_, kv_len_;
    bool any_ = false;
    std::vector<float> q_copy_, k_copy_, v_copy_, additive_copy_;
    attngen_mask mask_copy_{};
    std::vector<uint8_t> q_bad_, k_bad_, v_bad_;  // per row of each input
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_NONFINITE_H
