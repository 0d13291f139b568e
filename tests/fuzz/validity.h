// The fuzzer's own idea of which calls are valid, written from the C API contract
// (include/attngen/attngen.h, DESIGN.md) and not from the runtime's code, so the two can be
// checked against each other.
#ifndef ATTNGEN_TESTS_FUZZ_VALIDITY_H
#define ATTNGEN_TESTS_FUZZ_VALIDITY_H

#include <attngen/attngen.h>

#include <cstdint>
#include <set>
#include <string>

namespace attngen_fuzz {

// What a call may return. A valid call must succeed; an invalid one must fail with one of the
// statuses that apply (when several problems apply at once the contract does not say which is
// reported). Sizes close to the 32-bit limits are a gray zone where the library may use
// internal buffers a little larger than the caller's (padding, intermediates): there success
// and a SHAPE or OUT_OF_MEMORY error are all allowed.
struct Verdict {
    bool may_succeed = true;
    std::set<attngen_status> errors;  // statuses a failure may report
    std::string reasons;              // why, for the crash report

    bool must_succeed() const { return may_succeed && errors.empty(); }
    void invalid(attngen_status status, const std::string &why);  // the call must fail
    void gray(const std::string &why);                            // either outcome is fine
    // The call may also fail with this status, where the contract leaves it open.
    void tolerate(attngen_status status, const std::string &why);
    bool allows(attngen_status status) const;
};

// Bytes in a dense tensor of this shape, saturating instead of overflowing; negative extents
// count as 0 (they are reported as invalid sizes elsewhere).
int64_t tensor_bytes(std::initializer_list<int64_t> shape, int64_t element_size);

// The largest tensor a kernel can address: Halide indexes with 32-bit integers.
constexpr int64_t kMaxTensorBytes = INT32_MAX;

Verdict create_verdict(const attngen_mha_config &config);

// config has passed create; use_bias says whether biases are required. weights_finite: every
// given weight and (with use_bias) bias is finite; weights_fit_precision: no finite weight is
// beyond the range of the handle's precision (float16: 65504).
Verdict set_weights_verdict(const attngen_mha_config &config, bool have_handle,
                            bool all_weights_given, bool all_biases_given, bool weights_finite,
                            bool weights_fit_precision);

// Sizes of one forward call on a handle made from config (which passed create).
struct ForwardCall {
    int32_t batch, q_len, kv_len;
    bool have_handle, weights_were_set;
    bool query_given, key_given, value_given, out_given, weights_given;
    const attngen_mask *mask;  // may be NULL
};
Verdict forward_verdict(const attngen_mha_config &config, const ForwardCall &call);

struct SdpaCall {
    int32_t batch, heads, q_len, kv_len, dk, dv;
    bool q_given, k_given, v_given, out_given, weights_given;
    const attngen_mask *mask;
    float scale;
    bool grouped;      // attngen_sdpa_gqa, with kv_heads; else attngen_sdpa
    int32_t kv_heads;  // heads of k and v when grouped
};
Verdict sdpa_verdict(const SdpaCall &call);

struct LinearCall {
    int32_t rows, in_features, out_features;
    bool x_given, w_given, y_given;
};
Verdict linear_verdict(const LinearCall &call);

Verdict set_num_threads_verdict(int32_t n);

// ---------------------------------------------------------------------------------------------
// The KV cache (0.2). A cache the fuzzer holds is described by its sizes and the lengths of its
// items as the fuzzer's own model of it has them.
struct CacheState {
    int32_t max_batch, max_len;
    const int32_t *lengths;  // [max_batch]
};

// config is the handle's, which passed create.
struct CacheCreateCall {
    int32_t max_batch, max_len;
    bool have_handle, out_given;
};
Verdict kv_cache_create_verdict(const attngen_mha_config &config, const CacheCreateCall &call);

Verdict kv_cache_lengths_verdict(bool have_cache, bool lengths_given);

// cache: NULL when the call passes no cache.
Verdict kv_cache_reset_verdict(const CacheState *cache, int32_t item);

// What append and forward_cached share: the handle, the cache and the items.
struct CacheCall {
    bool have_handle, weights_were_set;
    const CacheState *cache;  // NULL when the call passes no cache
    bool cache_of_this_handle;
    int32_t batch;
    const int32_t
        *items;          // NULL, or [batch] entries (the fuzzer passes them only for small batches)
    bool inputs_finite;  // every input element the call reads is finite
    // The projections of finite inputs may still leave float range (huge or non-finite weights):
    // the contract refuses non-finite inputs, and may or may not see such projections as such.
    bool projections_may_overflow;
};

struct AppendCall {
    CacheCall common;
    int32_t len;
    bool key_given, value_given;
};
Verdict kv_cache_append_verdict(const attngen_mha_config &config, const AppendCall &call);

struct CachedForwardCall {
    CacheCall common;
    int32_t q_len;
    bool query_given, out_given;
    int32_t causal;  // any int: a C caller may pass any value as the enum
};
Verdict forward_cached_verdict(const attngen_mha_config &config, const CachedForwardCall &call);

}  // namespace attngen_fuzz

#endif  // ATTNGEN_TESTS_FUZZ_VALIDITY_H
