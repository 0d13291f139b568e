// A cache of freed heap blocks for Halide's allocations.
//
// The kernels allocate their intermediates (projected heads, packed keys and values, per-task
// tiles) on every call, megabytes at the larger shapes. glibc gives such blocks back to the
// kernel on free and the next call faults every page in again: perf showed page faults and
// page clearing at about 5% of an MHA forward at bert-512. Freed blocks are kept here instead,
// up to kCacheBytes, and handed out again for requests of the same size class.
#include "block_cache.h"

#include <HalideRuntime.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace attngen::rt {
namespace {

// Halide wants its buffers aligned for the widest vector load it emits (AVX-512: 64 bytes);
// 128 also keeps the size header below in its own cache line pair.
constexpr size_t kAlignment = 128;
constexpr size_t kCacheBytes = size_t(256) << 20;
// Smaller blocks go straight to malloc: glibc serves them from per-thread arenas without
// faulting, and the per-task tiles are many (thousands per call at bert-512), so sending them
// through one mutex made the worker threads contend and sleep (perf: futex wake-ups and
// context switches, bert-512 at 32 ms instead of 20 ms).
constexpr size_t kMinCachedBytes = size_t(128) << 10;

struct Cache {
    std::mutex mutex;
    std::multimap<size_t, void *> free_blocks;  // capacity -> block (header included)
    size_t cached_bytes = 0;
};

Cache &cache() {
    static Cache *c = new Cache;  // never destroyed: kernels may free during static teardown
    return *c;
}

// The bytes to allocate for n: small blocks exactly (to the alignment); cached ones in size
// classes of 1/8 of their power of two, so a request is served by a block at most 12.5% larger.
size_t size_class(size_t n) {
    if (n < kMinCachedBytes) return (n + kAlignment - 1) / kAlignment * kAlignment;
    size_t power = size_t(1) << (63 - __builtin_clzll(n));
    const size_t step = power / 8;
    return (n + step - 1) / step * step;
}

void *cached_malloc(void *, size_t size) {
    const size_t capacity = size_class(size + kAlignment);
    if (capacity >= kMinCachedBytes) {
        Cache &c = cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        auto it = c.free_blocks.find(capacity);
        if (it != c.free_blocks.end()) {
            void *block = it->second;
            c.free_blocks.erase(it);
            c.cached_bytes -= capacity;
            return static_cast<char *>(block) + kAlignment;
        }
    }
    void *block = std::aligned_alloc(kAlignment, capacity);
    if (block == nullptr) return nullptr;
    *static_cast<size_t *>(block) = capacity;
    return static_cast<char *>(block) + kAlignment;
}

void cached_free(void *, void *ptr) {
    if (ptr == nullptr) return;
    void *block = static_cast<char *>(ptr) - kAlignment;
    const size_t capacity = *static_cast<size_t *>(block);
    if (capacity >= kMinCachedBytes) {
        Cache &c = cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        if (c.cached_bytes + capacity <= kCacheBytes) {
            c.free_blocks.emplace(capacity, block);
            c.cached_bytes += capacity;
            return;
        }
    }
    std::free(block);
}

}  // namespace

void install_block_cache() {
    // Only over Halide's own allocator: one an application (or a test) installed stays.
    const halide_malloc_t previous = halide_set_custom_malloc(cached_malloc);
    if (previous != halide_default_malloc && previous != cached_malloc) {
        halide_set_custom_malloc(previous);
        return;
    }
    halide_set_custom_free(cached_free);
}

}  // namespace attngen::rt
