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

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_READ_BANDWIDTH_H
