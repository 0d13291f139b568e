// Entry points that run a single stage on the CPU: attngen_sdpa(_gqa) and attngen_linear.
#include <attngen/attngen.h>

#include <array>
#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "attngen_linear_cpu.h"
#include "attngen_sdpa_cpu.h"
#include "attngen_sdpa_weights_cpu.h"
#include "errors.h"
#include "mask_buffers.h"
#include "nonfinite.h"
#include "staged_output.h"
#include "tensor_buffer.h"
#include "validate.h"

using namespace attngen::rt;

static attngen_status attngen_sdpa_impl(int32_t batch, int32_t heads, int32_t kv_heads,
                                        int32_t q_len, int32_t kv_len, int32_t dk, int32_t dv,
                                        const float *q, const float *k, const float *v,
                                        const attngen_mask *mask, float scale, float *out,
                                        float *probs) {
    ATTNGEN_RETURN_IF_ERROR(validate_sdpa(batch, heads, kv_heads, q_len, kv_len, dk, dv, q, k, v,
                                          mask, scale, out, probs));
    install_halide_runtime_hooks();
    StagedOutput staged_out(out, size_t(batch) * heads * q_len * dv);
    StagedOutput staged_probs(probs, size_t(batch) * heads * q_len * kv_len);
    ATTNGEN_RETURN_IF_ERROR(staged_out.allocate("out"));
    ATTNGEN_RETURN_IF_ERROR(staged_probs.allocate("weights"));

    const NonFiniteInputs inputs({q, heads, q_len, dk}, {k, kv_heads, kv_len, dk},
                                 {v, kv_heads, kv_len, dv}, mask, batch, heads, q_len, kv_len);
    TensorBuffer<float, 4> q_buf(inputs.q(), {batch, heads, q_len, dk});
    TensorBuffer<float, 4> k_buf(inputs.k(), {batch, kv_heads, kv_len, dk});
    TensorBuffer<float, 4> v_buf(inputs.v(), {batch, kv_heads, kv_len, dv});
    TensorBuffer<float, 4> out_buf(staged_out.data(), {batch, heads, q_len, dv});
    // Without a weights output the logical shape may pass 2^31 - 1 elements (and 32-bit
    // strides): its buffer is never read, so it is empty.
    const std::array<int32_t, 4> probs_shape =
        probs != nullptr ? std::array<int32_t, 4>{batch, heads, q_len, kv_len}
                         : std::array<int32_t, 4>{};
    TensorBuffer<float, 4> probs_buf(staged_probs.data(), probs_shape);
    MaskBuffers masks(inputs.mask(), batch, heads, q_len, kv_len);
    const float effective_scale = scale != 0.0f ? scale : 1.0f / std::sqrt(float(dk));

    KernelContext context;
    int code;
    const char *kernel;
    if (probs == nullptr) {
        kernel = "attngen_sdpa_cpu";
        code = attngen_sdpa_cpu(&context, q_buf.get(), k_buf.get(), v_buf.get(), effective_scale,
                                masks.causal(), masks.kv_lengths(), masks.has_bool_mask(),
                                masks.bool_mask(), masks.has_additive(), masks.additive(),
                                out_buf.get());
    } else {
        kernel = "attngen_sdpa_weights_cpu";
        code = attngen_sdpa_weights_cpu(
            &context, q_buf.get(), k_buf.get(), v_buf.get(), effective_scale, masks.causal(),
            masks.kv_lengths(), masks.has_bool_mask(), masks.bool_mask(), masks.has_additive(),
            masks.additive(), out_buf.get(), probs_buf.get());
    }
    if (code != 0) return kernel_failure(kernel, code, context);
    inputs.poison_sdpa_outputs(staged_out.data(), staged_probs.data());
    staged_out.commit();
    staged_probs.commit();
    clear_error();
    return ATTNGEN_OK;
}

static attngen_status attngen_linear_impl(int32_t rows, int32_t in_features, int32_t out_features,
                                          const float *x, const float *w, const float *bias,
                                          float *y) {
    ATTNGEN_RETURN_IF_ERROR(require_positive(rows, "rows"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(in_features, "in_features"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(out_features, "out_features"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(x, "x"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(w, "w"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(y, "y"));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("x", {rows, in_features}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("w", {out_features, in_features}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("y", {rows, out_features}, 4));
    install_halide_runtime_hooks();
    StagedOutput staged_y(y, size_t(rows) * out_features);
    ATTNGEN_RETURN_IF_ERROR(staged_y.allocate("y"));

    std::vector<float> zero_bias;
    try {
        if (bias == nullptr) zero_bias.assign(out_features, 0.0f);
    } catch (const std::bad_alloc &) {
        return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate a zero bias");
    }
    TensorBuffer<float, 2> x_buf(x, {rows, in_features});
    TensorBuffer<float, 2> w_buf(w, {out_features, in_features});
    TensorBuffer<float, 1> bias_buf(bias ? bias : zero_bias.data(), {out_features});
    TensorBuffer<float, 2> y_buf(staged_y.data(), {rows, out_features});
    KernelContext context;
    const int code =
        attngen_linear_cpu(&context, x_buf.get(), w_buf.get(), bias_buf.get(), y_buf.get());
    if (code != 0) return kernel_failure("attngen_linear_cpu", code, context);
    staged_y.commit();
    clear_error();
    return ATTNGEN_OK;
}

extern "C" attngen_status attngen_sdpa(int32_t batch, int32_t heads, int32_t q_len, int32_t kv_len,
                                       int32_t dk, int32_t dv, const float *q, const float *k,
                                       const float *v, const attngen_mask *mask, float scale,
                                       float *out, float *weights) {
    return guard_entry_point("attngen_sdpa", [&] {
        return attngen_sdpa_impl(batch, heads, heads, q_len, kv_len, dk, dv, q, k, v, mask, scale,
                                 out, weights);
    });
}

extern "C" attngen_status attngen_sdpa_gqa(int32_t batch, int32_t heads, int32_t kv_heads,
                                           int32_t q_len, int32_t kv_len, int32_t dk, int32_t dv,
                                           const float *q, const float *k, const float *v,
                                           const attngen_mask *mask, float scale, float *out,
                                           float *weights) {
    return guard_entry_point("attngen_sdpa_gqa", [&] {
        return attngen_sdpa_impl(batch, heads, kv_heads, q_len, kv_len, dk, dv, q, k, v, mask,
                                 scale, out, weights);
    });
}

extern "C" attngen_status attngen_linear(int32_t rows, int32_t in_features, int32_t out_features,
                                         const float *x, const float *w, const float *bias,
                                         float *y) {
    return guard_entry_point("attngen_linear", [&] {
        return attngen_linear_impl(rows, in_features, out_features, x, w, bias, y);
    });
}
