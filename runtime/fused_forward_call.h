// Header-only: installed (attngen/detail/) for kernels made by attngen_add_library.
// The one call path of the fused MHA forward kernels (MhaForwardGenerator in
// generators/generators.cpp): their arguments by name, and the single place that spells out
// the kernels' positional order. runtime/mha.cpp and attngen/specialized.hpp both call through
// it, so a dozen halide_buffer_t * in a row are written once, here.
#ifndef ATTNGEN_RUNTIME_FUSED_FORWARD_CALL_H
#define ATTNGEN_RUNTIME_FUSED_FORWARD_CALL_H

#include <HalideRuntime.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "mask_buffers.h"
#include "packed_projection.h"
#include "tensor_buffer.h"

namespace attngen::rt {

// A packed projection's weight and bias as kernel buffers over its storage: the weight of the
// projection's precision (a bfloat16 or float16 buffer over its bits), the bias float32, typed
// as the kernels of `device` take them (weight_element_type: some GPU kernels take the 16-bit
// formats as their bits, uint16).
struct ProjectionBuffers {
    std::optional<TensorBuffer<float, 3>> float_weight;
    std::optional<TensorBuffer<uint16_t, 3>> half_weight;
    TensorBuffer<float, 1> bias;

    explicit ProjectionBuffers(const PackedProjection &p,
                               attngen_device device = ATTNGEN_DEVICE_CPU)
        : bias(p.bias.data(), {p.padded_out}) {
        if (p.precision == ATTNGEN_PRECISION_F32) {
            float_weight.emplace(p.weight.data(), p.kernel_shape());
        } else {
            half_weight.emplace(p.weight_bits.data(), p.kernel_shape(), std::array<bool, 3>{},
                                weight_element_type(p.precision, device));
        }
    }
    halide_buffer_t *weight() { return float_weight ? float_weight->get() : half_weight->get(); }
};

// Every input of a fused forward kernel. The projections are named, not positional: a
// ProjectionBuffers for q cannot land in k's place without the name saying so.
struct FusedForwardInputs {
    halide_buffer_t *query = nullptr;  // (d_model, q_len, batch)
    halide_buffer_t *key = nullptr;    // (kdim, kv_len, batch)
    halide_buffer_t *value = nullptr;  // (vdim, kv_len, batch)
    ProjectionBuffers *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
    int32_t num_heads = 0, head_dim = 0;
    int32_t num_kv_heads = 0, v_head_dim = 0;  // resolved: never 0 in a call
    int32_t rope = 0, rotary_dim = 0;          // attngen_rope; rotary_dim resolved
    halide_buffer_t *rope_inv_freq = nullptr;  // double [max(rotary_dim / 2, 1)]
    float scale = 0.0f;
    MaskBuffers *masks = nullptr;

    // The buffers among them, e.g. to mark them for copying to a GPU.
    std::vector<halide_buffer_t *> buffers() const {
        return {query,
                key,
                value,
                wq->weight(),
                wk->weight(),
                wv->weight(),
                wo->weight(),
                wq->bias.get(),
                wk->bias.get(),
                wv->bias.get(),
                wo->bias.get(),
                masks->kv_lengths(),
                masks->bool_mask(),
                masks->additive()};
    }
};

// Whether two kernel buffers are one tensor: the same memory in the same shape. The kernels
// then round it once for every projection that takes it (the query, key and value of
// self-attention; the key and value of many cross-attention calls).
inline bool same_tensor(const halide_buffer_t *a, const halide_buffer_t *b) {
    if (a->host != b->host || a->dimensions != b->dimensions) return false;
    for (int i = 0; i < a->dimensions; ++i) {
        const halide_dimension_t &x = a->dim[i], &y = b->dim[i];
        if (x.min != y.min || x.extent != y.extent || x.stride != y.stride) return false;
    }
    return true;
}

// Calls kernel (a fused forward kernel, of any target) with the inputs and the outputs: out
// (d_model, q_len * batch), then the weights (kv_len, q_len, heads, batch) for kernels made
// with weights_output. Returns the kernel's result (0 or a halide_error_code_t).
template <typename Kernel, typename... Outputs>
int call_fused_forward(Kernel kernel, void *user_context, const FusedForwardInputs &in,
                       Outputs *...outputs) {
    MaskBuffers &m = *in.masks;
    return kernel(user_context, in.query, in.key, in.value, same_tensor(in.key, in.query),
                  same_tensor(in.value, in.key), in.wq->weight(), in.wk->weight(), in.wv->weight(),
                  in.wo->weight(), in.wq->bias.get(), in.wk->bias.get(), in.wv->bias.get(),
                  in.wo->bias.get(), in.num_heads, in.head_dim, in.num_kv_heads, in.v_head_dim,
                  in.rope, in.rotary_dim, in.rope_inv_freq, in.scale, m.causal(), m.kv_lengths(),
                  m.has_bool_mask(), m.bool_mask(), m.has_additive(), m.additive(), outputs...);
}

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_FUSED_FORWARD_CALL_H
