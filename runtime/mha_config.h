// An attngen_mha_config checked and with its zero defaults resolved: the sizes every entry
// point of a handle (forward, KV cache, cached forward) works with.
#ifndef ATTNGEN_RUNTIME_MHA_CONFIG_H
#define ATTNGEN_RUNTIME_MHA_CONFIG_H

#include <attngen/attngen.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace attngen::rt {

struct ResolvedConfig {
    int32_t d_model, num_heads, kdim, vdim, head_dim;
    bool use_bias;
    attngen_device device;
    int32_t num_kv_heads, v_head_dim;
    attngen_precision precision;  // of the weights and of the KV caches made from the handle
    attngen_rope rope;
    int32_t rotary_dim;
    float rope_theta;
    // theta^(-2k / rotary_dim) for k < rotary_dim / 2, in double (at least one entry): the
    // rotary kernels' frequency table, computed once per handle.
    std::vector<double> rope_inv_freq;

    // In 64 bits: resolve_config refuses sizes whose products leave int32 (require_addressable),
    // and these are what it checks.
    int64_t inner() const { return int64_t(num_heads) * head_dim; }         // wq's out features
    int64_t kv_inner() const { return int64_t(num_kv_heads) * head_dim; }   // wk's out features
    int64_t v_inner() const { return int64_t(num_kv_heads) * v_head_dim; }  // wv's out features
    int64_t out_inner() const { return int64_t(num_heads) * v_head_dim; }   // wo's in features
    float scale() const { return 1.0f / std::sqrt(float(head_dim)); }
};

// Records the failure (INVALID_ARGUMENT, SHAPE or UNSUPPORTED, naming the field) and returns
// its status, or fills *r.
attngen_status resolve_config(const attngen_mha_config &c, ResolvedConfig *r);

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_MHA_CONFIG_H
