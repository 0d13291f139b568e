#include "validity.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace attngen_fuzz {
namespace {

constexpr attngen_status kInvalid = ATTNGEN_ERROR_INVALID_ARGUMENT;
constexpr attngen_status kShape = ATTNGEN_ERROR_SHAPE;

// Internal buffers may exceed the caller's tensors by padding (a few dozen elements per row) or
// be intermediates of the same order of size: half the limit leaves room for both.
constexpr int64_t kGrayBytes = kMaxTensorBytes / 2;
// Rows of packed weights and features of projections may be padded by this much (generators/
// layout.h pads to 64 features, GPU weights by as much again); taken as given, not derived.
constexpr int64_t kPadding = 128;

// C callers may store any int in an enum field; a C++ load of an out-of-range value as the enum
// type is undefined, so the fields are read as the ints they are.
template <typename Enum>
int32_t raw(const Enum &field) {
    int32_t value;
    std::memcpy(&value, &field, sizeof value);
    return value;
}

void require_positive(Verdict &v, int64_t value, const char *name) {
    if (value <= 0) v.invalid(kInvalid, std::string(name) + " <= 0");
}

void require_given(Verdict &v, bool given, const char *name) {
    if (!given) v.invalid(kInvalid, std::string(name) + " is NULL");
}

// A tensor the caller passes: over the limit it must be refused; near it, either outcome.
void check_tensor(Verdict &v, const char *name, std::initializer_list<int64_t> shape,
                  int64_t element_size) {
    const int64_t bytes = tensor_bytes(shape, element_size);
    if (bytes > kMaxTensorBytes)
        v.invalid(kShape, std::string(name) + " exceeds 2^31 - 1 bytes");
    else if (bytes > kGrayBytes)
        v.gray(std::string(name) + " is near the 32-bit limit");
}

// An intermediate the library may build: only near or over the limit is it a gray zone.
void check_intermediate(Verdict &v, const char *name, std::initializer_list<int64_t> shape) {
    if (tensor_bytes(shape, 4) > kGrayBytes) v.gray(std::string(name) + " is large");
}

// A mask part's leading count: 1 or the full size. Non-positive counts are both "not 1 or
// full" and "non-positive", so either status is right.
void check_count(Verdict &v, int32_t count, int32_t full, const char *name) {
    if (count == 1 || count == full) return;
    v.invalid(kShape, std::string(name) + " is neither 1 nor the full size");
    if (count <= 0) v.errors.insert(kInvalid);
}

void check_mask(Verdict &v, const attngen_mask *mask, int32_t batch, int32_t heads, int32_t q_len,
                int32_t kv_len) {
    // Scores and probabilities exist, at least blockwise, for every (b, h, i, j), with a mask
    // or without one (the runtime refuses more than 2^31 - 1 logits either way).
    check_intermediate(v, "the logits", {batch, heads, q_len, kv_len});
    if (mask == nullptr) return;
    const int32_t causal = raw(mask->causal);
    if (causal != ATTNGEN_CAUSAL_NONE && causal != ATTNGEN_CAUSAL_TOP_LEFT &&
        causal != ATTNGEN_CAUSAL_BOTTOM_RIGHT) {
        v.invalid(kInvalid, "unknown mask.causal");
    }
    // The fuzzer passes kv_lengths only with a batch small enough to read.
    if (mask->kv_lengths != nullptr && batch > 0) {
        for (int32_t b = 0; b < batch; ++b) {
            if (mask->kv_lengths[b] < 0) v.invalid(kInvalid, "negative kv_lengths entry");
            if (mask->kv_lengths[b] > kv_len) v.invalid(kShape, "kv_lengths entry > kv_len");
        }
    }
    if (mask->bool_mask != nullptr) {
        check_count(v, mask->bool_mask_batch, batch, "mask.bool_mask_batch");
        check_tensor(v, "mask.bool_mask", {mask->bool_mask_batch, q_len, kv_len}, 1);
    }
    if (mask->additive != nullptr) {
        check_count(v, mask->additive_batch, batch, "mask.additive_batch");
        check_count(v, mask->additive_heads, heads, "mask.additive_heads");
        check_tensor(v, "mask.additive",
                     {mask->additive_batch, mask->additive_heads, q_len, kv_len}, 4);
    }
}

}  // namespace

void Verdict::invalid(attngen_status status, const std::string &why) {
    may_succeed = false;
    errors.insert(status);
    reasons += why + "; ";
}

void Verdict::gray(const std::string &why) {
    errors.insert(ATTNGEN_ERROR_SHAPE);
    errors.insert(ATTNGEN_ERROR_OUT_OF_MEMORY);
    reasons += why + " (either outcome); ";
}

bool Verdict::allows(attngen_status status) const {
    return status == ATTNGEN_OK ? may_succeed : errors.count(status) != 0;
}

int64_t tensor_bytes(std::initializer_list<int64_t> shape, int64_t element_size) {
    const int64_t saturated = INT64_MAX / 4;
    int64_t bytes = element_size;
    for (int64_t extent : shape) {
        const int64_t e = std::max<int64_t>(extent, 0);
        bytes = (e != 0 && bytes > saturated / e) ? saturated : bytes * e;
    }
    return bytes;
}

Verdict create_verdict(const attngen_mha_config &c) {
    Verdict v;
    require_positive(v, c.d_model, "config.d_model");
    require_positive(v, c.num_heads, "config.num_heads");
    if (c.kdim < 0) v.invalid(kInvalid, "config.kdim < 0");
    if (c.vdim < 0) v.invalid(kInvalid, "config.vdim < 0");
    if (c.head_dim < 0) v.invalid(kInvalid, "config.head_dim < 0");
    const int32_t device = raw(c.device);
    if (device != ATTNGEN_DEVICE_CPU && device != ATTNGEN_DEVICE_CUDA &&
        device != ATTNGEN_DEVICE_OPENCL) {
        v.invalid(kInvalid, "unknown config.device");
    }
    if (c.d_model > 0 && c.num_heads > 0 && c.head_dim == 0 && c.d_model % c.num_heads != 0)
        v.invalid(kShape, "d_model not divisible by num_heads");
    if (c.d_model > 0 && c.num_heads > 0 && c.kdim >= 0 && c.vdim >= 0 && c.head_dim >= 0) {
        const int64_t kdim = c.kdim ? c.kdim : c.d_model, vdim = c.vdim ? c.vdim : c.d_model;
        const int64_t head_dim = c.head_dim ? c.head_dim : c.d_model / c.num_heads;
        const int64_t inner = int64_t(c.num_heads) * head_dim;
        check_tensor(v, "wq", {inner, c.d_model}, 4);
        check_tensor(v, "wk", {inner, kdim}, 4);
        check_tensor(v, "wv", {inner, vdim}, 4);
        check_tensor(v, "wo", {c.d_model, inner}, 4);
        const int64_t widest_input = std::max<int64_t>({c.d_model, kdim, vdim});
        check_intermediate(v, "packed weights", {inner + kPadding, widest_input});
        check_intermediate(v, "packed wo", {c.d_model + kPadding, inner + kPadding});
    }
    // A GPU may be missing (DEVICE) or not built (UNSUPPORTED); where it works, create succeeds.
    if (device == ATTNGEN_DEVICE_CUDA || device == ATTNGEN_DEVICE_OPENCL) {
        v.errors.insert(ATTNGEN_ERROR_UNSUPPORTED);
        v.errors.insert(ATTNGEN_ERROR_DEVICE);
    }
    return v;
}

Verdict set_weights_verdict(const attngen_mha_config &c, bool have_handle, bool all_weights_given,
                            bool all_biases_given) {
    Verdict v;
    require_given(v, have_handle, "m");
    require_given(v, all_weights_given, "a weight");
    if (c.use_bias != 0) require_given(v, all_biases_given, "a bias (use_bias set)");
    return v;
}

Verdict forward_verdict(const attngen_mha_config &c, const ForwardCall &f) {
    Verdict v;
    require_given(v, f.have_handle, "m");
    require_positive(v, f.batch, "batch");
    require_positive(v, f.q_len, "q_len");
    require_positive(v, f.kv_len, "kv_len");
    require_given(v, f.query_given, "query");
    require_given(v, f.key_given, "key");
    require_given(v, f.value_given, "value");
    require_given(v, f.out_given, "out");
    if (f.have_handle && !f.weights_were_set) v.invalid(kInvalid, "forward before set_weights");
    const int64_t kdim = c.kdim ? c.kdim : c.d_model, vdim = c.vdim ? c.vdim : c.d_model;
    const int64_t head_dim = c.head_dim ? c.head_dim : c.d_model / c.num_heads;
    const int64_t inner = int64_t(c.num_heads) * head_dim;
    check_tensor(v, "query", {f.batch, f.q_len, c.d_model}, 4);
    check_tensor(v, "key", {f.batch, f.kv_len, kdim}, 4);
    check_tensor(v, "value", {f.batch, f.kv_len, vdim}, 4);
    check_tensor(v, "out", {f.batch, f.q_len, c.d_model}, 4);
    if (f.weights_given) check_tensor(v, "weights", {f.batch, c.num_heads, f.q_len, f.kv_len}, 4);
    check_intermediate(v, "projected queries", {f.batch, f.q_len, inner + kPadding});
    check_intermediate(v, "projected keys and values", {f.batch, f.kv_len, inner + kPadding});
    check_mask(v, f.mask, f.batch, c.num_heads, f.q_len, f.kv_len);
    return v;
}

Verdict sdpa_verdict(const SdpaCall &s) {
    Verdict v;
    require_positive(v, s.batch, "batch");
    require_positive(v, s.heads, "heads");
    require_positive(v, s.q_len, "q_len");
    require_positive(v, s.kv_len, "kv_len");
    require_positive(v, s.dk, "dk");
    require_positive(v, s.dv, "dv");
    require_given(v, s.q_given, "q");
    require_given(v, s.k_given, "k");
    require_given(v, s.v_given, "v");
    require_given(v, s.out_given, "out");
    if (!std::isfinite(s.scale)) v.invalid(kInvalid, "scale not finite");
    check_tensor(v, "q", {s.batch, s.heads, s.q_len, s.dk}, 4);
    check_tensor(v, "k", {s.batch, s.heads, s.kv_len, s.dk}, 4);
    check_tensor(v, "v", {s.batch, s.heads, s.kv_len, s.dv}, 4);
    check_tensor(v, "out", {s.batch, s.heads, s.q_len, s.dv}, 4);
    if (s.weights_given) check_tensor(v, "weights", {s.batch, s.heads, s.q_len, s.kv_len}, 4);
    check_mask(v, s.mask, s.batch, s.heads, s.q_len, s.kv_len);
    return v;
}

Verdict linear_verdict(const LinearCall &l) {
    Verdict v;
    require_positive(v, l.rows, "rows");
    require_positive(v, l.in_features, "in_features");
    require_positive(v, l.out_features, "out_features");
    require_given(v, l.x_given, "x");
    require_given(v, l.w_given, "w");
    require_given(v, l.y_given, "y");
    check_tensor(v, "x", {l.rows, l.in_features}, 4);
    check_tensor(v, "w", {l.out_features, l.in_features}, 4);
    check_tensor(v, "y", {l.rows, l.out_features}, 4);
    return v;
}

Verdict set_num_threads_verdict(int32_t n) {
    Verdict v;
    if (n < 0 || n > 256) v.invalid(kInvalid, "n outside 0..256");
    return v;
}

}  // namespace attngen_fuzz
