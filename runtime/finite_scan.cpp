#include "finite_scan.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "cpu_dispatch.h"
#include "parallel_chunks.h"

namespace attngen::rt {
namespace {

// Whether is_bad holds for none of the n values of type Bits at data. Branch-free within each
// kFiniteScanChunk, so the loop vectorizes (the per-element std::isfinite loop with an early
// exit took 2.5% of an attngen_sdpa call at bert-512, perf; the KV cache's own loop of that
// kind took about 2 ms of a llama3-8b-prefill's append for its 2 x 8 MiB of keys and values,
// on one thread). Inlined into each compilation below, which vectorizes it for its own ISA.
template <typename Bits, typename IsBad>
[[gnu::always_inline]] inline bool none_bad(const void *data, size_t n, IsBad is_bad) {
    const auto *bytes = static_cast<const unsigned char *>(data);
    for (size_t start = 0; start < n; start += kFiniteScanChunk) {
        const size_t end = std::min(n, start + kFiniteScanChunk);
        unsigned bad = 0;
        for (size_t i = start; i < end; ++i) {
            Bits bits;
            std::memcpy(&bits, bytes + i * sizeof(Bits), sizeof bits);
            bad |= unsigned(is_bad(bits));
        }
        if (bad != 0) return false;
    }
    return true;
}

// A test without -inf's exception where none is allowed: one compare per value fewer.
[[gnu::always_inline]] inline bool floats_finite(const float *data, size_t n,
                                                 bool allow_negative_infinity) {
    constexpr uint32_t kExponent = 0x7f800000u, kNegativeInfinity = 0xff800000u;
    if (!allow_negative_infinity) {
        return none_bad<uint32_t>(data, n,
                                  [](uint32_t bits) { return (bits & kExponent) == kExponent; });
    }
    return none_bad<uint32_t>(data, n, [](uint32_t bits) {
        return (bits & kExponent) == kExponent && bits != kNegativeInfinity;
    });
}

[[gnu::always_inline]] inline bool halves_finite(const uint16_t *bits, size_t n,
                                                 uint16_t exponent) {
    return none_bad<uint16_t>(bits, n,
                              [exponent](uint16_t b) { return (b & exponent) == exponent; });
}

bool floats_finite_baseline(const float *data, size_t n, bool allow_negative_infinity) {
    return floats_finite(data, n, allow_negative_infinity);
}
bool halves_finite_baseline(const uint16_t *bits, size_t n, uint16_t exponent) {
    return halves_finite(bits, n, exponent);
}

// The library is compiled for baseline x86-64, where this loop tests 4 floats per SSE2
// instruction: a C++ copy of it ran at 28 GB/s on one Zen 4 core from L2 (384 KiB, a bert-128
// input: 14 us); compiled for AVX2 at 56 GB/s (7.0 us), for AVX-512 at 59-88 GB/s (4.5-6.7 us;
// best of 200 calls, 3 runs, GCC 12). In the library, these scans had been 2.6% of an
// attngen_sdpa call at bert-512 (perf, `sdpa/bert-512`). Compiled three times; widest() picks.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) bool floats_finite_avx2(const float *data, size_t n,
                                                        bool allow_negative_infinity) {
    return floats_finite(data, n, allow_negative_infinity);
}
__attribute__((target("avx512f,avx512bw"))) bool floats_finite_avx512(
    const float *data, size_t n, bool allow_negative_infinity) {
    return floats_finite(data, n, allow_negative_infinity);
}
__attribute__((target("avx2"))) bool halves_finite_avx2(const uint16_t *bits, size_t n,
                                                        uint16_t exponent) {
    return halves_finite(bits, n, exponent);
}
__attribute__((target("avx512f,avx512bw"))) bool halves_finite_avx512(const uint16_t *bits,
                                                                      size_t n, uint16_t exponent) {
    return halves_finite(bits, n, exponent);
}
#else
// runtime_vectors() answers kBaseline here.
constexpr auto floats_finite_avx2 = floats_finite_baseline;
constexpr auto floats_finite_avx512 = floats_finite_baseline;
constexpr auto halves_finite_avx2 = halves_finite_baseline;
constexpr auto halves_finite_avx512 = halves_finite_baseline;
#endif

// The compilation of a scan that runtime_vectors() picks.
template <typename Scan>
Scan widest(Scan baseline, Scan avx2, Scan avx512) {
    switch (runtime_vectors()) {
        case RuntimeVectors::kAvx512:
            return avx512;
        case RuntimeVectors::kAvx2:
            return avx2;
        case RuntimeVectors::kBaseline:
            break;
    }
    return baseline;
}

// Picked once, not per chunk of a parallel scan.
bool floats_finite_here(const float *data, size_t n, bool allow_negative_infinity) {
    static const auto scan =
        widest(floats_finite_baseline, floats_finite_avx2, floats_finite_avx512);
    return scan(data, n, allow_negative_infinity);
}

bool halves_finite_here(const uint16_t *bits, size_t n, uint16_t exponent) {
    static const auto scan =
        widest(halves_finite_baseline, halves_finite_avx2, halves_finite_avx512);
    return scan(bits, n, exponent);
}

// scan(begin, end) over chunks on the pool; false as soon as one chunk is. A chunk that starts
// after another found a bad value returns at once: one bad value decides.
template <typename Scan>
bool all_chunks(size_t n, Scan scan) {
    struct State {
        Scan scan;
        std::atomic<bool> good{true};
    } state{scan};
    // One pointer captured, so that std::function keeps the lambda inline (no allocation).
    parallel_chunks(n, kScanGrain, [s = &state](size_t begin, size_t end) {
        if (!s->good.load(std::memory_order_relaxed)) return;
        if (!s->scan(begin, end)) s->good = false;
    });
    return state.good;
}

}  // namespace

bool all_finite(const float *data, size_t n, bool allow_negative_infinity) {
    return floats_finite_here(data, n, allow_negative_infinity);
}

// The scans of a bert-512 forward's two 1.5 MB inputs took about 100 us on one thread (0.6% of
// the call, one core's speed reading lines from L3 or memory), 67 us on two
// (attngen_parallel_timeline, AVX-512, Zen 4).
bool all_finite_parallel(const float *data, size_t n, bool allow_negative_infinity) {
    return all_chunks(n, [=](size_t begin, size_t end) {
        return floats_finite_here(data + begin, end - begin, allow_negative_infinity);
    });
}

size_t first_non_finite(const float *data, size_t n) {
    if (all_finite_parallel(data, n)) return n;
    size_t i = 0;
    while (i < n && std::isfinite(data[i])) ++i;
    return i;
}

bool all_finite_16_parallel(const uint16_t *bits, size_t n, uint16_t exponent) {
    return all_chunks(n, [=](size_t begin, size_t end) {
        return halves_finite_here(bits + begin, end - begin, exponent);
    });
}

}  // namespace attngen::rt
