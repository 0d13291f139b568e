#include "random_mask.h"

#include <limits>

namespace attngen_test {

OwnedMask MakeMask(const MaskSpec &spec, int q_len, int kv_len, Rng &rng) {
    OwnedMask m;
    m.mask.causal = spec.causal;
    m.kv_lengths = spec.kv_lengths;
    m.mask.kv_lengths = m.kv_lengths.empty() ? nullptr : m.kv_lengths.data();
    if (spec.bool_mask_batch > 0) {
        m.bool_mask = spec.bool_values;
        if (m.bool_mask.empty()) {
            m.bool_mask.resize(size_t(spec.bool_mask_batch) * q_len * kv_len);
            for (uint8_t &b : m.bool_mask) b = rng.Bernoulli(spec.bool_density) ? 1 : 0;
        }
        m.mask.bool_mask = m.bool_mask.data();
        m.mask.bool_mask_batch = spec.bool_mask_batch;
    }
    if (spec.additive_batch > 0) {
        m.additive = spec.additive_values;
        if (m.additive.empty()) {
            m.additive.resize(size_t(spec.additive_batch) * spec.additive_heads * q_len * kv_len);
            for (float &a : m.additive) {
                a = rng.Bernoulli(spec.neg_inf_fraction) ? -std::numeric_limits<float>::infinity()
                                                         : rng.Uniform(-2.0f, 2.0f);
            }
        }
        m.mask.additive = m.additive.data();
        m.mask.additive_batch = spec.additive_batch;
        m.mask.additive_heads = spec.additive_heads;
    }
    return m;
}

}  // namespace attngen_test
