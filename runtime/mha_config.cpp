#include "mha_config.h"

#include <algorithm>
#include <string>
#include <utility>

#include "device.h"
#include "errors.h"
#include "layout.h"
#include "validate.h"

namespace attngen::rt {
namespace {

attngen_status require_zero_or_positive(int32_t value, const char *name) {
    if (value >= 0) return ATTNGEN_OK;
    return fail(
        ATTNGEN_ERROR_INVALID_ARGUMENT,
        std::string(name) + " must be 0 (the default) or positive, got " + std::to_string(value));
}

// kMaxPerHead (layout.h): a larger head_dim passed the weights' size checks when d_model was
// small, and its rotary table alone could take gigabytes (found by the fuzzer).

attngen_status require_at_most_per_head(int32_t value, const char *name) {
    if (value <= kMaxPerHead) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_SHAPE, std::string(name) + " is " + std::to_string(value) +
                                         "; the kernels take at most " +
                                         std::to_string(kMaxPerHead));
}

// The 0.2 fields: grouped heads, the value head size, precision and rotary positions.
attngen_status resolve_heads_and_positions(const attngen_mha_config &c, ResolvedConfig *r) {
    ATTNGEN_RETURN_IF_ERROR(require_zero_or_positive(c.num_kv_heads, "config.num_kv_heads"));
    ATTNGEN_RETURN_IF_ERROR(require_zero_or_positive(c.v_head_dim, "config.v_head_dim"));
    ATTNGEN_RETURN_IF_ERROR(require_zero_or_positive(c.rotary_dim, "config.rotary_dim"));
    r->num_kv_heads = c.num_kv_heads ? c.num_kv_heads : c.num_heads;
    if (r->num_heads % r->num_kv_heads != 0) {
        return fail(ATTNGEN_ERROR_SHAPE, "config.num_kv_heads (" + std::to_string(r->num_kv_heads) +
                                             ") does not divide config.num_heads (" +
                                             std::to_string(r->num_heads) + ")");
    }
    r->v_head_dim = c.v_head_dim ? c.v_head_dim : r->head_dim;
    for (const auto &[value, name] :
         {std::pair<int32_t, const char *>{r->num_heads, "config.num_heads"},
          {r->num_kv_heads, "config.num_kv_heads"},
          {r->head_dim, "config.head_dim (or d_model / num_heads)"},
          {r->v_head_dim, "config.v_head_dim"}}) {
        ATTNGEN_RETURN_IF_ERROR(require_at_most_per_head(value, name));
    }

    const int32_t precision = raw_enum_value(c.precision);
    if (precision < ATTNGEN_PRECISION_F32 || precision > ATTNGEN_PRECISION_F16) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "config.precision is not an attngen_precision: " + std::to_string(precision));
    }
    r->precision = c.precision;

    const int32_t rope = raw_enum_value(c.rope);
    if (rope < ATTNGEN_ROPE_NONE || rope > ATTNGEN_ROPE_INTERLEAVED) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "config.rope is not an attngen_rope: " + std::to_string(rope));
    }
    r->rope = c.rope;
    r->rotary_dim = c.rotary_dim ? c.rotary_dim : r->head_dim;
    // Its table of rotary_dim / 2 entries is built whether or not the handle rotates.
    ATTNGEN_RETURN_IF_ERROR(require_at_most_per_head(r->rotary_dim, "config.rotary_dim"));
    // An explicit rotary_dim is checked with or without rotation (DESIGN.md: "even and <=
    // head_dim"), so a mistaken one is not silently ignored; the default, head_dim, only where
    // it rotates (an odd head_dim is fine without rotation).
    if (r->rope != ATTNGEN_ROPE_NONE || c.rotary_dim != 0) {
        if (r->rotary_dim % 2 != 0) {
            return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                        "config.rotary_dim must be even (features rotate in pairs), got " +
                            std::to_string(r->rotary_dim) +
                            (c.rotary_dim ? "" : " (head_dim, the default)"));
        }
        if (r->rotary_dim > r->head_dim) {
            return fail(ATTNGEN_ERROR_SHAPE, "config.rotary_dim (" + std::to_string(r->rotary_dim) +
                                                 ") exceeds head_dim (" +
                                                 std::to_string(r->head_dim) + ")");
        }
    }
    if (!std::isfinite(c.rope_theta) || c.rope_theta < 0.0f ||
        (c.rope_theta > 0.0f && c.rope_theta <= 1.0f)) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "config.rope_theta must be 0 (10000) or a finite number above 1, got " +
                        std::to_string(c.rope_theta));
    }
    r->rope_theta = c.rope_theta != 0.0f ? c.rope_theta : 10000.0f;
    return ATTNGEN_OK;
}

// After the sizes are known to be addressable: the table has rotary_dim / 2 entries (at least
// one) whether or not the handle rotates, since kernels may read it where they do not use it.
void fill_rope_table(ResolvedConfig *r) {
    const int32_t pairs = r->rotary_dim / 2;
    r->rope_inv_freq.assign(size_t(std::max(pairs, 1)), 1.0);
    for (int32_t k = 0; k < pairs; ++k) {
        r->rope_inv_freq[k] = std::pow(double(r->rope_theta), -2.0 * k / r->rotary_dim);
    }
}

}  // namespace

attngen_status resolve_config(const attngen_mha_config &c, ResolvedConfig *r) {
    ATTNGEN_RETURN_IF_ERROR(require_positive(c.d_model, "config.d_model"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(c.num_heads, "config.num_heads"));
    ATTNGEN_RETURN_IF_ERROR(require_zero_or_positive(c.kdim, "config.kdim"));
    ATTNGEN_RETURN_IF_ERROR(require_zero_or_positive(c.vdim, "config.vdim"));
    ATTNGEN_RETURN_IF_ERROR(require_zero_or_positive(c.head_dim, "config.head_dim"));
    if (c.head_dim == 0 && c.d_model % c.num_heads != 0) {
        return fail(ATTNGEN_ERROR_SHAPE, "config.d_model (" + std::to_string(c.d_model) +
                                             ") is not divisible by config.num_heads (" +
                                             std::to_string(c.num_heads) +
                                             "); set config.head_dim explicitly");
    }
    ATTNGEN_RETURN_IF_ERROR(require_known_device(raw_enum_value(c.device), "config.device"));
    r->d_model = c.d_model;
    r->num_heads = c.num_heads;
    r->kdim = c.kdim ? c.kdim : c.d_model;
    r->vdim = c.vdim ? c.vdim : c.d_model;
    r->head_dim = c.head_dim ? c.head_dim : c.d_model / c.num_heads;
    r->use_bias = c.use_bias != 0;
    r->device = c.device;
    ATTNGEN_RETURN_IF_ERROR(resolve_heads_and_positions(c, r));
    // Before the device's presence: a shape no GPU of that API can run is refused as such.
    ATTNGEN_RETURN_IF_ERROR(require_device_head_sizes(c.device, r->head_dim, r->v_head_dim));
    if (c.device != ATTNGEN_DEVICE_CPU && gpu_interface_or_fail(c.device) == nullptr) {
        return ATTNGEN_ERROR_UNSUPPORTED;
    }
    // Packed weights are padded by up to kWeightPadding (+ kGpuExtraWeightPadding) features.
    const int64_t padding = kWeightPadding + kGpuExtraWeightPadding;
    ATTNGEN_RETURN_IF_ERROR(require_addressable("wq", {r->inner() + padding, r->d_model}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("wk", {r->kv_inner() + padding, r->kdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("wv", {r->v_inner() + padding, r->vdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("wo", {r->d_model + padding, r->out_inner()}, 4));
    fill_rope_table(r);
    return ATTNGEN_OK;
}

}  // namespace attngen::rt
