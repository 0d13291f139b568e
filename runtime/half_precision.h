// The storage formats of attngen_precision: float32 to bfloat16 and IEEE float16 bits, rounded
// to nearest even as the kernels round (Halide's casts), and back. Header-only: installed
// (attngen/detail/) with packed_projection.h, and used by the tests' references.
#ifndef ATTNGEN_RUNTIME_HALF_PRECISION_H
#define ATTNGEN_RUNTIME_HALF_PRECISION_H

#include <attngen/attngen.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace attngen::rt {

inline uint32_t float_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

inline float bits_float(uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

inline uint16_t to_bfloat16(float x) {
    const uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN stays NaN
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float from_bfloat16(uint16_t b) {
    return bits_float(uint32_t(b) << 16);
}

// The largest finite float16; from 65520 on, values round to infinity.
constexpr float kLargestFloat16 = 65504.0f;

inline uint16_t to_float16(float x) {
    const uint32_t u = float_bits(x);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (a >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and beyond: infinity
    if (a < 0x38800000u) {
        // Below the smallest normal (2^-14): a multiple of 2^-24, the subnormals' step. The
        // product is exact (a power of two), and nearbyint rounds it to nearest even.
        return sign | uint16_t(std::nearbyint(bits_float(a) * 16777216.0f));
    }
    // Rebias the exponent (127 to 15) and round the 13 dropped mantissa bits to nearest even.
    return sign | uint16_t((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13);
}

inline float from_float16(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0) {
        const float magnitude = std::ldexp(float(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline bool is_float16_infinite(uint16_t h) {
    return (h & 0x7fffu) == 0x7c00u;
}

// x stored in precision p and read back as float32.
inline float round_to_precision(float x, attngen_precision p) {
    switch (p) {
        case ATTNGEN_PRECISION_BF16:
            return from_bfloat16(to_bfloat16(x));
        case ATTNGEN_PRECISION_F16:
            return from_float16(to_float16(x));
        case ATTNGEN_PRECISION_F32:
            break;
    }
    return x;
}

// Bytes per stored element of precision p.
inline int element_bytes(attngen_precision p) {
    return p == ATTNGEN_PRECISION_F32 ? 4 : 2;
}

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_HALF_PRECISION_H
