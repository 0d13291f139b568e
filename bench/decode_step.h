// One decoding step as a model runs it per token and layer, timed: the new token's keys and
// values projected and appended (into a scratch item, reset every step, so that the measured
// cache keeps its length), and the cached forward of the new query over cache_len positions. A
// prefill shape appends q_len tokens to an empty item and runs the cached forward over them.
// Shared by the CPU suite (bench_decode.cpp) and the GPU suite (bench_device.cpp).
#ifndef ATTNGEN_BENCH_DECODE_STEP_H
#define ATTNGEN_BENCH_DECODE_STEP_H

#include <attngen/attngen.h>
#include <benchmark/benchmark.h>

#include "named_shapes.h"

namespace attngen_bench {

// Counters: "GB/s", the bytes a step must read at least (every weight and every cached key and
// value once, in the handle's precision) per second; with reference_gbs, "bw", that rate as a
// fraction of reference_gbs() (a read bandwidth measured in the same process).
void run_decode_steps(benchmark::State &state, const attngen::DecodeShape &s,
                      attngen_precision precision, attngen_device device,
                      double (*reference_gbs)());

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_DECODE_STEP_H
