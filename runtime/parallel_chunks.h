// Splits a pass over a large array (the input scan, the copy of a staged output) into chunks on
// the kernels' thread pool.
#ifndef ATTNGEN_RUNTIME_PARALLEL_CHUNKS_H
#define ATTNGEN_RUNTIME_PARALLEL_CHUNKS_H

#include <cstddef>
#include <functional>

namespace attngen::rt {

// How a pass is cut into tasks: chunks of `elements`, on the pool only where there are at least
// `min_chunks` of them.
struct ChunkGrain {
    size_t elements;
    size_t min_chunks;
};

// The input scan: chunks of 256 KiB of floats, on the pool from four chunks. Arrays of 768 KiB
// or less are scanned on the calling thread: at bert-128 (384 KiB per input) two tasks took as
// long as one thread, the pool's wake-up eating what the second core saved (and measured level
// again in chunks of 64 KiB from 128 KiB: scripts/paired_ab.py, Zen 4, 2026-12-06).
constexpr ChunkGrain kScanGrain{size_t(64) << 10, 4};
// The copy of a staged output: chunks of 64 KiB of floats, on the pool from two chunks (above
// 64 KiB). It runs right after the kernel, whose threads are still awake. At bert-128 (384 KiB) the
// copy took about 35 us on one thread after the kernel's last loop and 7-11 us in six chunks
// (attngen_parallel_timeline bert-128 bf16, Zen 4); scripts/paired_ab.py, 2 threads, 60 pairs,
// old/new: mha_forward/bert-128 1.012x (43 of 60), mha_forward_bf16/bert-128 1.006x and
// 1.013x (two runs), tutorial 1.001-1.015x.
constexpr ChunkGrain kCopyGrain{size_t(16) << 10, 2};

// Calls chunk(begin, end) for consecutive ranges covering [0, n), of grain.elements elements
// but the last, on Halide's thread pool (the one attngen_set_num_threads sizes) where there are
// at least grain.min_chunks, and returns when all are done. `chunk` must not throw, and must
// give the same result when a range is passed over twice: where the pool's loop fails (an
// application's own halide_do_par_for hook), the whole pass runs again on this thread.
void parallel_chunks(size_t n, const ChunkGrain &grain,
                     const std::function<void(size_t, size_t)> &chunk);

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_PARALLEL_CHUNKS_H
