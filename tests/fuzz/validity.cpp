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
    // Scores and probabilities exist, at least blockwise, for every (b, h, i, j): past 2^31 - 1
    // of them a call may run (flash attention) or be refused (a kernel that materializes).
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

// The sizes of a handle whose config passed create, its zero defaults resolved as attngen.h
// states them.
struct Dims {
    int64_t d_model, kdim, vdim, heads, kv_heads, head_dim, v_head_dim;
    int64_t q_inner() const { return heads * head_dim; }
    int64_t k_inner() const { return kv_heads * head_dim; }
    int64_t v_inner() const { return kv_heads * v_head_dim; }
    int64_t merged() const { return heads * v_head_dim; }
};

Dims resolve(const attngen_mha_config &c) {
    Dims d;
    d.d_model = c.d_model;
    d.kdim = c.kdim ? c.kdim : c.d_model;
    d.vdim = c.vdim ? c.vdim : c.d_model;
    d.heads = c.num_heads;
    d.kv_heads = c.num_kv_heads ? c.num_kv_heads : c.num_heads;
    d.head_dim = c.head_dim ? c.head_dim : c.d_model / c.num_heads;
    d.v_head_dim = c.v_head_dim ? c.v_head_dim : d.head_dim;
    return d;
}

// A cache, the handle and the items a cache call names. Item numbers are read only when the
// fuzzer passed an array of batch entries.
void check_cache_call(Verdict &v, const CacheCall &c) {
    require_given(v, c.have_handle, "m");
    require_given(v, c.cache != nullptr, "c");
    require_positive(v, c.batch, "batch");
    if (c.have_handle && !c.weights_were_set) v.invalid(kInvalid, "before set_weights");
    if (c.have_handle && c.cache != nullptr && !c.cache_of_this_handle)
        v.invalid(kInvalid, "a cache of another handle");
    if (!c.inputs_finite) v.invalid(kInvalid, "non-finite input");
    if (c.projections_may_overflow)
        v.tolerate(kInvalid, "projections of finite inputs may not be finite");
    if (c.cache == nullptr || c.batch <= 0) return;
    const int32_t max_batch = c.cache->max_batch;
    if (c.items == nullptr) {
        // Items 0..batch-1: past max_batch they do not exist; which status says so is open.
        if (c.batch > max_batch) {
            v.invalid(kShape, "batch > max_batch (items NULL)");
            v.errors.insert(kInvalid);
        }
        return;
    }
    std::set<int32_t> seen;
    for (int32_t b = 0; b < c.batch; ++b) {
        const int32_t item = c.items[b];
        if (item < 0 || item >= max_batch) v.invalid(kInvalid, "item out of range");
        if (!seen.insert(item).second) v.invalid(kInvalid, "item named twice");
    }
    // More entries than items exist: necessarily one of the above; a batch-size check may
    // report it first.
    if (c.batch > max_batch) v.errors.insert(kShape);
}

// The items a valid cache call reaches: items[b], or b.
int32_t item_of(const CacheCall &c, int32_t b) {
    return c.items != nullptr ? c.items[b] : b;
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

void Verdict::tolerate(attngen_status status, const std::string &why) {
    errors.insert(status);
    reasons += why + " (may fail); ";
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

// The most heads, and features per head, the kernels take (runtime/mha_config.cpp).
constexpr int64_t kMaxPerHead = 1 << 16;

Verdict create_verdict(const attngen_mha_config &c) {
    Verdict v;
    require_positive(v, c.d_model, "config.d_model");
    require_positive(v, c.num_heads, "config.num_heads");
    if (c.kdim < 0) v.invalid(kInvalid, "config.kdim < 0");
    if (c.vdim < 0) v.invalid(kInvalid, "config.vdim < 0");
    if (c.head_dim < 0) v.invalid(kInvalid, "config.head_dim < 0");
    if (c.num_kv_heads < 0) v.invalid(kInvalid, "config.num_kv_heads < 0");
    if (c.v_head_dim < 0) v.invalid(kInvalid, "config.v_head_dim < 0");
    const int32_t device = raw(c.device);
    if (device != ATTNGEN_DEVICE_CPU && device != ATTNGEN_DEVICE_CUDA &&
        device != ATTNGEN_DEVICE_OPENCL) {
        v.invalid(kInvalid, "unknown config.device");
    }
    const int32_t precision = raw(c.precision);
    if (precision != ATTNGEN_PRECISION_F32 && precision != ATTNGEN_PRECISION_BF16 &&
        precision != ATTNGEN_PRECISION_F16) {
        v.invalid(kInvalid, "unknown config.precision");
    }
    const int32_t rope = raw(c.rope);
    const bool rope_known =
        rope == ATTNGEN_ROPE_NONE || rope == ATTNGEN_ROPE_HALF || rope == ATTNGEN_ROPE_INTERLEAVED;
    if (!rope_known) v.invalid(kInvalid, "unknown config.rope");
    const bool rotates = rope == ATTNGEN_ROPE_HALF || rope == ATTNGEN_ROPE_INTERLEAVED;
    if (c.d_model > 0 && c.num_heads > 0 && c.head_dim == 0 && c.d_model % c.num_heads != 0)
        v.invalid(kShape, "d_model not divisible by num_heads");
    if (c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads != 0)
        v.invalid(kShape, "num_kv_heads does not divide num_heads");

    // Rotary fields: with rotation they must make sense; without it attngen.h does not say
    // whether they are checked, so a refusal is allowed but not required.
    const auto rotary_problem = [&](attngen_status status, const std::string &why) {
        if (rotates) {
            v.invalid(status, why);
            v.errors.insert(status == kShape ? kInvalid : kShape);  // "even" is either kind
        } else {
            v.tolerate(kInvalid, why + " (no rotation)");
            v.tolerate(kShape, why + " (no rotation)");
        }
    };
    if (c.rotary_dim < 0) rotary_problem(kInvalid, "config.rotary_dim < 0");
    const bool head_dim_known = c.d_model > 0 && c.num_heads > 0 && c.head_dim >= 0 &&
                                (c.head_dim > 0 || c.d_model % c.num_heads == 0);
    if (head_dim_known && c.rotary_dim >= 0) {
        const int64_t head_dim = c.head_dim ? c.head_dim : c.d_model / c.num_heads;
        const int64_t rotary = c.rotary_dim ? c.rotary_dim : head_dim;
        if (rotary % 2 != 0) rotary_problem(kShape, "rotary_dim (or head_dim) is odd");
        if (rotary > head_dim) rotary_problem(kShape, "rotary_dim > head_dim");
        // Its table is built whether or not the handle rotates: refused either way.
        if (rotary > kMaxPerHead) v.invalid(kShape, "rotary_dim beyond 65536");
    }
    // 0 means 10000; attngen.h gives no range. A NaN, infinite or non-positive base gives NaN or
    // meaningless angles, and one of 1 or less does not slow the turning of higher pairs (the
    // runtime refuses those too, which attngen.h does not say): a refusal is allowed.
    if (!(c.rope_theta == 0.0f || (std::isfinite(c.rope_theta) && c.rope_theta > 1.0f)))
        v.tolerate(kInvalid, "rope_theta neither 0 nor a finite number above 1");

    if (c.d_model > 0 && c.num_heads > 0 && c.kdim >= 0 && c.vdim >= 0 && c.head_dim >= 0 &&
        c.num_kv_heads >= 0 && c.v_head_dim >= 0) {
        const Dims d = resolve(c);
        for (int64_t per_head : {d.heads, d.kv_heads, d.head_dim, d.v_head_dim}) {
            if (per_head > kMaxPerHead) v.invalid(kShape, "heads or a head size beyond 65536");
        }
        check_tensor(v, "wq", {d.q_inner(), d.d_model}, 4);
        check_tensor(v, "wk", {d.k_inner(), d.kdim}, 4);
        check_tensor(v, "wv", {d.v_inner(), d.vdim}, 4);
        check_tensor(v, "wo", {d.d_model, d.merged()}, 4);
        const int64_t widest_input = std::max<int64_t>({d.d_model, d.kdim, d.vdim});
        const int64_t widest_output = std::max<int64_t>({d.q_inner(), d.k_inner(), d.v_inner()});
        check_intermediate(v, "packed weights", {widest_output + kPadding, widest_input});
        check_intermediate(v, "packed wo", {d.d_model + kPadding, d.merged() + kPadding});
    }
    // A GPU may be missing (DEVICE) or not built (UNSUPPORTED); where it works, create succeeds.
    if (device == ATTNGEN_DEVICE_CUDA || device == ATTNGEN_DEVICE_OPENCL) {
        v.errors.insert(ATTNGEN_ERROR_UNSUPPORTED);
        v.errors.insert(ATTNGEN_ERROR_DEVICE);
    }
    return v;
}

Verdict set_weights_verdict(const attngen_mha_config &c, bool have_handle, bool all_weights_given,
                            bool all_biases_given, bool weights_finite,
                            bool weights_fit_precision) {
    Verdict v;
    require_given(v, have_handle, "m");
    require_given(v, all_weights_given, "a weight");
    if (c.use_bias != 0) require_given(v, all_biases_given, "a bias (use_bias set)");
    // attngen.h: a weight or bias that is NaN or infinite is refused. Only a given one can be
    // seen; with some missing, the NULL refusal may come first.
    if (!weights_finite) v.invalid(kInvalid, "a NaN or infinite weight or bias");
    if (all_weights_given && !weights_fit_precision)
        v.invalid(kInvalid, "a finite weight beyond float16's range");
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
    const Dims d = resolve(c);
    check_tensor(v, "query", {f.batch, f.q_len, d.d_model}, 4);
    check_tensor(v, "key", {f.batch, f.kv_len, d.kdim}, 4);
    check_tensor(v, "value", {f.batch, f.kv_len, d.vdim}, 4);
    check_tensor(v, "out", {f.batch, f.q_len, d.d_model}, 4);
    if (f.weights_given) check_tensor(v, "weights", {f.batch, d.heads, f.q_len, f.kv_len}, 4);
    const int64_t q_inner = std::max(d.q_inner(), d.merged());
    const int64_t kv_inner = std::max(d.k_inner(), d.v_inner());
    check_intermediate(v, "projected queries", {f.batch, f.q_len, q_inner + kPadding});
    check_intermediate(v, "projected keys and values", {f.batch, f.kv_len, kv_inner + kPadding});
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
    const int32_t kv_heads = s.grouped ? s.kv_heads : s.heads;
    if (s.grouped) {
        require_positive(v, s.kv_heads, "kv_heads");
        if (s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads != 0)
            v.invalid(kShape, "kv_heads does not divide heads");
    }
    check_tensor(v, "q", {s.batch, s.heads, s.q_len, s.dk}, 4);
    check_tensor(v, "k", {s.batch, kv_heads, s.kv_len, s.dk}, 4);
    check_tensor(v, "v", {s.batch, kv_heads, s.kv_len, s.dv}, 4);
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

Verdict kv_cache_create_verdict(const attngen_mha_config &c, const CacheCreateCall &call) {
    Verdict v;
    require_given(v, call.have_handle, "m");
    require_given(v, call.out_given, "out");
    require_positive(v, call.max_batch, "max_batch");
    require_positive(v, call.max_len, "max_len");
    // A GPU handle's cache is device memory (zeroed from a host staging buffer), which the
    // device may refuse.
    if (call.have_handle && raw(c.device) != ATTNGEN_DEVICE_CPU) {
        v.errors.insert(ATTNGEN_ERROR_DEVICE);
        v.errors.insert(ATTNGEN_ERROR_OUT_OF_MEMORY);
    }
    // Keys and values of every position, float32. attngen.h names no limit; a cache no address
    // space can hold must be refused, one of a few GiB or more may be (the fuzzer never makes
    // one that may succeed: libFuzzer's malloc limit would stop it).
    const Dims d = resolve(c);
    const int64_t per_position = d.kv_heads * (d.head_dim + d.v_head_dim);
    const int64_t total = tensor_bytes({call.max_batch, call.max_len, per_position}, 4);
    if (total > (int64_t(1) << 47)) {
        v.invalid(kShape, "the cache exceeds any address space");
        v.errors.insert(ATTNGEN_ERROR_OUT_OF_MEMORY);
    } else if (tensor_bytes({call.max_len, per_position}, 4) > kMaxTensorBytes ||
               total > kGrayBytes) {
        v.gray("the cache is huge");
    }
    return v;
}

Verdict kv_cache_lengths_verdict(bool have_cache, bool lengths_given) {
    Verdict v;
    require_given(v, have_cache, "c");
    require_given(v, lengths_given, "lengths");
    return v;
}

Verdict kv_cache_reset_verdict(const CacheState *cache, int32_t item) {
    Verdict v;
    require_given(v, cache != nullptr, "c");
    if (cache != nullptr && (item < -1 || item >= cache->max_batch))
        v.invalid(kInvalid, "item neither -1 nor an item of the cache");
    return v;
}

Verdict kv_cache_append_verdict(const attngen_mha_config &c, const AppendCall &a) {
    Verdict v;
    check_cache_call(v, a.common);
    require_positive(v, a.len, "len");
    require_given(v, a.key_given, "key");
    require_given(v, a.value_given, "value");
    const Dims d = resolve(c);
    const int32_t batch = a.common.batch;
    check_tensor(v, "key", {batch, a.len, d.kdim}, 4);
    check_tensor(v, "value", {batch, a.len, d.vdim}, 4);
    // Past max_len for any item it names: SHAPE, and nothing is appended anywhere.
    const CacheState *cache = a.common.cache;
    if (cache != nullptr && a.len > 0) {
        for (int32_t b = 0; b < std::min(batch, cache->max_batch); ++b) {
            const int32_t item = item_of(a.common, b);
            if (item < 0 || item >= cache->max_batch) continue;  // refused above
            if (int64_t(cache->lengths[item]) + a.len > cache->max_len)
                v.invalid(kShape, "an item would pass max_len");
        }
    }
    return v;
}

Verdict forward_cached_verdict(const attngen_mha_config &c, const CachedForwardCall &f) {
    Verdict v;
    check_cache_call(v, f.common);
    require_positive(v, f.q_len, "q_len");
    require_given(v, f.query_given, "query");
    require_given(v, f.out_given, "out");
    const int32_t causal = f.causal;
    if (causal == ATTNGEN_CAUSAL_TOP_LEFT)
        v.invalid(kInvalid, "top-left causal (a cache has no top-left alignment)");
    else if (causal != ATTNGEN_CAUSAL_NONE && causal != ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        v.invalid(kInvalid, "unknown causal");
    const Dims d = resolve(c);
    const int32_t batch = f.common.batch;
    check_tensor(v, "query", {batch, f.q_len, d.d_model}, 4);
    check_tensor(v, "out", {batch, f.q_len, d.d_model}, 4);
    if (f.common.cache != nullptr) {
        const int32_t max_len = f.common.cache->max_len;
        check_intermediate(v, "the logits", {batch, d.heads, f.q_len, max_len});
        check_intermediate(v, "projected queries",
                           {batch, f.q_len, std::max(d.q_inner(), d.merged()) + kPadding});
    }
    return v;
}

}  // namespace attngen_fuzz
