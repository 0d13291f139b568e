// Splits a pass over a large array (the input scan, the copy of a staged output) into chunks on
// the kernels' thread pool.
#ifndef ATTNGEN_RUNTIME_PARALLEL_CHUNKS_H
#define ATTNGEN_RUNTIME_PARALLEL_CHUNKS_H

#include <cstddef>
#include <functional>

namespace attngen::rt {

// Elements per chunk of the passes below: 256 KiB of floats.
constexpr size_t kParallelChunkElements = size_t(64) << 10;
// Arrays of fewer chunks than this (768 KiB of floats or less) are passed over on the calling
// thread: at bert-128 (384 KiB per input) two tasks took as long as one thread, the pool's
// wake-up eating what the second core saved.
constexpr size_t kParallelMinChunks = 4;

// Calls chunk(begin, end) for consecutive ranges covering [0, n), of kParallelChunkElements
// elements but the last, on Halide's thread pool (the one attngen_set_num_threads sizes) where
// there are at least kParallelMinChunks, and returns when all are done. `chunk` must not throw,
// and must give the same result when a range is passed over twice: where the pool's loop fails
// (an application's own halide_do_par_for hook), the whole pass runs again on this thread.
void parallel_chunks(size_t n, const std::function<void(size_t, size_t)> &chunk);

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_PARALLEL_CHUNKS_H
