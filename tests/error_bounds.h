// Per-element rounding bounds of a float32 computation of the reference's results.
//
// The bounds follow the computation forward: each dot product or sum contributes
// SumErrorBound(n, sum of |terms|), and errors already in its inputs are carried through to
// first order. They are absolute (the atol of AllClose); AllClose adds kRelTol * |expected|.
// Masked attention weights and fully masked rows get a bound of 0: they must be exactly 0.
#ifndef ATTNGEN_TESTS_ERROR_BOUNDS_H
#define ATTNGEN_TESTS_ERROR_BOUNDS_H

#include "reference.h"

#include <vector>

namespace attngen_test {

// First-order propagation drops products of errors; doubling the bound covers them as long as
// the bounds stay well below 1 (they are below 1e-2 in every test).
constexpr double kSecondOrderSafety = 2.0;

// Rounding of one operand stored in precision p (attngen_precision): |x̂ - x| <= unit_roundoff
// |x| + subnormal_error. Float32 operands are taken as they are (0, 0).
struct OperandRounding {
    double unit_roundoff = 0.0;
    double subnormal_error = 0.0;  // half the step between float16's subnormals, 2^-25
};
OperandRounding OperandRoundingOf(attngen_precision p);

// y = x wᵀ + bias.
std::vector<double> LinearErrorBounds(int rows, int in_features, int out_features, const float *x,
                                      const float *w, const float *bias);

struct AttentionBounds {
    std::vector<double> weights;  // [batch, heads, q_len, kv_len]
    std::vector<double> out;      // [batch, heads, q_len, dv]
};

// Attention on heads q, k, v (head layout, as the reference takes them), each optionally with
// per-element absolute errors it already carries (nullptr: exact, like a caller's float input).
// scale is the one actually applied (not 0). ref is the reference result for these inputs.
// probability_rounding: the unit roundoff of the probabilities as probs x values takes them
// (bfloat16 products round them; 0 for float32).
AttentionBounds AttentionErrorBounds(const attngen_ref::SdpaShape &shape, const double *q,
                                     const double *k, const double *v, const double *q_error,
                                     const double *k_error, const double *v_error, double scale,
                                     const attngen_ref::SdpaResult &ref,
                                     double probability_rounding = 0.0);

struct MhaBounds {
    std::vector<double> weights;  // [batch, heads, q_len, kv_len]
    std::vector<double> out;      // [batch, q_len, d_model]
};

// In the config's precision: each projection multiplies its input and weights rounded to it
// (2 roundings per product), and with cached_keys_values (attngen_mha_forward_cached) the
// projected, rotated keys and values are stored rounded to it too. In bfloat16 the attention
// products round their operands as well: q, k and v (once: a cache's are bfloat16 already) and
// the probabilities.
MhaBounds MhaErrorBounds(const attngen_mha_config &config, const attngen_ref::MhaWeights &weights,
                         int batch, int q_len, int kv_len, const float *query, const float *key,
                         const float *value, const attngen_ref::MhaResult &ref,
                         bool cached_keys_values = false);

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_ERROR_BOUNDS_H
