// Calling a kernel made by attngen_add_library (README: "Use attngen from your build").
//
// Such a kernel is the fused MHA forward with some sizes fixed at build time. Its function,
// <name>(), takes Halide buffers in the layouts of generators/generators.cpp; this header builds
// them from the row-major tensors of the C API:
//
//   attngen::specialized::MhaWeights w(d_model, num_heads, head_dim, kdim, vdim,
//                                      wq, wk, wv, wo, bq, bk, bv, bo);   // packed once
//   int code = attngen::specialized::forward(my_kernel, w, batch, q_len, kv_len,
//                                            query, key, value, mask, out);
//
// The result is 0 or a Halide error code (halide_error_code_t) with attngen_last_error()
// saying what was wrong, e.g. a num_heads other than the one the kernel was made for. Before
// the kernel runs, forward() refuses what attngen_mha_forward refuses by shape: NULL tensors,
// sizes <= 0, mask parts of a count other than 1 or the call's, kv_lengths outside 0..kv_len,
// a tensor past the 2^31 - 1 bytes a kernel indexes (halide_error_code_buffer_argument_is_null,
// _bad_dimensions, _buffer_extents_too_large); MhaWeights throws std::invalid_argument for
// what attngen_mha_create and set_weights refuse (sizes, NULL weights, mixed biases, NaN or
// infinite weights and biases). Unlike
// attngen_mha_forward, inputs are not scanned for NaN or infinity (the kernels are compiled
// with fast math: a non-finite input gives unspecified outputs, possibly finite ones), and out
// may be partly written when a kernel fails.
#ifndef ATTNGEN_SPECIALIZED_HPP
#define ATTNGEN_SPECIALIZED_HPP

#include <attngen/attngen.h>
#include <attngen/detail/fused_forward_call.h>
#include <attngen/detail/mask_buffers.h>
#include <attngen/detail/packed_projection.h>
#include <attngen/detail/tensor_buffer.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attngen::specialized {

// An MHA module's sizes and weights, packed as the kernels take them. Arguments as for
// attngen_mha_config and attngen_mha_set_weights (kdim, vdim 0 = d_model; head_dim 0 =
// d_model / num_heads; biases NULL or all four given); device: the kernel's (GPU kernels take
// more padding). Throws std::invalid_argument for sizes or pointers those refuse.
// Grouped heads, a separate value head size and rotary positions are not taken here yet: the
// kernel is called with num_kv_heads = num_heads, v_head_dim = head_dim and no rotation.
struct MhaWeights {
    int32_t d_model, num_heads, head_dim, kdim, vdim;
    rt::PackedProjection q, k, v, o;

    MhaWeights(int32_t d_model_, int32_t num_heads_, int32_t head_dim_, int32_t kdim_,
               int32_t vdim_, const float *wq, const float *wk, const float *wv, const float *wo,
               const float *bq = nullptr, const float *bk = nullptr, const float *bv = nullptr,
               const float *bo = nullptr, attngen_device device = ATTNGEN_DEVICE_CPU)
        : d_model(d_model_),
          num_heads(num_heads_),
          head_dim(resolved_head_dim(d_model_, num_heads_, head_dim_)),
          kdim(kdim_ ? kdim_ : d_model_),
          vdim(vdim_ ? vdim_ : d_model_) {
        if (kdim <= 0 || vdim <= 0) throw std::invalid_argument("MhaWeights: kdim or vdim < 0");
        // attngen_mha_create's limits: what a kernel can index.
        constexpr int64_t kMaxBytes = INT32_MAX;
        if (num_heads > kMaxPerHead || head_dim > kMaxPerHead) {
            throw std::invalid_argument("MhaWeights: num_heads and head_dim are at most 65536");
        }
        const int64_t padded =
            int64_t(num_heads) * head_dim + kWeightPadding + kGpuExtraWeightPadding;
        for (int64_t features : {int64_t(d_model), int64_t(kdim), int64_t(vdim)}) {
            if (padded * features * int64_t(sizeof(float)) > kMaxBytes) {
                throw std::invalid_argument(
                    "MhaWeights: a weight matrix passes the 2^31 - 1 "
                    "bytes a kernel can address");
            }
        }
        if (!wq || !wk || !wv || !wo) throw std::invalid_argument("MhaWeights: a weight is NULL");
        const int biases = (bq != nullptr) + (bk != nullptr) + (bv != nullptr) + (bo != nullptr);
        if (biases != 0 && biases != 4) {
            throw std::invalid_argument("MhaWeights: biases are NULL or all four given");
        }
        const int32_t inner = num_heads * head_dim;
        // As attngen_mha_set_weights: a NaN or infinite weight or bias is the model's fault.
        const struct {
            const float *data;
            int64_t size;
        } all[] = {{wq, int64_t(inner) * d_model},
                   {wk, int64_t(inner) * kdim},
                   {wv, int64_t(inner) * vdim},
                   {wo, int64_t(d_model) * inner},
                   {bq, inner},
                   {bk, inner},
                   {bv, inner},
                   {bo, d_model}};
        for (const auto &t : all) {
            if (t.data != nullptr &&
                !std::all_of(t.data, t.data + t.size, [](float x) { return std::isfinite(x); })) {
                throw std::invalid_argument("MhaWeights: a weight or bias is NaN or infinite");
            }
        }
        q.pack(wq, bq, inner, d_model, device);
        k.pack(wk, bk, inner, kdim, device);
        v.pack(wv, bv, inner, vdim, device);
        o.pack(wo, bo, d_model, inner, device);
    }

  private:
    static int32_t resolved_head_dim(int32_t d_model, int32_t num_heads, int32_t head_dim) {
        if (d_model <= 0 || num_heads <= 0 || head_dim < 0) {
            throw std::invalid_argument(
                "MhaWeights: d_model and num_heads must be positive, "
                "head_dim not negative");
        }
        if (head_dim == 0 && d_model % num_heads != 0) {
            throw std::invalid_argument(
                "MhaWeights: d_model is not divisible by num_heads; "
                "give head_dim");
        }
        return head_dim ? head_dim : d_model / num_heads;
    }
};

namespace detail {

// What attngen_mha_forward refuses by shape before any kernel runs. A kernel given a NULL tensor
// would answer only Halide's bounds query (return 0 having computed nothing), and it reads the
// mask's parts at the extents their counts imply, which it cannot check.
struct Refusal {
    int code = 0;  // 0: none
    std::string why;
};

inline Refusal check_call(const MhaWeights &w, int32_t batch, int32_t q_len, int32_t kv_len,
                          const std::vector<std::pair<const void *, const char *>> &tensors,
                          const attngen_mask *mask, bool weights_output) {
    if (batch <= 0 || q_len <= 0 || kv_len <= 0) {
        return {halide_error_code_bad_dimensions, "batch, q_len and kv_len must be positive"};
    }
    // Every tensor within what a kernel can index, as attngen_mha_forward requires.
    const int64_t rows_q = int64_t(batch) * q_len, rows_kv = int64_t(batch) * kv_len;
    const int64_t keys = int64_t(q_len) * kv_len;
    std::vector<int64_t> bytes = {rows_q * w.d_model * 4, rows_kv * w.kdim * 4,
                                  rows_kv * w.vdim * 4};
    if (weights_output) bytes.push_back(int64_t(batch) * w.num_heads * keys * 4);
    if (mask != nullptr && mask->bool_mask != nullptr) {
        bytes.push_back(int64_t(mask->bool_mask_batch) * keys);
    }
    if (mask != nullptr && mask->additive != nullptr) {
        bytes.push_back(int64_t(mask->additive_batch) * mask->additive_heads * keys * 4);
    }
    for (int64_t b : bytes) {
        if (b > INT32_MAX) {
            return {halide_error_code_buffer_extents_too_large,
                    "a tensor of the call passes the 2^31 - 1 bytes a kernel can address"};
        }
    }
    for (const auto &[data, name] : tensors) {
        if (data == nullptr) {
            return {halide_error_code_buffer_argument_is_null, std::string(name) + " is NULL"};
        }
    }
    if (mask == nullptr) return {};
    const auto one_or = [](int32_t count, int32_t full) { return count == 1 || count == full; };
    // Read as an int: a C caller may have stored any value, which the enum type need not hold.
    int32_t causal = 0;
    std::memcpy(&causal, &mask->causal, sizeof causal);
    if (causal < ATTNGEN_CAUSAL_NONE || causal > ATTNGEN_CAUSAL_BOTTOM_RIGHT) {
        return {halide_error_code_bad_dimensions, "mask->causal is not an attngen_causal"};
    }
    if (mask->bool_mask != nullptr && !one_or(mask->bool_mask_batch, batch)) {
        return {halide_error_code_bad_dimensions, "mask->bool_mask_batch is neither 1 nor batch"};
    }
    if (mask->additive != nullptr &&
        (!one_or(mask->additive_batch, batch) || !one_or(mask->additive_heads, w.num_heads))) {
        return {halide_error_code_bad_dimensions,
                "mask->additive_batch or additive_heads is neither 1 nor batch (num_heads)"};
    }
    for (int32_t b = 0; mask->kv_lengths != nullptr && b < batch; ++b) {
        if (mask->kv_lengths[b] < 0 || mask->kv_lengths[b] > kv_len) {
            return {halide_error_code_bad_dimensions,
                    "mask->kv_lengths[" + std::to_string(b) + "] is outside 0..kv_len"};
        }
    }
    return {};
}

// Reports a refusal as a kernel's failure is reported: its code, the message in
// attngen_last_error().
inline int refuse(const char *entry_point, const Refusal &r) {
    attngen_install_error_handler();
    halide_error(nullptr, (std::string(entry_point) + ": " + r.why).c_str());
    return r.code;
}

// Every argument of a forward kernel but the outputs, as buffers over the caller's memory.
struct ForwardArguments {
    rt::TensorBuffer<float, 3> query, key, value;
    rt::ProjectionBuffers wq, wk, wv, wo;
    rt::MaskBuffers masks;
    double one = 1.0;
    rt::TensorBuffer<double, 1> no_rotation{&one, {1}};
    rt::FusedForwardInputs inputs;

    ForwardArguments(const MhaWeights &w, int32_t batch, int32_t q_len, int32_t kv_len,
                     const float *query_data, const float *key_data, const float *value_data,
                     const attngen_mask *mask)
        : query(query_data, {batch, q_len, w.d_model}),
          key(key_data, {batch, kv_len, w.kdim}),
          value(value_data, {batch, kv_len, w.vdim}),
          wq(w.q),
          wk(w.k),
          wv(w.v),
          wo(w.o),
          masks(mask, batch, w.num_heads, q_len, kv_len) {
        inputs.query = query.get();
        inputs.key = key.get();
        inputs.value = value.get();
        inputs.wq = &wq;
        inputs.wk = &wk;
        inputs.wv = &wv;
        inputs.wo = &wo;
        inputs.num_heads = w.num_heads;
        inputs.head_dim = w.head_dim;
        inputs.num_kv_heads = w.num_heads;
        inputs.v_head_dim = w.head_dim;
        inputs.rope = ATTNGEN_ROPE_NONE;
        inputs.rotary_dim = 0;  // no rotation: the one-entry table above is all it reads
        inputs.rope_inv_freq = no_rotation.get();
        inputs.scale = 1.0f / std::sqrt(float(w.head_dim));
        inputs.masks = &masks;
        attngen_install_error_handler();
    }

    // A GPU kernel copies host inputs to its device and leaves its outputs there: they come
    // back to host memory here, and every device allocation of the call is freed.
    template <typename Kernel, typename... Outputs>
    int call(Kernel kernel, Outputs... outputs) {
        const std::vector<halide_buffer_t *> in = inputs.buffers();
        for (halide_buffer_t *buf : in) buf->flags = halide_buffer_flag_host_dirty;
        int code = rt::call_fused_forward(kernel, nullptr, inputs, outputs...);
        for (halide_buffer_t *buf : {outputs...}) {
            if (code == 0 && buf->device != 0) code = halide_copy_to_host(nullptr, buf);
            if (buf->device != 0) halide_device_free(nullptr, buf);
        }
        for (halide_buffer_t *buf : in) {
            if (buf->device != 0) halide_device_free(nullptr, buf);
        }
        return code;
    }
};

// The fused kernels take the rows of all batches in one dimension: out [batch * q_len, d_model].
inline rt::TensorBuffer<float, 2> output_rows(float *out, int32_t batch, int32_t q_len,
                                              int32_t d_model) {
    return rt::TensorBuffer<float, 2>(out, {batch * q_len, d_model});
}

}  // namespace detail

// out [batch, q_len, d_model]; mask as for attngen_mha_forward (NULL = none).
template <typename Kernel>
int forward(Kernel kernel, const MhaWeights &w, int32_t batch, int32_t q_len, int32_t kv_len,
            const float *query, const float *key, const float *value, const attngen_mask *mask,
            float *out) {
    const detail::Refusal r = detail::check_call(
        w, batch, q_len, kv_len, {{query, "query"}, {key, "key"}, {value, "value"}, {out, "out"}},
        mask, false);
    if (r.code != 0) return detail::refuse("attngen::specialized::forward", r);
    detail::ForwardArguments args(w, batch, q_len, kv_len, query, key, value, mask);
    rt::TensorBuffer<float, 2> out_buf = detail::output_rows(out, batch, q_len, w.d_model);
    return args.call(kernel, out_buf.get());
}

// For a kernel made with WEIGHTS_OUTPUT: weights [batch, num_heads, q_len, kv_len] as well.
template <typename Kernel>
int forward_with_weights(Kernel kernel, const MhaWeights &w, int32_t batch, int32_t q_len,
                         int32_t kv_len, const float *query, const float *key, const float *value,
                         const attngen_mask *mask, float *out, float *weights) {
    const detail::Refusal r = detail::check_call(
        w, batch, q_len, kv_len,
        {{query, "query"}, {key, "key"}, {value, "value"}, {out, "out"}, {weights, "weights"}},
        mask, true);
    if (r.code != 0) return detail::refuse("attngen::specialized::forward_with_weights", r);
    detail::ForwardArguments args(w, batch, q_len, kv_len, query, key, value, mask);
    rt::TensorBuffer<float, 2> out_buf = detail::output_rows(out, batch, q_len, w.d_model);
    rt::TensorBuffer<float, 4> weights_buf(weights, {batch, w.num_heads, q_len, kv_len});
    return args.call(kernel, out_buf.get(), weights_buf.get());
}

}  // namespace attngen::specialized

#endif  // ATTNGEN_SPECIALIZED_HPP
