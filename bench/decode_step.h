// One decoding step as a model runs it per token and layer: the new token's keys and values
// projected and appended (into a scratch item, reset every step, so that the measured cache
// keeps its length), and the cached forward of the new query over cache_len positions. A
// prefill shape appends q_len tokens to an empty item and runs the cached forward over them.
// Shared by the CPU suite (bench_decode.cpp), the GPU suite (bench_device.cpp) and the
// parallel-loop timeline (parallel_timeline.cpp).
#ifndef ATTNGEN_BENCH_DECODE_STEP_H
#define ATTNGEN_BENCH_DECODE_STEP_H

#include <attngen/attngen.h>
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "named_shapes.h"

namespace attngen_bench {

// A handle with random weights and a cache filled to the shape's cache_len, ready to step.
class DecodeStepper {
  public:
    DecodeStepper(const attngen::DecodeShape &s, attngen_precision precision,
                  attngen_device device);
    ~DecodeStepper();
    DecodeStepper(const DecodeStepper &) = delete;
    DecodeStepper &operator=(const DecodeStepper &) = delete;

    // Empty when the set-up succeeded; otherwise attngen's message.
    const std::string &error() const { return error_; }
    // One step; on failure the status, with attngen_last_error().
    attngen_status step();
    // The bytes a step must read at least: every weight once, every cached key and value once,
    // each element of the handle's precision.
    double step_bytes() const;

  private:
    bool ok(attngen_status s);

    attngen::DecodeShape shape_;
    attngen_precision precision_;
    attngen_mha *m_ = nullptr;
    attngen_kv_cache *cache_ = nullptr, *scratch_ = nullptr;
    std::vector<float> x_, out_;
    std::string error_;
};

// Counters: "GB/s", DecodeStepper::step_bytes() per second; with reference_gbs, "bw", that rate
// as a fraction of reference_gbs() (a read bandwidth measured in the same process); with
// resident_gbs, "bw_resident", that rate as a fraction of resident_gbs(step bytes), the rate at
// which the same number of bytes is read again and again (measure_resident_read_bandwidth):
// where a step's bytes fit the last-level cache, as gpt2-decode's do, a step reads them from
// there, and "bw" against memory's bandwidth says little. A resident_gbs of 0 gives no
// counter.
void run_decode_steps(benchmark::State &state, const attngen::DecodeShape &s,
                      attngen_precision precision, attngen_device device, double (*reference_gbs)(),
                      double (*resident_gbs)(double bytes) = nullptr);

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_DECODE_STEP_H
