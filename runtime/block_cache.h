// Halide's allocations go through a cache of freed blocks (block_cache.cpp).
#ifndef ATTNGEN_RUNTIME_BLOCK_CACHE_H
#define ATTNGEN_RUNTIME_BLOCK_CACHE_H

namespace attngen::rt {

// Installs the cache as Halide's malloc and free, unless someone installed another allocator
// first. Called once, before the first kernel runs.
void install_block_cache();

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_BLOCK_CACHE_H
