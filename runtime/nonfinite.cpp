#include "nonfinite.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "finite_scan.h"

namespace attngen::rt {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool is_negative_infinity(float x) {
    return std::isinf(x) && x < 0.0f;
}

size_t elements(const NonFiniteInputs::Tensor &t, int32_t batch) {
    return size_t(batch) * t.heads * t.len * t.width;
}

// Marks the rows of t holding a non-finite value.
void scan_rows(const NonFiniteInputs::Tensor &t, int32_t batch, std::vector<uint8_t> *bad) {
    const size_t rows = size_t(batch) * t.heads * t.len;
    bad->assign(rows, 0);
    for (size_t r = 0; r < rows; ++r) {
        (*bad)[r] = all_finite(t.data + r * t.width, size_t(t.width), false) ? 0 : 1;
    }
}

std::vector<float> zeroed_copy(const float *data, size_t n, bool keep_negative_infinity) {
    std::vector<float> copy(data, data + n);
    for (float &x : copy) {
        if (!std::isfinite(x) && !(keep_negative_infinity && is_negative_infinity(x))) x = 0.0f;
    }
    return copy;
}

}  // namespace

NonFiniteInputs::NonFiniteInputs(const Tensor &q, const Tensor &k, const Tensor &v,
                                 const attngen_mask *mask, int32_t batch, int32_t heads,
                                 int32_t q_len, int32_t kv_len)
    : q_(q),
      k_(k),
      v_(v),
      caller_mask_(mask),
      batch_(batch),
      heads_(heads),
      q_len_(q_len),
      kv_len_(kv_len) {
    if (mask != nullptr) mask_ = *mask;
    const size_t additive_size =
        mask_.additive == nullptr
            ? 0
            : size_t(mask_.additive_batch) * mask_.additive_heads * q_len * kv_len;
    // This runs on every call: one read of the inputs, nothing allocated, when all is finite.
    // Self-attention passes one tensor as keys and values (or all three): it is scanned once.
    const auto same = [batch](const Tensor &a, const Tensor &b) {
        return a.data == b.data && elements(a, batch) == elements(b, batch);
    };
    any_ = !all_finite_parallel(q_.data, elements(q_, batch), false) ||
           (!same(k_, q_) && !all_finite_parallel(k_.data, elements(k_, batch), false)) ||
           (!same(v_, k_) && !same(v_, q_) &&
            !all_finite_parallel(v_.data, elements(v_, batch), false)) ||
           !all_finite_parallel(mask_.additive, additive_size, true);
    if (!any_) return;
    scan_rows(q_, batch, &q_bad_);
    scan_rows(k_, batch, &k_bad_);
    scan_rows(v_, batch, &v_bad_);
    q_copy_ = zeroed_copy(q_.data, elements(q_, batch), false);
    k_copy_ = zeroed_copy(k_.data, elements(k_, batch), false);
    v_copy_ = zeroed_copy(v_.data, elements(v_, batch), false);
    mask_copy_ = mask_;
    if (mask_.additive != nullptr) {
        additive_copy_ = zeroed_copy(mask_.additive, additive_size, true);
        mask_copy_.additive = additive_copy_.data();
    }
}

float NonFiniteInputs::additive_at(int32_t b, int32_t h, int32_t i, int32_t j) const {
    const int32_t ab = mask_.additive_batch == 1 ? 0 : b;
    const int32_t ah = mask_.additive_heads == 1 ? 0 : h;
    return mask_.additive[((size_t(ab) * mask_.additive_heads + ah) * q_len_ + i) * kv_len_ + j];
}

bool NonFiniteInputs::visible(int32_t b, int32_t h, int32_t i, int32_t j) const {
    if (mask_.causal == ATTNGEN_CAUSAL_TOP_LEFT && j > i) return false;
    if (mask_.causal == ATTNGEN_CAUSAL_BOTTOM_RIGHT && j > i + kv_len_ - q_len_) return false;
    if (mask_.kv_lengths != nullptr && j >= mask_.kv_lengths[b]) return false;
    if (mask_.bool_mask != nullptr) {
        const int32_t mb = mask_.bool_mask_batch == 1 ? 0 : b;
        if (mask_.bool_mask[(size_t(mb) * q_len_ + i) * kv_len_ + j] != 0) return false;
    }
    return mask_.additive == nullptr || !is_negative_infinity(additive_at(b, h, i, j));
}

bool NonFiniteInputs::row_has_visible_key(int32_t b, int32_t h, int32_t i) const {
    for (int32_t j = 0; j < kv_len_; ++j) {
        if (visible(b, h, i, j)) return true;
    }
    return false;
}

bool NonFiniteInputs::additive_poisons(int32_t b, int32_t h, int32_t i, int32_t j) const {
    // -inf hides the key, so it never reaches here as visible.
    return mask_.additive != nullptr && !std::isfinite(additive_at(b, h, i, j));
}

bool NonFiniteInputs::row_bad(const std::vector<uint8_t> &rows, const Tensor &t, int32_t b,
                              int32_t h, int32_t row) const {
    return rows[(size_t(b) * t.heads + head_of(t, h)) * t.len + row] != 0;
}

int32_t NonFiniteInputs::head_of(const Tensor &t, int32_t h) const {
    // A tensor of fewer heads serves groups of query heads (1 head: the MHA inputs, which
    // feed every head; kv_heads: grouped keys and values).
    return h / (heads_ / t.heads);
}

bool NonFiniteInputs::head_probs_poisoned(int32_t b, int32_t h, int32_t i) const {
    if (row_bad(q_bad_, q_, b, h, i)) return true;
    for (int32_t j = 0; j < kv_len_; ++j) {
        if (visible(b, h, i, j) && (row_bad(k_bad_, k_, b, h, j) || additive_poisons(b, h, i, j)))
            return true;
    }
    return false;
}

bool NonFiniteInputs::head_output_poisoned(int32_t b, int32_t h, int32_t i, int32_t c) const {
    for (int32_t j = 0; j < kv_len_; ++j) {
        if (!visible(b, h, i, j) || !row_bad(v_bad_, v_, b, h, j)) continue;
        if (c < 0) return true;
        const size_t vh = size_t(b) * v_.heads + head_of(v_, h);
        const float x = v_.data[(vh * v_.len + j) * v_.width + c];
        if (!std::isfinite(x)) return true;
    }
    return false;
}

void NonFiniteInputs::poison_sdpa_outputs(float *out, float *probs) const {
    if (!any_) return;
    const int32_t dv = v_.width;
    for (int32_t b = 0; b < batch_; ++b) {
        for (int32_t h = 0; h < heads_; ++h) {
            for (int32_t i = 0; i < q_len_; ++i) {
                if (!row_has_visible_key(b, h, i)) continue;  // zero whatever the inputs
                const size_t row = (size_t(b) * heads_ + h) * q_len_ + i;
                if (head_probs_poisoned(b, h, i)) {
                    for (int32_t c = 0; c < dv; ++c) out[row * dv + c] = kNaN;
                    if (probs == nullptr) continue;
                    for (int32_t j = 0; j < kv_len_; ++j) {
                        if (visible(b, h, i, j)) probs[row * kv_len_ + j] = kNaN;
                    }
                    continue;
                }
                for (int32_t c = 0; c < dv; ++c) {
                    if (head_output_poisoned(b, h, i, c)) out[row * dv + c] = kNaN;
                }
            }
        }
    }
}

void NonFiniteInputs::poison_mha_outputs(float *out, int32_t d_model, float *probs) const {
    if (!any_) return;
    for (int32_t b = 0; b < batch_; ++b) {
        for (int32_t i = 0; i < q_len_; ++i) {
            bool out_row = false;
            for (int32_t h = 0; h < heads_; ++h) {
                if (!row_has_visible_key(b, h, i)) continue;
                const bool head_probs = head_probs_poisoned(b, h, i);
                out_row |= head_probs || head_output_poisoned(b, h, i, -1);
                if (!head_probs || probs == nullptr) continue;
                const size_t row = (size_t(b) * heads_ + h) * q_len_ + i;
                for (int32_t j = 0; j < kv_len_; ++j) {
                    if (visible(b, h, i, j)) probs[row * kv_len_ + j] = kNaN;
                }
            }
            if (!out_row) continue;
            float *row = out + (size_t(b) * q_len_ + i) * d_model;
            for (int32_t c = 0; c < d_model; ++c) row[c] = kNaN;
        }
    }
}

}  // namespace attngen::rt
