#include "reference.h"

#include <cmath>
#include <cstddef>
#include <limits>

namespace attngen_ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

size_t idx4(size_t d0, size_t d1, size_t d2, size_t d3, size_t n1, size_t n2, size_t n3) {
    return ((d0 * n1 + d1) * n2 + d2) * n3 + d3;
}

template <typename T>
SdpaResult sdpa_impl(const SdpaShape &s, const T *q, const T *k, const T *v,
                     const attngen_mask *mask, double scale) {
    if (scale == 0.0) scale = 1.0 / std::sqrt(double(s.dk));

    SdpaResult r;
    const size_t rows = size_t(s.batch) * s.heads * s.q_len;
    r.out.assign(rows * s.dv, 0.0);
    r.weights.assign(rows * s.kv_len, 0.0);
    r.logits.assign(rows * s.kv_len, kNegInf);
    r.row_fully_masked.assign(rows, true);

    const int hkv = s.key_heads(), group = s.heads / hkv;
    for (int b = 0; b < s.batch; ++b) {
        for (int h = 0; h < s.heads; ++h) {
            const int kh = h / group;
            for (int i = 0; i < s.q_len; ++i) {
                const size_t row = (size_t(b) * s.heads + h) * s.q_len + i;
                double *logit = &r.logits[row * s.kv_len];
                const T *qi = &q[idx4(b, h, i, 0, s.heads, s.q_len, s.dk)];

                double row_max = kNegInf;
                for (int j = 0; j < s.kv_len; ++j) {
                    if (hard_masked(mask, s, b, i, j)) continue;
                    const T *kj = &k[idx4(b, kh, j, 0, hkv, s.kv_len, s.dk)];
                    double dot = 0.0;
                    for (int d = 0; d < s.dk; ++d) dot += double(qi[d]) * double(kj[d]);
                    // An additive -inf masks the key like any other mask part does.
                    logit[j] = dot * scale + additive_at(mask, s, b, h, i, j);
                    if (logit[j] > row_max) row_max = logit[j];
                }
                if (row_max == kNegInf) continue;  // every key masked: weights and output stay 0
                r.row_fully_masked[row] = false;

                // Subtracting the row maximum keeps exp() finite for any logit magnitude.
                double *p = &r.weights[row * s.kv_len];
                double sum = 0.0;
                for (int j = 0; j < s.kv_len; ++j) {
                    p[j] = logit[j] == kNegInf ? 0.0 : std::exp(logit[j] - row_max);
                    sum += p[j];
                }
                for (int j = 0; j < s.kv_len; ++j) p[j] /= sum;

                double *o = &r.out[row * s.dv];
                for (int j = 0; j < s.kv_len; ++j) {
                    if (p[j] == 0.0) continue;
                    const T *vj = &v[idx4(b, kh, j, 0, hkv, s.kv_len, s.dv)];
                    for (int c = 0; c < s.dv; ++c) o[c] += p[j] * double(vj[c]);
                }
            }
        }
    }
    return r;
}

// x [rows, in] · wᵀ + bias in double, with x already double.
std::vector<double> project(int rows, int in, int out, const float *x, const float *w,
                            const float *bias) {
    std::vector<double> y(size_t(rows) * out);
    for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < out; ++o) {
            double acc = bias ? double(bias[o]) : 0.0;
            for (int c = 0; c < in; ++c) {
                acc += double(x[size_t(r) * in + c]) * double(w[size_t(o) * in + c]);
            }
            y[size_t(r) * out + o] = acc;
        }
    }
    return y;
}

}  // namespace

std::vector<double> split_heads(const std::vector<double> &x, int batch, int len, int heads,
                                int head_dim) {
    std::vector<double> y(x.size());
    for (int b = 0; b < batch; ++b)
        for (int l = 0; l < len; ++l)
            for (int h = 0; h < heads; ++h)
                for (int d = 0; d < head_dim; ++d)
                    y[idx4(b, h, l, d, heads, len, head_dim)] =
                        x[(size_t(b) * len + l) * heads * head_dim + size_t(h) * head_dim + d];
    return y;
}

std::vector<double> linear(int rows, int in_features, int out_features, const float *x,
                           const float *w, const float *bias) {
    return project(rows, in_features, out_features, x, w, bias);
}

bool hard_masked(const attngen_mask *mask, const SdpaShape &s, int b, int i, int j) {
    if (!mask) return false;
    switch (mask->causal) {
        case ATTNGEN_CAUSAL_TOP_LEFT:
            if (j > i) return true;
            break;
        case ATTNGEN_CAUSAL_BOTTOM_RIGHT:
            if (j > i + s.kv_len - s.q_len) return true;
            break;
        default:
            break;
    }
    if (mask->kv_lengths && j >= mask->kv_lengths[b]) return true;
    if (mask->bool_mask) {
        const int mb = mask->bool_mask_batch == 1 ? 0 : b;
        if (mask->bool_mask[(size_t(mb) * s.q_len + i) * s.kv_len + j] != 0) return true;
    }
    return false;
}

double additive_at(const attngen_mask *mask, const SdpaShape &s, int b, int h, int i, int j) {
    if (!mask || !mask->additive) return 0.0;
    const int ab = mask->additive_batch == 1 ? 0 : b;
    const int ah = mask->additive_heads == 1 ? 0 : h;
    return double(mask->additive[idx4(ab, ah, i, j, mask->additive_heads, s.q_len, s.kv_len)]);
}

SdpaResult sdpa(const SdpaShape &shape, const float *q, const float *k, const float *v,
                const attngen_mask *mask, double scale) {
    return sdpa_impl(shape, q, k, v, mask, scale);
}

SdpaResult sdpa(const SdpaShape &shape, const double *q, const double *k, const double *v,
                const attngen_mask *mask, double scale) {
    return sdpa_impl(shape, q, k, v, mask, scale);
}

MhaDims resolve(const attngen_mha_config &c) {
    MhaDims d;
    d.d_model = c.d_model;
    d.num_heads = c.num_heads;
    d.kdim = c.kdim ? c.kdim : c.d_model;
    d.vdim = c.vdim ? c.vdim : c.d_model;
    d.head_dim = c.head_dim ? c.head_dim : c.d_model / c.num_heads;
    d.use_bias = c.use_bias != 0;
    d.num_kv_heads = c.num_kv_heads ? c.num_kv_heads : c.num_heads;
    d.v_head_dim = c.v_head_dim ? c.v_head_dim : d.head_dim;
    d.rope = c.rope;
    d.rotary_dim = c.rotary_dim ? c.rotary_dim : d.head_dim;
    d.rope_theta = c.rope_theta != 0.0f ? double(c.rope_theta) : 10000.0;
    return d;
}

SdpaShape attention_shape(const MhaDims &d, int batch, int q_len, int kv_len) {
    SdpaShape s;
    s.batch = batch;
    s.heads = d.num_heads;
    s.kv_heads = d.num_kv_heads;
    s.q_len = q_len;
    s.kv_len = kv_len;
    s.dk = d.head_dim;
    s.dv = d.v_head_dim;
    return s;
}

void rope(std::vector<double> &x, int batch, int num_heads, int len, int head_dim,
          attngen_rope mode, int rotary_dim, double theta, const std::vector<long long> &offsets) {
    if (mode == ATTNGEN_ROPE_NONE) return;
    const int half = rotary_dim / 2;
    for (int b = 0; b < batch; ++b) {
        for (int h = 0; h < num_heads; ++h) {
            for (int l = 0; l < len; ++l) {
                double *row = &x[idx4(b, h, l, 0, num_heads, len, head_dim)];
                const double position = double(l + offsets[b]);
                for (int k = 0; k < half; ++k) {
                    const double angle = position * std::pow(theta, -2.0 * k / rotary_dim);
                    const int a = mode == ATTNGEN_ROPE_HALF ? k : 2 * k;
                    const int p = mode == ATTNGEN_ROPE_HALF ? k + half : 2 * k + 1;
                    const double xa = row[a], xp = row[p];
                    row[a] = xa * std::cos(angle) - xp * std::sin(angle);
                    row[p] = xp * std::cos(angle) + xa * std::sin(angle);
                }
            }
        }
    }
}

MhaResult mha(const attngen_mha_config &config, const MhaWeights &w, int batch, int q_len,
              int kv_len, const float *query, const float *key, const float *value,
              const attngen_mask *mask, double attention_scale) {
    const MhaDims d = resolve(config);
    const bool bias = d.use_bias;

    const std::vector<double> qp =
        project(batch * q_len, d.d_model, d.inner(), query, w.wq, bias ? w.bq : nullptr);
    const std::vector<double> kp =
        project(batch * kv_len, d.kdim, d.kv_inner(), key, w.wk, bias ? w.bk : nullptr);
    const std::vector<double> vp =
        project(batch * kv_len, d.vdim, d.v_inner(), value, w.wv, bias ? w.bv : nullptr);

    MhaResult r;
    r.q_heads = split_heads(qp, batch, q_len, d.num_heads, d.head_dim);
    r.k_heads = split_heads(kp, batch, kv_len, d.num_kv_heads, d.head_dim);
    r.v_heads = split_heads(vp, batch, kv_len, d.num_kv_heads, d.v_head_dim);
    rope(r.q_heads, batch, d.num_heads, q_len, d.head_dim, d.rope, d.rotary_dim, d.rope_theta,
         std::vector<long long>(batch, kv_len - q_len));
    rope(r.k_heads, batch, d.num_kv_heads, kv_len, d.head_dim, d.rope, d.rotary_dim, d.rope_theta,
         std::vector<long long>(batch, 0));

    const SdpaShape s = attention_shape(d, batch, q_len, kv_len);
    r.sdpa = sdpa(s, r.q_heads.data(), r.k_heads.data(), r.v_heads.data(), mask,
                  attention_scale != 0.0 ? attention_scale : 1.0 / std::sqrt(double(d.head_dim)));
    r.weights = r.sdpa.weights;

    // Head merge: [B, H, Lq, vhd] -> [B, Lq, H*vhd].
    const int merged = d.out_inner(), vhd = d.v_head_dim;
    r.attn.assign(size_t(batch) * q_len * merged, 0.0);
    for (int b = 0; b < batch; ++b)
        for (int h = 0; h < d.num_heads; ++h)
            for (int i = 0; i < q_len; ++i)
                for (int c = 0; c < vhd; ++c)
                    r.attn[(size_t(b) * q_len + i) * merged + size_t(h) * vhd + c] =
                        r.sdpa.out[idx4(b, h, i, c, d.num_heads, q_len, vhd)];

    r.out.assign(size_t(batch) * q_len * d.d_model, 0.0);
    for (int row = 0; row < batch * q_len; ++row) {
        for (int o = 0; o < d.d_model; ++o) {
            double acc = bias ? double(w.bo[o]) : 0.0;
            for (int c = 0; c < merged; ++c) {
                acc += r.attn[size_t(row) * merged + c] * double(w.wo[size_t(o) * merged + c]);
            }
            r.out[size_t(row) * d.d_model + o] = acc;
        }
    }
    return r;
}

}  // namespace attngen_ref
