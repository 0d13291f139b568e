// MhaForwardCall (mha_forward_call.h).
#include "mha_forward_call.h"

#include <cmath>

#include "bench_shapes.h"

namespace attngen_bench {

MhaForwardCall::MhaForwardCall(const attngen::NamedShape &s, attngen_precision precision)
    : shape_(s) {
    attngen_mha_config config{};
    config.d_model = s.d_model;
    config.num_heads = s.heads;
    config.use_bias = 1;
    config.device = ATTNGEN_DEVICE_CPU;
    config.precision = precision;
    if (attngen_mha_create(&config, &m_) != ATTNGEN_OK) {
        error_ = attngen_last_error();
        return;
    }
    const size_t dd = size_t(s.d_model) * s.d_model;
    const float w_scale = 1.0f / std::sqrt(float(s.d_model));
    const auto wq = random_vector(dd, w_scale, 1), wk = random_vector(dd, w_scale, 2);
    const auto wv = random_vector(dd, w_scale, 3), wo = random_vector(dd, w_scale, 4);
    const auto b = random_vector(s.d_model, 0.1f, 5);
    if (attngen_mha_set_weights(m_, wq.data(), wk.data(), wv.data(), wo.data(), b.data(), b.data(),
                                b.data(), b.data()) != ATTNGEN_OK) {
        error_ = attngen_last_error();
        return;
    }
    q_ = random_vector(size_t(s.batch) * s.q_len * s.d_model, 1.0f, 6);
    // Where the lengths agree, self-attention: query, key and value are one tensor, as an encoder
    // layer calls it and as scripts/bench_torch.py feeds torch and ONNX Runtime.
    if (s.q_len != s.kv_len) kv_ = random_vector(size_t(s.batch) * s.kv_len * s.d_model, 1.0f, 7);
    out_.resize(size_t(s.batch) * s.q_len * s.d_model);
    if (s.weights) weights_.resize(size_t(s.batch) * s.heads * s.q_len * s.kv_len);
    mask_.causal = s.causal ? ATTNGEN_CAUSAL_TOP_LEFT : ATTNGEN_CAUSAL_NONE;
}

MhaForwardCall::~MhaForwardCall() {
    attngen_mha_destroy(m_);
}

attngen_status MhaForwardCall::operator()() {
    const float *kv = kv_.empty() ? q_.data() : kv_.data();
    return attngen_mha_forward(m_, shape_.batch, shape_.q_len, shape_.kv_len, q_.data(), kv, kv,
                               &mask_, out_.data(), weights_.empty() ? nullptr : weights_.data());
}

}  // namespace attngen_bench
