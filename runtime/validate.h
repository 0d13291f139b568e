// Argument checks shared by the entry points. Each returns ATTNGEN_OK or records a message
// naming the argument (and the expected and actual values) and returns the status.
#ifndef ATTNGEN_RUNTIME_VALIDATE_H
#define ATTNGEN_RUNTIME_VALIDATE_H

#include <attngen/attngen.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace attngen::rt {

// The integer a C caller stored in an enum field of an API struct. C allows any int there,
// while a C++ load of a value outside the enumerators' range is undefined behaviour (UBSan's
// "enum" check), so fields that are not yet validated are read through this.
template <typename Enum>
int32_t raw_enum_value(const Enum &field) {
    static_assert(sizeof(Enum) == sizeof(int32_t), "C enums of the API are int-sized");
    int32_t value;
    std::memcpy(&value, &field, sizeof value);
    return value;
}

attngen_status require_not_null(const void *pointer, const char *name);
attngen_status require_positive(int64_t value, const char *name);

// Halide indexes buffers with 32-bit integers: a tensor of more than 2^31 - 1 bytes cannot be
// passed to a kernel.
attngen_status require_addressable(const char *name, std::initializer_list<int64_t> shape,
                                   int64_t element_size);

// Checks every part of a mask against the problem's sizes (mask may be NULL).
attngen_status validate_mask(const attngen_mask *mask, int32_t batch, int32_t heads, int32_t q_len,
                             int32_t kv_len);

// Everything attngen_sdpa(_gqa) and attngen_sdpa_device check before running: sizes, the
// group, pointers (device addresses pass as pointers), scale, addressability and the mask.
attngen_status validate_sdpa(int32_t batch, int32_t heads, int32_t kv_heads, int32_t q_len,
                             int32_t kv_len, int32_t dk, int32_t dv, const void *q, const void *k,
                             const void *v, const attngen_mask *mask, float scale, const void *out,
                             const void *probs);

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_VALIDATE_H
