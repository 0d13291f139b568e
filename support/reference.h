// A float64 reference for attngen, written from the math in DESIGN.md with plain loops.
//
// It shares nothing with the kernels but the meaning of the C API's structs: inputs are the
// caller's float tensors, every intermediate and every result is double. Its only job is to
// be obviously right, so it is slow on purpose and never clever.
#ifndef ATTNGEN_SUPPORT_REFERENCE_H
#define ATTNGEN_SUPPORT_REFERENCE_H

#include <attngen/attngen.h>

#include <cstdint>
#include <vector>

namespace attngen_ref {

// y [rows, out_features] = x [rows, in_features] · wᵀ + bias, with w [out_features, in_features]
// as torch.nn.Linear stores it; bias [out_features] or nullptr.
std::vector<double> linear(int rows, int in_features, int out_features, const float *x,
                           const float *w, const float *bias);

// The head split: [batch, len, heads*head_dim] -> [batch, heads, len, head_dim].
std::vector<double> split_heads(const std::vector<double> &x, int batch, int len, int heads,
                                int head_dim);

// Shapes of one attention problem on projected heads.
struct SdpaShape {
    int batch = 1;
    int heads = 1;
    int q_len = 1;
    int kv_len = 1;
    int dk = 1;
    int dv = 1;
    int kv_heads = 0;  // heads of k and v; 0 = heads. Query head h reads h / (heads / kv_heads).
    int key_heads() const { return kv_heads ? kv_heads : heads; }
};

struct SdpaResult {
    std::vector<double> out;      // [batch, heads, q_len, dv]
    std::vector<double> weights;  // [batch, heads, q_len, kv_len]; 0 where masked
    // Scaled scores plus the additive mask, -inf where a key is masked: [batch, heads, q_len,
    // kv_len]. Kept so tests can derive rounding bounds and look at what was masked.
    std::vector<double> logits;
    // Per (batch, head, query) row: true when every key of the row is masked.
    std::vector<bool> row_fully_masked;
};

// True when a mask part other than the additive one hides key j from query i of batch item b.
// mask may be nullptr (nothing masked).
bool hard_masked(const attngen_mask *mask, const SdpaShape &shape, int b, int i, int j);

// The additive mask entry for (b, h, i, j), broadcast as the mask says; 0 without one.
double additive_at(const attngen_mask *mask, const SdpaShape &shape, int b, int h, int i, int j);

// Masked, max-subtracted softmax attention. q [B, H, Lq, dk], k [B, Hkv, Lkv, dk],
// v [B, Hkv, Lkv, dv] (Hkv = shape.key_heads()); scale 0 means 1/sqrt(dk). A key is masked when any
// mask part masks it or its logit is -inf; a row with every key masked gets weights 0 and output 0.
SdpaResult sdpa(const SdpaShape &shape, const float *q, const float *k, const float *v,
                const attngen_mask *mask, double scale);

// The same on double inputs, so mha() can feed its projections without rounding them to float.
SdpaResult sdpa(const SdpaShape &shape, const double *q, const double *k, const double *v,
                const attngen_mask *mask, double scale);

// Weights of a multi-head attention module, laid out as attngen_mha_set_weights takes them.
// Biases are ignored unless the config has use_bias set.
struct MhaWeights {
    const float *wq = nullptr;  // [H*hd, d_model]
    const float *wk = nullptr;  // [Hkv*hd, kdim]
    const float *wv = nullptr;  // [Hkv*vhd, vdim]
    const float *wo = nullptr;  // [d_model, H*vhd]
    const float *bq = nullptr;  // [H*hd]
    const float *bk = nullptr;  // [Hkv*hd]
    const float *bv = nullptr;  // [Hkv*vhd]
    const float *bo = nullptr;  // [d_model]
};

// attngen_mha_config with the zero defaults (kdim, vdim, head_dim, num_kv_heads, v_head_dim,
// rotary_dim, rope_theta) resolved.
struct MhaDims {
    int d_model = 0;
    int num_heads = 0;
    int kdim = 0;
    int vdim = 0;
    int head_dim = 0;
    bool use_bias = false;
    int num_kv_heads = 0;
    int v_head_dim = 0;
    attngen_rope rope = ATTNGEN_ROPE_NONE;
    int rotary_dim = 0;
    double rope_theta = 10000.0;
    int inner() const { return num_heads * head_dim; }         // queries: wq's out features
    int kv_inner() const { return num_kv_heads * head_dim; }   // keys: wk's out features
    int v_inner() const { return num_kv_heads * v_head_dim; }  // values: wv's out features
    int out_inner() const { return num_heads * v_head_dim; }   // merged heads: wo's in features
};
MhaDims resolve(const attngen_mha_config &config);

// The attention problem on the heads of an MHA call.
SdpaShape attention_shape(const MhaDims &d, int batch, int q_len, int kv_len);

struct MhaResult {
    std::vector<double> out;      // [batch, q_len, d_model]
    std::vector<double> weights;  // [batch, heads, q_len, kv_len]
    // Intermediates, in head layout [batch, heads, len, head_dim] (keys and values with the
    // key/value heads, v_head_dim wide), rotated where the config says, for rounding bounds.
    std::vector<double> q_heads;
    std::vector<double> k_heads;
    std::vector<double> v_heads;
    std::vector<double> attn;  // heads merged, before the output projection: [B, Lq, H*vhd]
    SdpaResult sdpa;           // the attention on the heads, as sdpa() returned it
};

// Rotates heads [batch, heads, len, head_dim] in place as DESIGN.md defines rotary positions:
// the pair (k, k + rotary_dim/2) (ATTNGEN_ROPE_HALF) or (2k, 2k + 1) (INTERLEAVED) of row l of
// item b turns by the angle position * theta^(-2k/rotary_dim), position = l + offsets[b].
void rope(std::vector<double> &heads, int batch, int num_heads, int len, int head_dim,
          attngen_rope mode, int rotary_dim, double theta, const std::vector<long long> &offsets);

// MHA(q, k, v) = concat_h(Attention(q Wq_hᵀ + bq_h, k Wk_hᵀ + bk_h, v Wv_hᵀ + bv_h)) Woᵀ + bo,
// with scale 1/sqrt(head_dim) (or attention_scale where it is not 0), grouped key/value heads
// and rotary positions as the config says (key j at position j, query i at i + kv_len - q_len).
// query [B, Lq, d_model], key [B, Lkv, kdim], value [B, Lkv, vdim].
MhaResult mha(const attngen_mha_config &config, const MhaWeights &weights, int batch, int q_len,
              int kv_len, const float *query, const float *key, const float *value,
              const attngen_mask *mask, double attention_scale = 0.0);

}  // namespace attngen_ref

#endif  // ATTNGEN_SUPPORT_REFERENCE_H
