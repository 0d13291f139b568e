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
};

// Multi-head attention with its own copy of the weights. Movable, not copyable.
// forward() is safe to call from several threads at once.
class MultiHeadAttention {
  public:
    explicit MultiHeadAttention(const MhaConfig &config) : config_(config) {
        attngen_mha_config c{};
        c.d_model = config.d_model;
        c.num_heads = config.num_heads;
        c.kdim = config.kdim;
        c.vdim = config.vdim;
        c.head_dim = config.head_dim;
        c.use_bias = config.use_bias ? 1 : 0;
        c.device = config.device;
        check(attngen_mha_create(&c, &handle_));
        if (config_.kdim == 0) config_.kdim = config_.d_model;
        if (config_.vdim == 0) config_.vdim = config_.d_model;
        if (config_.head_dim == 0) config_.head_dim = config_.d_model / config_.num_heads;
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

    // Biases are ignored (and may be empty) when the config has use_bias = false.
    void set_weights(TensorView<const float> wq, TensorView<const float> wk,
                     TensorView<const float> wv, TensorView<const float> wo,
                     TensorView<const float> bq = {}, TensorView<const float> bk = {},
                     TensorView<const float> bv = {}, TensorView<const float> bo = {}) {
        const int64_t inner = int64_t(config_.num_heads) * config_.head_dim;
        detail::expect_shape(wq, "wq", {inner, config_.d_model});
        detail::expect_shape(wk, "wk", {inner, config_.kdim});
        detail::expect_shape(wv, "wv", {inner, config_.vdim});
        detail::expect_shape(wo, "wo", {config_.d_model, inner});
        if (config_.use_bias) {
            detail::expect_shape(bq, "bq", {inner});
            detail::expect_shape(bk, "bk", {inner});
            detail::expect_shape(bv, "bv", {inner});
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
        const attngen_mask m = mask.to_c();
        check(attngen_mha_forward(handle_, batch, q_len, kv_len, query.data(), key.data(),
                                  value.data(), &m, out.data(), weights.data()));
    }

  private:
    MhaConfig config_;
    attngen_mha *handle_ = nullptr;
};

// Scaled dot-product attention on projected heads: q [B, H, Lq, dk], k [B, H, Lkv, dk],
// v [B, H, Lkv, dv] -> out [B, H, Lq, dv]; weights empty or [B, H, Lq, Lkv].
// scale 0 means 1/sqrt(dk).
inline void scaled_dot_product_attention(TensorView<const float> q, TensorView<const float> k,
                                         TensorView<const float> v, TensorView<float> out,
                                         const Mask &mask = {}, float scale = 0.0f,
                                         TensorView<float> weights = {}) {
    const int32_t b = detail::dim(q, 0, "q"), h = detail::dim(q, 1, "q");
    const int32_t lq = detail::dim(q, 2, "q"), dk = detail::dim(q, 3, "q");
    const int32_t lkv = detail::dim(k, 2, "k"), dv = detail::dim(v, 3, "v");
    detail::expect_shape(q, "q", {b, h, lq, dk});
    detail::expect_shape(k, "k", {b, h, lkv, dk});
    detail::expect_shape(v, "v", {b, h, lkv, dv});
    detail::expect_shape(out, "out", {b, h, lq, dv});
    if (!weights.empty()) detail::expect_shape(weights, "weights", {b, h, lq, lkv});
    const attngen_mask m = mask.to_c();
    check(attngen_sdpa(b, h, lq, lkv, dk, dv, q.data(), k.data(), v.data(), &m, scale, out.data(),
                       weights.data()));
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
