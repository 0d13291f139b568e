// The machine's measured read bandwidth from memory (GB/s on the benchmark's threads), so that
// memory-bound kernels (a decoding step) can be given as a fraction of it.
#ifndef ATTNGEN_BENCH_READ_BANDWIDTH_H
#define ATTNGEN_BENCH_READ_BANDWIDTH_H

#include <cstddef>

namespace attngen_bench {

// Sums a buffer of `bytes` (far larger than the caches) on `threads` threads, each its own
// contiguous part, several times; returns the best GB/s (1e9 bytes per second) of the passes.
double measure_read_bandwidth(int threads, size_t bytes);

// measure_read_bandwidth(2, 1 GiB), measured once per process.
double read_bandwidth_gbs();

// The rate at which `threads` threads read a buffer of `bytes` again and again, as a decoding
// step reads its weights and cache at every step: where the buffer fits the last-level cache,
// this is the cache's bandwidth, not memory's. The threads are started and the buffer read
// once before timing (thread start-up alone is tens of microseconds, a whole step at
// gpt2-decode); they then read it in lockstep, every pass starting together, for about 50 ms.
// Returns GB/s over the whole time.
double measure_resident_read_bandwidth(int threads, size_t bytes);

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_READ_BANDWIDTH_H
