// Google Benchmark suite for decoding with a KV cache, at the decode shapes of
// support/named_shapes.def: one step per iteration (decode_step.h). Counters: GB/s of the bytes
// a step must read (weights plus cached keys and values) and that rate as a fraction of the
// read bandwidth measured in the same process ("bw"); read_bandwidth reports the latter on its
// own. decode_bf16/ runs the same step on a bfloat16 handle (2 bytes per element).
//
//   build/bench/attngen_bench --benchmark_filter='decode|read_bandwidth'
#include <attngen/attngen.h>
#include <benchmark/benchmark.h>

#include "decode_step.h"
#include "read_bandwidth.h"

#include <string>

namespace {

using attngen::DecodeShape;

void BM_Decode(benchmark::State &state, DecodeShape s, attngen_precision precision) {
    attngen_bench::run_decode_steps(state, s, precision, ATTNGEN_DEVICE_CPU,
                                    attngen_bench::read_bandwidth_gbs);
}

void BM_ReadBandwidth(benchmark::State &state) {
    for (auto _ : state) {
        state.counters["GB/s"] = attngen_bench::measure_read_bandwidth(2, size_t(1) << 30);
    }
}

const int registered = [] {
    for (const DecodeShape &s : attngen::decode_shapes()) {
        benchmark::RegisterBenchmark((std::string("decode/") + s.name).c_str(), BM_Decode, s,
                                     ATTNGEN_PRECISION_F32)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark((std::string("decode_bf16/") + s.name).c_str(), BM_Decode, s,
                                     ATTNGEN_PRECISION_BF16)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    benchmark::RegisterBenchmark("read_bandwidth", BM_ReadBandwidth)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
    return 0;
}();

}  // namespace
