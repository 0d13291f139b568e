#include "error_bounds.h"

#include "reference.h"
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace attngen_test {
namespace {

constexpr double u = kFloatUnitRoundoff;

std::vector<float> Abs(const float *x, size_t n) {
    std::vector<float> a(n);
    for (size_t i = 0; i < n; ++i) a[i] = std::fabs(x[i]);  // exact in float
    return a;
}

// The rounding of both operands of products whose |x| sum to abs_x, |w| to abs_w and |x w| to
// abs_products: (1 + e)(1 + e) - 1 <= 2e + e^2 relative, plus the subnormals' absolute error.
double OperandErrors(const OperandRounding &r, double abs_products, double abs_x, double abs_w) {
    const double e = r.unit_roundoff;
    return (2 * e + e * e) * abs_products + r.subnormal_error * (abs_x + abs_w);
}

// Bound of each projected element: the sum of |x w| over in_features products plus the bias,
// and the rounding of x and w to the precision.
std::vector<double> ProjectionErrors(int rows, int in, int out, const float *x, const float *w,
                                     const float *bias, const OperandRounding &r) {
    std::vector<double> bound = LinearErrorBounds(rows, in, out, x, w, bias);
    if (r.unit_roundoff == 0.0) return bound;
    const std::vector<float> ax = Abs(x, size_t(rows) * in);
    const std::vector<float> aw = Abs(w, size_t(out) * in);
    const std::vector<double> abs_products =
        attngen_ref::linear(rows, in, out, ax.data(), aw.data(), nullptr);
    std::vector<double> row_sum(rows, 0.0), weight_sum(out, 0.0);
    for (int n = 0; n < rows; ++n)
        for (int f = 0; f < in; ++f) row_sum[n] += ax[size_t(n) * in + f];
    for (int o = 0; o < out; ++o)
        for (int f = 0; f < in; ++f) weight_sum[o] += aw[size_t(o) * in + f];
    for (int n = 0; n < rows; ++n) {
        for (int o = 0; o < out; ++o) {
            const size_t at = size_t(n) * out + o;
            bound[at] += OperandErrors(r, abs_products[at], row_sum[n], weight_sum[o]);
        }
    }
    return bound;
}

// Keys and values stored in the cache's precision: one rounding of each.
void AddStorageErrors(std::vector<double> &error, const std::vector<double> &stored,
                      const OperandRounding &r) {
    for (size_t i = 0; i < error.size(); ++i) {
        error[i] += r.unit_roundoff * std::fabs(stored[i]) + r.subnormal_error;
    }
}

// Rotary positions mix each pair (a, p) of features: x_a cos - x_p sin and x_p cos + x_a sin
// carry both inputs' errors, plus the rounding of two products and a sum and the error of a
// float cos and sin of an angle reduced to [-pi, pi] (each about u): 16 u of |x_a| + |x_p|
// covers them with room, and |x_a| + |x_p| <= sqrt(2) (|r_a| + |r_p|) for the rotated pair r.
// input_rounding: the unit roundoff of a rounding of the heads before the rotation (a CPU's
// bfloat16 forward stores its projected heads in bfloat16), u_p (|x_a| + |x_p|) more per pair.
void AddRopeErrors(std::vector<double> &error, const std::vector<double> &rotated, int rows,
                   int head_dim, const attngen_ref::MhaDims &d, double input_rounding) {
    if (d.rope == ATTNGEN_ROPE_NONE) return;
    const int half = d.rotary_dim / 2;
    for (int r = 0; r < rows; ++r) {
        double *e = &error[size_t(r) * head_dim];
        const double *x = &rotated[size_t(r) * head_dim];
        for (int k = 0; k < half; ++k) {
            const int a = d.rope == ATTNGEN_ROPE_HALF ? k : 2 * k;
            const int p = d.rope == ATTNGEN_ROPE_HALF ? k + half : 2 * k + 1;
            const double bound =
                e[a] + e[p] +
                (16 * u + std::sqrt(2.0) * input_rounding) * (std::fabs(x[a]) + std::fabs(x[p]));
            e[a] = e[p] = bound;
        }
    }
}

}  // namespace

OperandRounding OperandRoundingOf(attngen_precision p) {
    switch (p) {
        case ATTNGEN_PRECISION_BF16:
            return {0x1p-8, 0.0};  // 8 significant bits, float's range
        case ATTNGEN_PRECISION_F16:
            return {0x1p-11, 0x1p-25};
        case ATTNGEN_PRECISION_F32:
            break;
    }
    return {};
}

std::vector<double> LinearErrorBounds(int rows, int in, int out, const float *x, const float *w,
                                      const float *bias) {
    const std::vector<float> ax = Abs(x, size_t(rows) * in);
    const std::vector<float> aw = Abs(w, size_t(out) * in);
    const std::vector<float> ab = bias ? Abs(bias, out) : std::vector<float>();
    std::vector<double> bound =
        attngen_ref::linear(rows, in, out, ax.data(), aw.data(), bias ? ab.data() : nullptr);
    for (double &b : bound) b = SumErrorBound(in + 1, b);  // in products plus the bias
    return bound;
}

AttentionBounds AttentionErrorBounds(const attngen_ref::SdpaShape &s, const double *q,
                                     const double *k, const double *v, const double *q_error,
                                     const double *k_error, const double *v_error, double scale,
                                     const attngen_ref::SdpaResult &ref,
                                     double probability_rounding) {
    const double abs_scale = std::fabs(scale);
    const size_t rows = size_t(s.batch) * s.heads * s.q_len;
    AttentionBounds r;
    r.weights.assign(rows * s.kv_len, 0.0);
    r.out.assign(rows * s.dv, 0.0);

    std::vector<double> score_error(s.kv_len);
    const int group = s.heads / s.key_heads();
    for (size_t row = 0; row < rows; ++row) {
        if (ref.row_fully_masked[row]) continue;  // must be exactly 0
        const size_t qbh = row / s.q_len;         // (batch, query head) of this row
        // (batch, key/value head) it reads
        const size_t bh = qbh / s.heads * s.key_heads() + qbh % s.heads / group;
        const double *qi = q + row * s.dk;
        const double *qe = q_error ? q_error + row * s.dk : nullptr;
        const double *logit = &ref.logits[row * s.kv_len];
        const double *p = &ref.weights[row * s.kv_len];

        double row_max = -INFINITY;
        for (int j = 0; j < s.kv_len; ++j) row_max = std::max(row_max, logit[j]);

        // Error of each logit as the kernel sees it, in the units of the exponent.
        double expected_error = 0.0;  // sum_j p_j e_j
        for (int j = 0; j < s.kv_len; ++j) {
            if (std::isinf(logit[j])) continue;  // masked
            const size_t kj = (bh * s.kv_len + j) * s.dk;
            double abs_dot = 0.0, carried = 0.0;
            for (int d = 0; d < s.dk; ++d) {
                const double aq = std::fabs(qi[d]), ak = std::fabs(k[kj + d]);
                const double eq = qe ? qe[d] : 0.0, ek = k_error ? k_error[kj + d] : 0.0;
                abs_dot += aq * ak;
                carried += eq * ak + aq * ek + eq * ek;
            }
            score_error[j] = SumErrorBound(s.dk, abs_scale * abs_dot)  // the dot product
                             + 2 * u * abs_scale * abs_dot             // a float scale, its product
                             + abs_scale * carried                     // errors in q and k
                             + 2 * u * (std::fabs(logit[j]) + std::fabs(row_max))  // + mask, - max
                             + kFastExpRelError;  // exp's relative error acts like one in the logit
            expected_error += p[j] * score_error[j];
        }

        // softmax: dp_j = p_j (de_j - sum_i p_i de_i), so |dp_j| <= p_j (e_j (1 - 2 p_j) + E);
        // the normalizing sum of kv_len positive terms and the division add their own rounding.
        const double normalize = SumErrorBound(s.kv_len, 1.0) + u;
        double *wb = &r.weights[row * s.kv_len];
        for (int j = 0; j < s.kv_len; ++j) {
            if (std::isinf(logit[j])) continue;  // masked: must be exactly 0
            const double dp =
                p[j] * (score_error[j] * (1 - 2 * p[j]) + expected_error) + p[j] * normalize;
            wb[j] = kProbabilityFloor + kSecondOrderSafety * dp;
        }

        // out_c = sum_j p_j v_jc: the allowed error of each weight times |v|, the errors v
        // carries, and the rounding of the sum itself.
        for (int c = 0; c < s.dv; ++c) {
            double carried = 0.0, abs_sum = 0.0;
            for (int j = 0; j < s.kv_len; ++j) {
                if (std::isinf(logit[j])) continue;
                const size_t vj = (bh * s.kv_len + j) * s.dv + c;
                const double av = std::fabs(v[vj]);
                carried += (wb[j] + (kRelTol + probability_rounding) * p[j]) * av +
                           p[j] * (v_error ? v_error[vj] : 0.0);
                abs_sum += p[j] * av;
            }
            r.out[row * s.dv + c] = carried + SumErrorBound(s.kv_len, abs_sum);
        }
    }
    return r;
}

MhaBounds MhaErrorBounds(const attngen_mha_config &config, const attngen_ref::MhaWeights &w,
                         int batch, int q_len, int kv_len, const float *query, const float *key,
                         const float *value, const attngen_ref::MhaResult &ref,
                         bool cached_keys_values) {
    const attngen_ref::MhaDims d = attngen_ref::resolve(config);
    const int inner = d.out_inner(), vhd = d.v_head_dim;
    const bool bias = d.use_bias;
    const OperandRounding rounding = OperandRoundingOf(config.precision);

    std::vector<double> q_error =
        attngen_ref::split_heads(ProjectionErrors(batch * q_len, d.d_model, d.inner(), query, w.wq,
                                                  bias ? w.bq : nullptr, rounding),
                                 batch, q_len, d.num_heads, d.head_dim);
    std::vector<double> k_error =
        attngen_ref::split_heads(ProjectionErrors(batch * kv_len, d.kdim, d.kv_inner(), key, w.wk,
                                                  bias ? w.bk : nullptr, rounding),
                                 batch, kv_len, d.num_kv_heads, d.head_dim);
    std::vector<double> v_error =
        attngen_ref::split_heads(ProjectionErrors(batch * kv_len, d.vdim, d.v_inner(), value, w.wv,
                                                  bias ? w.bv : nullptr, rounding),
                                 batch, kv_len, d.num_kv_heads, vhd);
    const bool bfloat16_products = config.precision == ATTNGEN_PRECISION_BF16;
    const double heads_rounding = bfloat16_products ? rounding.unit_roundoff : 0.0;
    AddRopeErrors(q_error, ref.q_heads, batch * d.num_heads * q_len, d.head_dim, d, heads_rounding);
    AddRopeErrors(k_error, ref.k_heads, batch * d.num_kv_heads * kv_len, d.head_dim, d,
                  heads_rounding);
    if (cached_keys_values || bfloat16_products) {
        AddStorageErrors(k_error, ref.k_heads, rounding);
        AddStorageErrors(v_error, ref.v_heads, rounding);
    }
    if (bfloat16_products) AddStorageErrors(q_error, ref.q_heads, rounding);

    const attngen_ref::SdpaShape s = attngen_ref::attention_shape(d, batch, q_len, kv_len);
    const AttentionBounds a = AttentionErrorBounds(
        s, ref.q_heads.data(), ref.k_heads.data(), ref.v_heads.data(), q_error.data(),
        k_error.data(), v_error.data(), 1.0 / std::sqrt(double(d.head_dim)), ref.sdpa,
        bfloat16_products ? rounding.unit_roundoff : 0.0);

    // Allowed error of each merged attention value [B, Lq, H*vhd], relative part included.
    std::vector<double> attn_allowed(size_t(batch) * q_len * inner);
    for (int b = 0; b < batch; ++b)
        for (int h = 0; h < d.num_heads; ++h)
            for (int i = 0; i < q_len; ++i)
                for (int c = 0; c < vhd; ++c) {
                    const size_t from = ((size_t(b) * d.num_heads + h) * q_len + i) * vhd + c;
                    attn_allowed[(size_t(b) * q_len + i) * inner + size_t(h) * vhd + c] =
                        a.out[from] + kRelTol * std::fabs(ref.sdpa.out[from]);
                }

    MhaBounds r;
    r.weights = a.weights;
    r.out.assign(size_t(batch) * q_len * d.d_model, 0.0);
    for (int row = 0; row < batch * q_len; ++row) {
        for (int o = 0; o < d.d_model; ++o) {
            double carried = 0.0, abs_bias = bias ? std::fabs(double(w.bo[o])) : 0.0;
            double abs_products = 0.0, abs_x = 0.0, abs_w = 0.0;
            for (int c = 0; c < inner; ++c) {
                const double aw = std::fabs(double(w.wo[size_t(o) * inner + c]));
                const double ax = std::fabs(ref.attn[size_t(row) * inner + c]);
                carried += aw * attn_allowed[size_t(row) * inner + c];
                abs_products += aw * ax;
                abs_x += ax;
                abs_w += aw;
            }
            r.out[size_t(row) * d.d_model + o] =
                carried + SumErrorBound(inner + 1, abs_products + abs_bias) +
                (rounding.unit_roundoff > 0 ? OperandErrors(rounding, abs_products, abs_x, abs_w)
                                            : 0.0);
        }
    }
    return r;
}

}  // namespace attngen_test
