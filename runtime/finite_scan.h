// Whether arrays hold only finite values, tested on their bits so that the compiler vectorizes
// the test, and on the kernels' thread pool for arrays of several chunks (parallel_chunks.h).
// The MHA and sdpa entry points scan their inputs with it (nonfinite.h), the KV cache its
// inputs and the rows it is about to store (kv_cache.cpp).
#ifndef ATTNGEN_RUNTIME_FINITE_SCAN_H
#define ATTNGEN_RUNTIME_FINITE_SCAN_H

#include <cstddef>
#include <cstdint>

namespace attngen::rt {

// Elements tested between early exits, on one thread.
constexpr size_t kFiniteScanChunk = 4096;

// A 16-bit format's exponent field: all ones is infinity or NaN.
constexpr uint16_t kBfloat16Exponent = 0x7f80u;
constexpr uint16_t kFloat16Exponent = 0x7c00u;

// On the calling thread. With allow_negative_infinity, -inf counts as finite (an additive mask
// uses it to mask); NaN and +inf never do.
bool all_finite(const float *data, size_t n, bool allow_negative_infinity = false);

// The same answers, over chunks on the thread pool where n is large.
bool all_finite_parallel(const float *data, size_t n, bool allow_negative_infinity = false);

// The index of the first NaN or infinity in data[0..n), or n: the parallel test first, the
// element looked for only where there is one (for an error message that names it).
size_t first_non_finite(const float *data, size_t n);

// 16-bit floats given as their bits (bfloat16 or float16: exponent is the format's
// k*Exponent), over chunks on the thread pool where n is large.
bool all_finite_16_parallel(const uint16_t *bits, size_t n, uint16_t exponent);

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_FINITE_SCAN_H
