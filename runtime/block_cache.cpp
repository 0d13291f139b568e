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
// Smaller blocks, the per-task tiles (thousands per call at bert-512), are kept per thread
// (SmallBlocks): sent through the one mutex of the large blocks, they made the worker threads
// contend and sleep (perf: futex wake-ups and context switches, bert-512 at 32 ms instead of
// 20 ms), and sent straight to glibc, its malloc and free took about 2% of attngen_sdpa at
// bert-512 (perf).
constexpr size_t kMinCachedBytes = size_t(128) << 10;

// A thread's freed small blocks, looked up by exact capacity. A task allocates its handful of
// tiles at the same sizes each time, so a few slots suffice. The slots are trivially
// destructible, so they stay usable to the end of the thread; a separate thread_local object
// frees their blocks at thread exit and closes them, so that a later free (static teardown)
// goes to glibc.
struct SmallBlocks {
    static constexpr int kSlots = 16;
    size_t capacities[kSlots];
    void *blocks[kSlots];
    int used;
    bool closed;

    void *take(size_t capacity) {
        for (int s = used - 1; s >= 0; --s) {
            if (capacities[s] != capacity) continue;
            void *block = blocks[s];
            --used;
            capacities[s] = capacities[used];
            blocks[s] = blocks[used];
            return block;
        }
        return nullptr;
    }
    bool keep(size_t capacity, void *block) {
        if (closed || used == kSlots) return false;
        capacities[used] = capacity;
        blocks[used] = block;
        ++used;
        return true;
    }
};
thread_local SmallBlocks small_blocks;  // zero-initialized

struct SmallBlocksReaper {
    ~SmallBlocksReaper() {
        small_blocks.closed = true;
        for (int s = 0; s < small_blocks.used; ++s) std::free(small_blocks.blocks[s]);
        small_blocks.used = 0;
    }
};

SmallBlocks &thread_small_blocks() {
    // Constructed on a thread's first use, so its destructor runs when that thread exits.
    thread_local SmallBlocksReaper reaper;
    (void)reaper;
    return small_blocks;
}

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
    } else if (void *block = thread_small_blocks().take(capacity)) {
        return static_cast<char *>(block) + kAlignment;
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
    } else if (thread_small_blocks().keep(capacity, block)) {
        return;
    }
    std::free(block);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace

void install_block_cache() {
    // Under AddressSanitizer (the sanitized tests, the fuzzer) Halide keeps its own allocator:
    // recycled blocks would hide a use after free from ASan, and blocks held by the cache make
    // every fuzz input free less than it allocated, which sends libFuzzer into a leak check per
    // input; LeakSanitizer's tracer crashed in one of them (signal 11, in a fresh-clone CI run).
    if (kUnderAddressSanitizer) return;
    // Only over Halide's own allocator: one an application (or a test) installed stays.
    const halide_malloc_t previous = halide_set_custom_malloc(cached_malloc);
    if (previous != halide_default_malloc && previous != cached_malloc) {
        halide_set_custom_malloc(previous);
        return;
    }
    halide_set_custom_free(cached_free);
}

}  // namespace attngen::rt
