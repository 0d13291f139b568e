// The scans that decide whether inputs and projected cache rows are finite
// (runtime/finite_scan.h): every position of a bad value in arrays of one to several parallel
// chunks, both chunk edges, -inf where it is allowed, and the 16-bit formats' own limits.
#include "finite_scan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "parallel_chunks.h"

namespace attngen_test {
namespace {

using attngen::rt::all_finite;
using attngen::rt::all_finite_16_parallel;
using attngen::rt::all_finite_parallel;
using attngen::rt::kBfloat16Exponent;
using attngen::rt::kFloat16Exponent;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr size_t kChunk = attngen::rt::kScanGrain.elements;   // a parallel task
constexpr size_t kScanChunk = attngen::rt::kFiniteScanChunk;  // an early exit

// Lengths from one element to more chunks than parallel_chunks runs on one thread, with the
// edges of both kinds of chunk and of the scans' vectors (8 and 16 floats, 16 and 32 halves, in
// their AVX2 and AVX-512 compilations, runtime/finite_scan.cpp).
std::vector<size_t> lengths() {
    std::vector<size_t> n = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 4095, 4096, 4097};
    for (size_t c : {kChunk - 1, kChunk, kChunk + 1, 5 * kChunk - 1, 5 * kChunk, 5 * kChunk + 3}) {
        n.push_back(c);
    }
    return n;
}

// Where a bad value goes in an array of n: the ends, chunk edges and a middle.
std::vector<size_t> positions(size_t n) {
    std::vector<size_t> at = {0, n / 2, n - 1};
    if (n > 2) at.push_back(n - 2);  // in a vector loop's remainder
    for (size_t edge : {kScanChunk - 1, kScanChunk, kChunk - 1, kChunk, 3 * kChunk + 5})
        if (edge < n) at.push_back(edge);
    return at;
}

std::vector<float> finite_values(size_t n) {
    std::vector<float> x(n);
    const float specials[] = {0.0f,
                              -0.0f,
                              std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::denorm_min(),
                              1.5f,
                              -3.25e-30f};
    for (size_t i = 0; i < n; ++i) x[i] = specials[i % 7];
    return x;
}

TEST(FiniteScan, FloatArraysWithoutABadValueAreFinite) {
    for (size_t n : lengths()) {
        const std::vector<float> x = finite_values(n);
        EXPECT_TRUE(all_finite(x.data(), n)) << n;
        EXPECT_TRUE(all_finite_parallel(x.data(), n)) << n;
    }
    EXPECT_TRUE(all_finite_parallel(nullptr, 0));
}

TEST(FiniteScan, OneNaNOrInfinityAnywhereIsFound) {
    for (size_t n : lengths()) {
        std::vector<float> x = finite_values(n);
        for (size_t at : positions(n)) {
            for (float bad : {kNaN, -kNaN, kInf, -kInf}) {
                const float kept = x[at];
                x[at] = bad;
                EXPECT_FALSE(all_finite(x.data(), n)) << n << " at " << at << ": " << bad;
                EXPECT_FALSE(all_finite_parallel(x.data(), n)) << n << " at " << at;
                x[at] = kept;
            }
        }
    }
}

// The scans' second loop (an additive mask's -inf allowed) at every length and position: -inf
// passes there and only there; NaN of either sign and +inf never do.
TEST(FiniteScan, NegativeInfinityPassesOnlyWhereAllowed) {
    for (size_t n : lengths()) {
        std::vector<float> x = finite_values(n);
        for (size_t at : positions(n)) {
            const float kept = x[at];
            x[at] = -kInf;
            EXPECT_TRUE(all_finite(x.data(), n, true)) << n << " at " << at;
            EXPECT_TRUE(all_finite_parallel(x.data(), n, true)) << n << " at " << at;
            EXPECT_FALSE(all_finite_parallel(x.data(), n, false)) << n << " at " << at;
            for (float bad : {kNaN, -kNaN, kInf}) {
                x[at] = bad;
                EXPECT_FALSE(all_finite(x.data(), n, true)) << n << " at " << at << ": " << bad;
                EXPECT_FALSE(all_finite_parallel(x.data(), n, true)) << n << " at " << at;
            }
            x[at] = kept;
        }
    }
}

TEST(FiniteScan, SixteenBitFormatsByTheirOwnExponent) {
    // bfloat16: 0x7f7f is its largest finite value, 0x7f80 infinity, 0x7fc1 a NaN; float16:
    // 0x7bff (65504) its largest, 0x7c00 infinity, 0x7e00 a NaN. A float16 infinity's bits are
    // a finite bfloat16 (2^121), and a bfloat16 infinity's bits a float16 NaN.
    struct Format {
        uint16_t exponent, largest, infinity, nan;
    };
    for (const Format f : {Format{kBfloat16Exponent, 0x7f7f, 0x7f80, 0x7fc1},
                           Format{kFloat16Exponent, 0x7bff, 0x7c00, 0x7e00}}) {
        for (size_t n : lengths()) {
            std::vector<uint16_t> bits(n);
            for (size_t i = 0; i < n; ++i) {
                const uint16_t finite[] = {0, 0x8000, f.largest, uint16_t(f.largest | 0x8000),
                                           1, 0x3c00};
                bits[i] = finite[i % 6];
            }
            EXPECT_TRUE(all_finite_16_parallel(bits.data(), n, f.exponent)) << n;
            for (size_t at : positions(n)) {
                for (uint16_t bad : {f.infinity, uint16_t(f.infinity | 0x8000), f.nan}) {
                    const uint16_t kept = bits[at];
                    bits[at] = bad;
                    EXPECT_FALSE(all_finite_16_parallel(bits.data(), n, f.exponent))
                        << std::hex << f.exponent << " " << bad << std::dec << " in " << n << " at "
                        << at;
                    bits[at] = kept;
                }
            }
        }
    }
    const uint16_t float16_infinity = 0x7c00;
    EXPECT_TRUE(all_finite_16_parallel(&float16_infinity, 1, kBfloat16Exponent));
    const uint16_t bfloat16_infinity = 0x7f80;
    EXPECT_FALSE(all_finite_16_parallel(&bfloat16_infinity, 1, kFloat16Exponent));
}

}  // namespace
}  // namespace attngen_test
