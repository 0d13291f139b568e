// The attngen_mha handle: configuration, packed weights, and the forward entry point.
#include <attngen/attngen.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <vector>

#include "attngen_mha_forward_cpu.h"
#include "attngen_mha_forward_weights_cpu.h"
#include "errors.h"
#include "layout.h"
#include "mask_buffers.h"
#include "staged_output.h"
#include "tensor_buffer.h"
#include "validate.h"

using namespace attngen;
using namespace attngen::rt;

namespace {

// A projection weight as the kernel takes it: transposed to [in, out] with out zero-padded to
// a multiple of kWeightPadding (see generators/layout.h), plus its padded bias.
struct PackedProjection {
    int32_t in = 0, out = 0, padded_out = 0;
    std::vector<float> weight;  // [in, padded_out]
    std::vector<float> bias;    // [padded_out]

    void pack(const float *w, const float *b, int32_t out_features, int32_t in_features) {
        in = in_features;
        out = out_features;
        padded_out = round_up(out_features, kWeightPadding);
        weight.assign(size_t(in) * padded_out, 0.0f);
        bias.assign(padded_out, 0.0f);
        for (int32_t o = 0; o < out; ++o) {
            for (int32_t i = 0; i < in; ++i)
                weight[size_t(i) * padded_out + o] = w[size_t(o) * in + i];
            if (b != nullptr) bias[o] = b[o];
        }
    }

    TensorBuffer<float, 2> weight_buffer() const {
        return TensorBuffer<float, 2>(weight.data(), {in, padded_out});
    }
    TensorBuffer<float, 1> bias_buffer() const {
        return TensorBuffer<float, 1>(bias.data(), {padded_out});
    }
};

struct ResolvedConfig {
    int32_t d_model, num_heads, kdim, vdim, head_dim;
    bool use_bias;
    int32_t inner() const { return num_heads * head_dim; }
};

attngen_status resolve_config(const attngen_mha_config &c, ResolvedConfig *r) {
    ATTNGEN_RETURN_IF_ERROR(require_positive(c.d_model, "config.d_model"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(c.num_heads, "config.num_heads"));
    const struct {
        int32_t value;
        const char *name;
    } optional_sizes[] = {
        {c.kdim, "config.kdim"}, {c.vdim, "config.vdim"}, {c.head_dim, "config.head_dim"}};
    for (const auto &s : optional_sizes) {
        if (s.value < 0) {
            return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                        std::string(s.name) + " must be 0 (the default) or positive, got " +
                            std::to_string(s.value));
        }
    }
    if (c.head_dim == 0 && c.d_model % c.num_heads != 0) {
        return fail(ATTNGEN_ERROR_SHAPE, "config.d_model (" + std::to_string(c.d_model) +
                                             ") is not divisible by config.num_heads (" +
                                             std::to_string(c.num_heads) +
                                             "); set config.head_dim explicitly");
    }
    switch (c.device) {
        case ATTNGEN_DEVICE_CPU:
            break;
        case ATTNGEN_DEVICE_CUDA:
        case ATTNGEN_DEVICE_OPENCL:
            return fail(ATTNGEN_ERROR_UNSUPPORTED,
                        std::string("config.device = ") +
                            (c.device == ATTNGEN_DEVICE_CUDA ? "CUDA" : "OpenCL") +
                            ": this build of attngen has CPU kernels only");
        default:
            return fail(ATTNGEN_ERROR_INVALID_ARGUMENT, "config.device has unknown value " +
                                                            std::to_string(int(c.device)) +
                                                            " (expected 0 CPU, 1 CUDA, 2 OpenCL)");
    }
    r->d_model = c.d_model;
    r->num_heads = c.num_heads;
    r->kdim = c.kdim ? c.kdim : c.d_model;
    r->vdim = c.vdim ? c.vdim : c.d_model;
    r->head_dim = c.head_dim ? c.head_dim : c.d_model / c.num_heads;
    r->use_bias = c.use_bias != 0;
    const int64_t inner = int64_t(r->num_heads) * r->head_dim;
    // Packed weights are padded by up to kWeightPadding output features.
    const int64_t padded_inner = inner + kWeightPadding;
    ATTNGEN_RETURN_IF_ERROR(require_addressable("wq", {padded_inner, r->d_model}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("wk", {padded_inner, r->kdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("wv", {padded_inner, r->vdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(
        require_addressable("wo", {r->d_model + int64_t(kWeightPadding), inner}, 4));
    return ATTNGEN_OK;
}

}  // namespace

struct attngen_mha {
    ResolvedConfig config;
    // Forward calls share the weights; set_weights replaces them exclusively.
    mutable std::shared_mutex weights_mutex;
    bool has_weights = false;
    PackedProjection q, k, v, o;
};

static attngen_status attngen_mha_create_impl(const attngen_mha_config *config, attngen_mha **out) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(config, "config"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(out, "out"));
    ResolvedConfig resolved{};
    ATTNGEN_RETURN_IF_ERROR(resolve_config(*config, &resolved));
    auto *m = new (std::nothrow) attngen_mha;
    if (m == nullptr) return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate the handle");
    m->config = resolved;
    install_halide_error_handler();
    *out = m;
    clear_error();
    return ATTNGEN_OK;
}

extern "C" void attngen_mha_destroy(attngen_mha *m) {
    delete m;
}

static attngen_status attngen_mha_set_weights_impl(attngen_mha *m, const float *wq, const float *wk,
                                                   const float *wv, const float *wo,
                                                   const float *bq, const float *bk,
                                                   const float *bv, const float *bo) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(m, "m"));
    const struct {
        const float *pointer;
        const char *name;
    } weights[] = {{wq, "wq"}, {wk, "wk"}, {wv, "wv"}, {wo, "wo"}};
    for (const auto &w : weights) ATTNGEN_RETURN_IF_ERROR(require_not_null(w.pointer, w.name));
    const ResolvedConfig &c = m->config;
    if (c.use_bias) {
        const struct {
            const float *pointer;
            const char *name;
        } biases[] = {{bq, "bq"}, {bk, "bk"}, {bv, "bv"}, {bo, "bo"}};
        for (const auto &b : biases) {
            if (b.pointer == nullptr) {
                return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                            std::string(b.name) + " is NULL but the config has use_bias set");
            }
        }
    } else {
        bq = bk = bv = bo = nullptr;  // documented: ignored without use_bias
    }
    // Pack outside the lock so forwards keep running meanwhile; swap in under it.
    PackedProjection q, k, v, o;
    try {
        q.pack(wq, bq, c.inner(), c.d_model);
        k.pack(wk, bk, c.inner(), c.kdim);
        v.pack(wv, bv, c.inner(), c.vdim);
        o.pack(wo, bo, c.d_model, c.inner());
    } catch (const std::bad_alloc &) {
        return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate the packed weights");
    }
    std::unique_lock<std::shared_mutex> lock(m->weights_mutex);
    std::swap(m->q, q);
    std::swap(m->k, k);
    std::swap(m->v, v);
    std::swap(m->o, o);
    m->has_weights = true;
    clear_error();
    return ATTNGEN_OK;
}

namespace {

attngen_status validate_forward(const attngen_mha *m, int32_t batch, int32_t q_len, int32_t kv_len,
                                const float *query, const float *key, const float *value,
                                const attngen_mask *mask, const float *out, const float *weights) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(m, "m"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(batch, "batch"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(q_len, "q_len"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(kv_len, "kv_len"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(query, "query"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(key, "key"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(value, "value"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(out, "out"));
    const ResolvedConfig &c = m->config;
    ATTNGEN_RETURN_IF_ERROR(require_addressable("query", {batch, q_len, c.d_model}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("key", {batch, kv_len, c.kdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("value", {batch, kv_len, c.vdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(
        require_addressable("the projected queries", {batch, q_len, c.inner()}, 4));
    ATTNGEN_RETURN_IF_ERROR(
        require_addressable("the projected keys", {batch, kv_len, c.inner()}, 4));
    if (weights != nullptr) {
        ATTNGEN_RETURN_IF_ERROR(
            require_addressable("weights", {batch, c.num_heads, q_len, kv_len}, 4));
    }
    return validate_mask(mask, batch, c.num_heads, q_len, kv_len);
}

}  // namespace

static attngen_status attngen_mha_forward_impl(attngen_mha *m, int32_t batch, int32_t q_len,
                                               int32_t kv_len, const float *query, const float *key,
                                               const float *value, const attngen_mask *mask,
                                               float *out, float *weights) {
    ATTNGEN_RETURN_IF_ERROR(
        validate_forward(m, batch, q_len, kv_len, query, key, value, mask, out, weights));
    std::shared_lock<std::shared_mutex> lock(m->weights_mutex);
    if (!m->has_weights) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "attngen_mha_forward called before attngen_mha_set_weights");
    }
    const ResolvedConfig &c = m->config;

    StagedOutput staged_out(out, size_t(batch) * q_len * c.d_model);
    StagedOutput staged_weights(weights, size_t(batch) * c.num_heads * q_len * kv_len);
    ATTNGEN_RETURN_IF_ERROR(staged_out.allocate("out"));
    ATTNGEN_RETURN_IF_ERROR(staged_weights.allocate("weights"));

    TensorBuffer<float, 3> query_buf(query, {batch, q_len, c.d_model});
    TensorBuffer<float, 3> key_buf(key, {batch, kv_len, c.kdim});
    TensorBuffer<float, 3> value_buf(value, {batch, kv_len, c.vdim});
    TensorBuffer<float, 2> wq = m->q.weight_buffer(), wk = m->k.weight_buffer(),
                           wv = m->v.weight_buffer(), wo = m->o.weight_buffer();
    TensorBuffer<float, 1> bq = m->q.bias_buffer(), bk = m->k.bias_buffer(),
                           bv = m->v.bias_buffer(), bo = m->o.bias_buffer();
    MaskBuffers masks(mask, batch, c.num_heads, q_len, kv_len);
    TensorBuffer<float, 3> out_buf(staged_out.data(), {batch, q_len, c.d_model});
    TensorBuffer<float, 4> weights_buf(staged_weights.data(), {batch, c.num_heads, q_len, kv_len});
    const float scale = 1.0f / std::sqrt(float(c.head_dim));

    KernelContext context;
    int code;
    const char *kernel;
    if (weights == nullptr) {
        kernel = "attngen_mha_forward_cpu";
        code = attngen_mha_forward_cpu(
            &context, query_buf.get(), key_buf.get(), value_buf.get(), wq.get(), wk.get(), wv.get(),
            wo.get(), bq.get(), bk.get(), bv.get(), bo.get(), c.num_heads, c.head_dim, scale,
            masks.causal(), masks.kv_lengths(), masks.has_bool_mask(), masks.bool_mask(),
            masks.has_additive(), masks.additive(), out_buf.get());
    } else {
        kernel = "attngen_mha_forward_weights_cpu";
        code = attngen_mha_forward_weights_cpu(
            &context, query_buf.get(), key_buf.get(), value_buf.get(), wq.get(), wk.get(), wv.get(),
            wo.get(), bq.get(), bk.get(), bv.get(), bo.get(), c.num_heads, c.head_dim, scale,
            masks.causal(), masks.kv_lengths(), masks.has_bool_mask(), masks.bool_mask(),
            masks.has_additive(), masks.additive(), out_buf.get(), weights_buf.get());
    }
    if (code != 0) return kernel_failure(kernel, code, context);
    staged_out.commit();
    staged_weights.commit();
    clear_error();
    return ATTNGEN_OK;
}

extern "C" attngen_status attngen_mha_forward(attngen_mha *m, int32_t batch, int32_t q_len,
                                              int32_t kv_len, const float *query, const float *key,
                                              const float *value, const attngen_mask *mask,
                                              float *out, float *weights) {
    return guard_entry_point("attngen_mha_forward", [&] {
        return attngen_mha_forward_impl(m, batch, q_len, kv_len, query, key, value, mask, out,
                                        weights);
    });
}

extern "C" attngen_status attngen_mha_set_weights(attngen_mha *m, const float *wq, const float *wk,
                                                  const float *wv, const float *wo, const float *bq,
                                                  const float *bk, const float *bv,
                                                  const float *bo) {
    return guard_entry_point("attngen_mha_set_weights", [&] {
        return attngen_mha_set_weights_impl(m, wq, wk, wv, wo, bq, bk, bv, bo);
    });
}

extern "C" attngen_status attngen_mha_create(const attngen_mha_config *config, attngen_mha **out) {
    return guard_entry_point("attngen_mha_create",
                             [&] { return attngen_mha_create_impl(config, out); });
}
