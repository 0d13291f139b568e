// attngen C++ API: a thin, header-only layer over the C API in attngen.h.
//
// Errors are reported as exceptions (attngen::Error, carrying the attngen_status and the
// message of attngen_last_error()). Tensors are passed as views that carry their shape, so a
// shape that does not fit is reported before any kernel runs. Views never own memory.
#ifndef ATTNGEN_ATTNGEN_HPP
#define ATTNGEN_ATTNGEN_HPP

#include <attngen/attngen.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace attngen {

class Error : public std::runtime_error {
  public:
    Error(attngen_status status, const std::string &message)
        : std::runtime_error(std::string(attngen_status_string(status)) + ": " + message),
          status_(status) {}
    attngen_status status() const noexcept { return status_; }

  private:
    attngen_status status_;
};

inline void check(attngen_status status) {
    if (status != ATTNGEN_OK) throw Error(status, attngen_last_error());
}

// A dense row-major view: data plus its shape, outermost dimension first.
template <typename T>
class TensorView {
  public:
    TensorView() = default;
    TensorView(T *data, std::initializer_list<int64_t> shape) : data_(data), shape_(shape) {}
    TensorView(T *data, std::vector<int64_t> shape) : data_(data), shape_(std::move(shape)) {}

    T *data() const noexcept { return data_; }
    const std::vector<int64_t> &shape() const noexcept { return shape_; }
    bool empty() const noexcept { return data_ == nullptr; }

  private:
    T *data_ = nullptr;
    std::vector<int64_t> shape_;
};

namespace detail {
inline std::string shape_string(const std::vector<int64_t> &s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

template <typename T>
void expect_shape(const TensorView<T> &t, const char *name, std::vector<int64_t> expected) {
    if (t.shape() != expected) {
        throw Error(ATTNGEN_ERROR_SHAPE, std::string(name) + ": expected shape " +
                                             shape_string(expected) + ", got " +
                                             shape_string(t.shape()));
    }
}

// A mask part's shape: expected, except that each of the first `broadcast` dimensions may be 1
// (one row for every item or head).
template <typename T>
void expect_mask_shape(const TensorView<T> &t, const char *name, std::vector<int64_t> expected,
                       size_t broadcast) {
    std::vector<int64_t> allowed = expected;
    for (size_t i = 0; i < broadcast && i < t.shape().size() && i < allowed.size(); ++i) {
        if (t.shape()[i] == 1) allowed[i] = 1;
    }
    if (t.shape() != allowed) {
        throw Error(ATTNGEN_ERROR_SHAPE,
                    std::string(name) + ": expected shape " + shape_string(expected) +
                        " (or 1 in the first " + std::to_string(broadcast) + " dimension" +
                        (broadcast > 1 ? "s" : "") + ")" + ", got " + shape_string(t.shape()));
    }
}

template <typename T>
int32_t dim(const TensorView<T> &t, size_t i, const char *name) {
    if (t.shape().size() <= i) {
        throw Error(ATTNGEN_ERROR_SHAPE, std::string(name) + ": has rank " +
                                             std::to_string(t.shape().size()) +
                                             ", needs at least " + std::to_string(i + 1));
    }
    return static_cast<int32_t>(t.shape()[i]);
}
}  // namespace detail

// Mask parts; every part that is set applies (see attngen_mask).
struct Mask {
    attngen_causal causal = ATTNGEN_CAUSAL_NONE;
    TensorView<const int32_t> kv_lengths;  // [batch]
    TensorView<const uint8_t> bool_mask;   // [1 or batch, q_len, kv_len]
    TensorView<const float> additive;      // [1 or batch, 1 or heads, q_len, kv_len]

    // The C mask, every part given checked against the call's sizes first
    // (ATTNGEN_ERROR_SHAPE): the C API cannot see the parts' extents.
    attngen_mask to_c(int32_t batch, int32_t heads, int32_t q_len, int32_t kv_len) const {
        if (!kv_lengths.empty()) detail::expect_shape(kv_lengths, "kv_lengths", {batch});
        if (!bool_mask.empty()) {
            detail::expect_mask_shape(bool_mask, "bool_mask", {batch, q_len, kv_len}, 1);
        }
        if (!additive.empty()) {
            detail::expect_mask_shape(additive, "additive", {batch, heads, q_len, kv_len}, 2);
        }
        return to_c();
    }

    // The C mask as given, its parts' shapes unchecked.
    attngen_mask to_c() const {
        attngen_mask m{};
        m.causal = causal;
        m.kv_lengths = kv_lengths.data();
        m.bool_mask = bool_mask.data();
        m.bool_mask_batch = bool_mask.empty() ? 0 : detail::dim(bool_mask, 0, "bool_mask");
        m.additive = additive.data();
        m.additive_batch = additive.empty() ? 0 : detail::dim(additive, 0, "additive");
        m.additive_heads = additive.empty() ? 0 : detail::dim(additive, 1, "additive");
        return m;
    }
};

struct MhaConfig {
    int32_t d_model = 0;
    int32_t num_heads = 1;
    int32_t kdim = 0;      // 0 = d_model
    int32_t vdim = 0;      // 0 = d_model
    int32_t head_dim = 0;  // 0 = d_model / num_heads
    bool use_bias = true;
    attngen_device device = ATTNGEN_DEVICE_CPU;
    int32_t num_kv_heads = 0;  // 0 = num_heads; must divide it (GQA; 1 = MQA)
    int32_t v_head_dim = 0;    // 0 = head_dim
    attngen_precision precision = ATTNGEN_PRECISION_F32;
    attngen_rope rope = ATTNGEN_ROPE_NONE;
    int32_t rotary_dim = 0;   // 0 = head_dim
    float rope_theta = 0.0f;  // 0 = 10000
};

// Multi-head attention with its own copy of the weights. Movable, not copyable.
// forward() is safe to call from several threads at once.
class MultiHeadAttention {
  public:
    explicit MultiHeadAttention(const MhaConfig &config) : MultiHeadAttention(config, {}) {}

    // A GPU handle in the application's own context and queue (attngen_mha_create_in_context:
    // the rule for which memory it takes is there).
    MultiHeadAttention(const MhaConfig &config, const attngen_gpu_context &gpu) : config_(config) {
        attngen_mha_config c{};
        c.d_model = config.d_model;
        c.num_heads = config.num_heads;
        c.kdim = config.kdim;
        c.vdim = config.vdim;
        c.head_dim = config.head_dim;
        c.use_bias = config.use_bias ? 1 : 0;
        c.device = config.device;
        c.num_kv_heads = config.num_kv_heads;
        c.v_head_dim = config.v_head_dim;
        c.precision = config.precision;
        c.rope = config.rope;
        c.rotary_dim = config.rotary_dim;
        c.rope_theta = config.rope_theta;
        check(attngen_mha_create_in_context(&c, &gpu, &handle_));
        if (config_.kdim == 0) config_.kdim = config_.d_model;
        if (config_.vdim == 0) config_.vdim = config_.d_model;
        if (config_.head_dim == 0) config_.head_dim = config_.d_model / config_.num_heads;
        if (config_.num_kv_heads == 0) config_.num_kv_heads = config_.num_heads;
        if (config_.v_head_dim == 0) config_.v_head_dim = config_.head_dim;
    }
    ~MultiHeadAttention() { attngen_mha_destroy(handle_); }
    MultiHeadAttention(const MultiHeadAttention &) = delete;
    MultiHeadAttention &operator=(const MultiHeadAttention &) = delete;
    MultiHeadAttention(MultiHeadAttention &&o) noexcept : config_(o.config_), handle_(o.handle_) {
        o.handle_ = nullptr;
    }
    MultiHeadAttention &operator=(MultiHeadAttention &&o) noexcept {
        if (this != &o) {
            attngen_mha_destroy(handle_);
            handle_ = o.handle_;
            config_ = o.config_;
            o.handle_ = nullptr;
        }
        return *this;
    }

    const MhaConfig &config() const noexcept { return config_; }
    attngen_mha *handle() const noexcept { return handle_; }

    // Later calls queue their work on `queue`, another queue of the application's context
    // (attngen_mha_set_queue).
    void set_queue(void *queue) { check(attngen_mha_set_queue(handle_, queue)); }

    // Biases are ignored (and may be empty) when the config has use_bias = false.
    void set_weights(TensorView<const float> wq, TensorView<const float> wk,
                     TensorView<const float> wv, TensorView<const float> wo,
                     TensorView<const float> bq = {}, TensorView<const float> bk = {},
                     TensorView<const float> bv = {}, TensorView<const float> bo = {}) {
        const int64_t inner = int64_t(config_.num_heads) * config_.head_dim;
        const int64_t kv_inner = int64_t(config_.num_kv_heads) * config_.head_dim;
        const int64_t v_inner = int64_t(config_.num_kv_heads) * config_.v_head_dim;
        const int64_t out_inner = int64_t(config_.num_heads) * config_.v_head_dim;
        detail::expect_shape(wq, "wq", {inner, config_.d_model});
        detail::expect_shape(wk, "wk", {kv_inner, config_.kdim});
        detail::expect_shape(wv, "wv", {v_inner, config_.vdim});
        detail::expect_shape(wo, "wo", {config_.d_model, out_inner});
        if (config_.use_bias) {
            detail::expect_shape(bq, "bq", {inner});
            detail::expect_shape(bk, "bk", {kv_inner});
            detail::expect_shape(bv, "bv", {v_inner});
            detail::expect_shape(bo, "bo", {config_.d_model});
        }
        check(attngen_mha_set_weights(handle_, wq.data(), wk.data(), wv.data(), wo.data(),
                                      bq.data(), bk.data(), bv.data(), bo.data()));
    }

    // query [B, Lq, d_model], key [B, Lkv, kdim], value [B, Lkv, vdim] -> out [B, Lq, d_model];
    // weights empty or [B, H, Lq, Lkv].
    void forward(TensorView<const float> query, TensorView<const float> key,
                 TensorView<const float> value, TensorView<float> out, const Mask &mask = {},
                 TensorView<float> weights = {}) const {
        const int32_t batch = detail::dim(query, 0, "query");
        const int32_t q_len = detail::dim(query, 1, "query");
        const int32_t kv_len = detail::dim(key, 1, "key");
        detail::expect_shape(query, "query", {batch, q_len, config_.d_model});
        detail::expect_shape(key, "key", {batch, kv_len, config_.kdim});
        detail::expect_shape(value, "value", {batch, kv_len, config_.vdim});
        detail::expect_shape(out, "out", {batch, q_len, config_.d_model});
        if (!weights.empty()) {
            detail::expect_shape(weights, "weights", {batch, config_.num_heads, q_len, kv_len});
        }
        const attngen_mask m = mask.to_c(batch, config_.num_heads, q_len, kv_len);
        check(attngen_mha_forward(handle_, batch, q_len, kv_len, query.data(), key.data(),
                                  value.data(), &m, out.data(), weights.data()));
    }

  private:
    MhaConfig config_;
    attngen_mha *handle_ = nullptr;
};

// The projected (and rotated) keys and values of up to max_batch sequences ("items") of up to
// max_len positions, bound to the handle of the MultiHeadAttention it was made from. The handle
// moves with that object: the cache keeps working after the MultiHeadAttention is moved (into a
// vector that grows, say). Destroying the object that holds the handle, or assigning another
// MultiHeadAttention over it, destroys the handle: its caches must be gone by then.
// One call at a time per cache; different caches may be used concurrently. Movable.
class KvCache {
  public:
    KvCache(const MultiHeadAttention &mha, int32_t max_batch, int32_t max_len)
        : mha_(mha.handle()), config_(mha.config()), max_batch_(max_batch) {
        check(attngen_kv_cache_create(mha_, max_batch, max_len, &cache_));
    }
    ~KvCache() { attngen_kv_cache_destroy(cache_); }
    KvCache(const KvCache &) = delete;
    KvCache &operator=(const KvCache &) = delete;
    KvCache(KvCache &&o) noexcept
        : mha_(o.mha_), config_(o.config_), max_batch_(o.max_batch_), cache_(o.cache_) {
        o.cache_ = nullptr;
    }
    KvCache &operator=(KvCache &&o) noexcept {
        if (this != &o) {
            attngen_kv_cache_destroy(cache_);
            mha_ = o.mha_;
            config_ = o.config_;
            max_batch_ = o.max_batch_;
            cache_ = o.cache_;
            o.cache_ = nullptr;
        }
        return *this;
    }

    attngen_kv_cache *handle() const noexcept { return cache_; }

    // The positions each item holds, [max_batch].
    std::vector<int32_t> lengths() const {
        std::vector<int32_t> n(max_batch_);
        check(attngen_kv_cache_lengths(cache_, n.data()));
        return n;
    }
    void reset(int32_t item = -1) { check(attngen_kv_cache_reset(cache_, item)); }

    // key [B, L, kdim], value [B, L, vdim] appended to items (empty = 0..B-1).
    void append(TensorView<const float> key, TensorView<const float> value,
                const std::vector<int32_t> &items = {}) {
        const MhaConfig &c = config_;
        const int32_t batch = detail::dim(key, 0, "key"), len = detail::dim(key, 1, "key");
        detail::expect_shape(key, "key", {batch, len, c.kdim});
        detail::expect_shape(value, "value", {batch, len, c.vdim});
        expect_items(items, batch);
        check(attngen_kv_cache_append(mha_, cache_, batch, items.empty() ? nullptr : items.data(),
                                      len, key.data(), value.data()));
    }

    // query [B, Lq, d_model] over everything items hold -> out [B, Lq, d_model].
    void forward(TensorView<const float> query, TensorView<float> out,
                 attngen_causal causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT,
                 const std::vector<int32_t> &items = {}) const {
        const MhaConfig &c = config_;
        const int32_t batch = detail::dim(query, 0, "query"),
                      q_len = detail::dim(query, 1, "query");
        detail::expect_shape(query, "query", {batch, q_len, c.d_model});
        detail::expect_shape(out, "out", {batch, q_len, c.d_model});
        expect_items(items, batch);
        check(attngen_mha_forward_cached(mha_, cache_, batch,
                                         items.empty() ? nullptr : items.data(), q_len,
                                         query.data(), causal, out.data()));
    }

  private:
    static void expect_items(const std::vector<int32_t> &items, int32_t batch) {
        if (!items.empty() && int64_t(items.size()) != batch) {
            throw Error(ATTNGEN_ERROR_SHAPE, "items: expected " + std::to_string(batch) +
                                                 " item numbers, got " +
                                                 std::to_string(items.size()));
        }
    }

    attngen_mha *mha_;
    MhaConfig config_;  // resolved, as the handle's
    int32_t max_batch_;
    attngen_kv_cache *cache_ = nullptr;
};

// Scaled dot-product attention on projected heads: q [B, H, Lq, dk], k [B, Hkv, Lkv, dk],
// v [B, Hkv, Lkv, dv] -> out [B, H, Lq, dv], Hkv dividing H (query head h reads h / (H / Hkv));
// weights empty or [B, H, Lq, Lkv]. scale 0 means 1/sqrt(dk).
inline void scaled_dot_product_attention(TensorView<const float> q, TensorView<const float> k,
                                         TensorView<const float> v, TensorView<float> out,
                                         const Mask &mask = {}, float scale = 0.0f,
                                         TensorView<float> weights = {}) {
    const int32_t b = detail::dim(q, 0, "q"), h = detail::dim(q, 1, "q");
    const int32_t lq = detail::dim(q, 2, "q"), dk = detail::dim(q, 3, "q");
    const int32_t lkv = detail::dim(k, 2, "k"), dv = detail::dim(v, 3, "v");
    detail::expect_shape(q, "q", {b, h, lq, dk});
    const int32_t hkv = detail::dim(k, 1, "k");
    detail::expect_shape(k, "k", {b, hkv, lkv, dk});
    detail::expect_shape(v, "v", {b, hkv, lkv, dv});
    detail::expect_shape(out, "out", {b, h, lq, dv});
    if (!weights.empty()) detail::expect_shape(weights, "weights", {b, h, lq, lkv});
    const attngen_mask m = mask.to_c(b, h, lq, lkv);
    check(attngen_sdpa_gqa(b, h, hkv, lq, lkv, dk, dv, q.data(), k.data(), v.data(), &m, scale,
                           out.data(), weights.data()));
}

// y [rows, out] = x [rows, in] wᵀ + bias, with w [out, in] as torch.nn.Linear stores it.
inline void linear(TensorView<const float> x, TensorView<const float> w,
                   TensorView<const float> bias, TensorView<float> y) {
    const int32_t rows = detail::dim(x, 0, "x"), in = detail::dim(x, 1, "x");
    const int32_t out_features = detail::dim(w, 0, "w");
    detail::expect_shape(x, "x", {rows, in});
    detail::expect_shape(w, "w", {out_features, in});
    if (!bias.empty()) detail::expect_shape(bias, "bias", {out_features});
    detail::expect_shape(y, "y", {rows, out_features});
    check(attngen_linear(rows, in, out_features, x.data(), w.data(), bias.data(), y.data()));
}

// The number of threads one call may use, process-wide (attngen_set_num_threads): n >= 1, or 0
// for the default (HL_NUM_THREADS, else the number of cores).
inline void set_num_threads(int32_t n) {
    check(attngen_set_num_threads(n));
}
inline int32_t num_threads() {
    return attngen_get_num_threads();
}

}  // namespace attngen

#endif  // ATTNGEN_ATTNGEN_HPP
