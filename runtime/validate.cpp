#include "validate.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "errors.h"

namespace attngen::rt {

attngen_status require_not_null(const void *pointer, const char *name) {
    if (pointer != nullptr) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

attngen_status require_positive(int64_t value, const char *name) {
    if (value > 0) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                std::string(name) + " must be positive, got " + std::to_string(value));
}

attngen_status require_addressable(const char *name, std::initializer_list<int64_t> shape,
                                   int64_t element_size) {
    const int64_t limit = std::numeric_limits<int32_t>::max();
    int64_t bytes = element_size;
    std::string dims;
    for (int64_t extent : shape) {
        dims += (dims.empty() ? "" : ", ") + std::to_string(extent);
        // Checked before multiplying so the product itself cannot overflow.
        if (extent > 0 && bytes > limit / extent)
            bytes = limit + 1;
        else
            bytes *= extent;
    }
    if (bytes <= limit) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_SHAPE, std::string(name) + " of shape [" + dims +
                                         "] exceeds the 2^31 - 1 bytes a kernel can address");
}

namespace {

attngen_status validate_kv_lengths(const int32_t *lengths, int32_t batch, int32_t kv_len) {
    for (int32_t b = 0; b < batch; ++b) {
        const int32_t len = lengths[b];
        const std::string where =
            "mask.kv_lengths[" + std::to_string(b) + "] = " + std::to_string(len);
        if (len < 0) return fail(ATTNGEN_ERROR_INVALID_ARGUMENT, where + " is negative");
        if (len > kv_len) {
            return fail(ATTNGEN_ERROR_SHAPE, where + " exceeds kv_len = " + std::to_string(kv_len));
        }
    }
    return ATTNGEN_OK;
}

attngen_status require_one_or(int32_t value, int32_t full, const char *name,
                              const char *full_name) {
    if (value == 1 || value == full) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_SHAPE, std::string(name) + " must be 1 or " + full_name + " (" +
                                         std::to_string(full) + "), got " + std::to_string(value));
}

}  // namespace

attngen_status validate_mask(const attngen_mask *mask, int32_t batch, int32_t heads, int32_t q_len,
                             int32_t kv_len) {
    // No limit on batch x heads x q_len x kv_len: mask parts reach the kernels as the memory
    // they occupy (mask_buffers.h), and without a weights output no kernel keeps a buffer of
    // that shape (flash attention on the CPU and the GPU). The weights output is checked by
    // the caller, each given mask part below.
    if (mask == nullptr) return ATTNGEN_OK;
    const int32_t causal = raw_enum_value(mask->causal);
    if (causal != ATTNGEN_CAUSAL_NONE && causal != ATTNGEN_CAUSAL_TOP_LEFT &&
        causal != ATTNGEN_CAUSAL_BOTTOM_RIGHT) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "mask.causal has unknown value " + std::to_string(causal) +
                        " (expected 0 none, 1 top-left, 2 bottom-right)");
    }
    if (mask->kv_lengths != nullptr) {
        ATTNGEN_RETURN_IF_ERROR(validate_kv_lengths(mask->kv_lengths, batch, kv_len));
    }
    if (mask->bool_mask != nullptr) {
        ATTNGEN_RETURN_IF_ERROR(
            require_one_or(mask->bool_mask_batch, batch, "mask.bool_mask_batch", "batch"));
        ATTNGEN_RETURN_IF_ERROR(require_addressable(
            "mask.bool_mask", {mask->bool_mask_batch, q_len, kv_len}, sizeof(uint8_t)));
    }
    if (mask->additive != nullptr) {
        ATTNGEN_RETURN_IF_ERROR(
            require_one_or(mask->additive_batch, batch, "mask.additive_batch", "batch"));
        ATTNGEN_RETURN_IF_ERROR(
            require_one_or(mask->additive_heads, heads, "mask.additive_heads", "num_heads"));
        ATTNGEN_RETURN_IF_ERROR(require_addressable(
            "mask.additive", {mask->additive_batch, mask->additive_heads, q_len, kv_len},
            sizeof(float)));
    }
    return ATTNGEN_OK;
}

attngen_status validate_sdpa(int32_t batch, int32_t heads, int32_t kv_heads, int32_t q_len,
                             int32_t kv_len, int32_t dk, int32_t dv, const void *q, const void *k,
                             const void *v, const attngen_mask *mask, float scale, const void *out,
                             const void *probs) {
    const struct {
        int32_t value;
        const char *name;
    } sizes[] = {{batch, "batch"}, {heads, "heads"},   {kv_heads, "kv_heads"},
                 {q_len, "q_len"}, {kv_len, "kv_len"}, {dk, "dk"},
                 {dv, "dv"}};
    for (const auto &s : sizes) ATTNGEN_RETURN_IF_ERROR(require_positive(s.value, s.name));
    if (heads % kv_heads != 0) {
        return fail(ATTNGEN_ERROR_SHAPE, "kv_heads (" + std::to_string(kv_heads) +
                                             ") does not divide heads (" + std::to_string(heads) +
                                             ")");
    }
    ATTNGEN_RETURN_IF_ERROR(require_not_null(q, "q"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(k, "k"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(v, "v"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(out, "out"));
    if (!std::isfinite(scale)) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "scale must be finite (0 selects 1/sqrt(dk)), got " + std::to_string(scale));
    }
    ATTNGEN_RETURN_IF_ERROR(require_addressable("q", {batch, heads, q_len, dk}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("k", {batch, kv_heads, kv_len, dk}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("v", {batch, kv_heads, kv_len, dv}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("out", {batch, heads, q_len, dv}, 4));
    if (probs != nullptr) {
        ATTNGEN_RETURN_IF_ERROR(require_addressable("weights", {batch, heads, q_len, kv_len}, 4));
    }
    return validate_mask(mask, batch, heads, q_len, kv_len);
}

}  // namespace attngen::rt
