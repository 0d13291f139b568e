// An allocator for the buffers a decoding step streams through whole (a KV cache's keys and
// values, a handle's packed weights). Those of at least kHugePageBytes are aligned to it and,
// on Linux, marked for
// transparent huge pages (madvise MADV_HUGEPAGE): Debian's default mode, "madvise", gives them
// only on request. With 4 KiB pages decode/long-decode, whose step reads a 268 MB cache, took
// 1.11x the time (THP "always" against "madvise" system-wide, the same binary, 3 alternating
// runs, Zen 4: 8.07-8.43 against 9.15-9.32 ms); with this allocator, against without it,
// 1.14x in float32 and 1.13x in bfloat16 (scripts/ab_runs.py, 3 rounds). The weights on them
// as well (PackedProjection), against only the cache, 8 rounds: decode/llama3-8b-decode (168 MB
// of weights) 1.02x in the median (0.81-1.13: bound by DRAM, this host's noise is larger),
// its batch of 8 1.06x, gpt2-decode 1.08x, bfloat16 llama3-8b-decode 1.04x.
#ifndef ATTNGEN_RUNTIME_HUGE_PAGES_H
#define ATTNGEN_RUNTIME_HUGE_PAGES_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attngen::rt {

constexpr size_t kHugePageBytes = size_t(2) << 20;

template <typename T>
class HugePageAllocator {
  public:
    using value_type = T;

    HugePageAllocator() = default;
    template <typename U>
    HugePageAllocator(const HugePageAllocator<U> &) noexcept {}

    T *allocate(size_t n) {
        if (n > (std::numeric_limits<size_t>::max() - kHugePageBytes) / sizeof(T)) {
            throw std::bad_alloc();
        }
        const size_t bytes = n * sizeof(T);
        if (bytes < kHugePageBytes) return static_cast<T *>(::operator new(bytes));
        const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
        void *p = std::aligned_alloc(kHugePageBytes, rounded);
        if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        // Advice only: where the kernel refuses it, the buffer keeps 4 KiB pages.
        madvise(p, rounded, MADV_HUGEPAGE);
#endif
        return static_cast<T *>(p);
    }

    void deallocate(T *p, size_t n) noexcept {
        if (n * sizeof(T) < kHugePageBytes) {
            ::operator delete(p);
        } else {
            std::free(p);
        }
    }

    friend bool operator==(const HugePageAllocator &, const HugePageAllocator &) {
        return true;
    }
    friend bool operator!=(const HugePageAllocator &, const HugePageAllocator &) {
        return false;
    }
};

using HugePageBytes = std::vector<uint8_t, HugePageAllocator<uint8_t>>;

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_HUGE_PAGES_H
