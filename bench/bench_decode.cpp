// Google Benchmark suite for decoding with a KV cache, at the decode shapes of
// support/named_shapes.def: one step per iteration (decode_step.h). Counters: GB/s of the bytes
// a step must read (weights plus cached keys and values) and that rate as a fraction of the
// read bandwidth measured in the same process ("bw"), and as a fraction of the rate at which a
// buffer of the step's size is read again and again ("bw_resident", for steps of at most 256 MiB:
// the cache's bandwidth where the step fits it); read_bandwidth and resident_read_bandwidth
// report those on their own. decode_bf16/ and decode_f16/ run the same step on a bfloat16 and a
// float16 handle (2 bytes per element); decode_length/ runs gpt2-decode's step over caches of other
// lengths.
//
//   build/bench/attngen_bench --benchmark_filter='decode|read_bandwidth'
#include <attngen/attngen.h>
#include <benchmark/benchmark.h>

#include "decode_step.h"
#include "read_bandwidth.h"

#include <map>
#include <string>

namespace {

using attngen::DecodeShape;

// measure_resident_read_bandwidth on 2 threads, as read_bandwidth_gbs and the benchmarks run
// (attngen's default on the 2-core machines measured), once per byte count.
// Steps of more than 256 MiB get none (0): no cache holds them, so the rate is memory's, as
// "bw" already says, and the buffer would double the step's memory (440 MB at
// llama3-8b-decode-b8).
double resident_read_bandwidth_gbs(double bytes) {
    if (bytes > 256.0 * (1 << 20)) return 0.0;
    static std::map<double, double> measured;
    auto it = measured.find(bytes);
    if (it == measured.end()) {
        it = measured
                 .emplace(bytes, attngen_bench::measure_resident_read_bandwidth(2, size_t(bytes)))
                 .first;
    }
    return it->second;
}

void BM_Decode(benchmark::State &state, DecodeShape s, attngen_precision precision) {
    attngen_bench::run_decode_steps(state, s, precision, ATTNGEN_DEVICE_CPU,
                                    attngen_bench::read_bandwidth_gbs, resident_read_bandwidth_gbs);
}

// A buffer read again and again on 2 threads: the last-level cache's bandwidth where it holds
// the buffer. 16 MiB is the size nearest a gpt2-decode step's 15 MiB.
void BM_ResidentReadBandwidth(benchmark::State &state) {
    for (auto _ : state) {
        state.counters["GB/s"] =
            attngen_bench::measure_resident_read_bandwidth(2, size_t(state.range(0)) << 20);
    }
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
        benchmark::RegisterBenchmark((std::string("decode_f16/") + s.name).c_str(), BM_Decode, s,
                                     ATTNGEN_PRECISION_F16)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    // gpt2-decode's step over caches of other lengths: a generation steps through every length,
    // and the named shape's 1024 keys are four whole splits of the decode kernel (256 keys
    // each), the fewest keys computed per key held.
    for (const DecodeShape &s : attngen::decode_shapes()) {
        if (std::string(s.name) != "gpt2-decode") continue;
        for (const int cache_len : {1025, 1100, 1300, 2049}) {
            DecodeShape at = s;
            at.cache_len = cache_len;
            benchmark::RegisterBenchmark(
                (std::string("decode_length/") + s.name + "/cache:" + std::to_string(cache_len))
                    .c_str(),
                BM_Decode, at, ATTNGEN_PRECISION_F32)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        }
    }
    benchmark::RegisterBenchmark("read_bandwidth", BM_ReadBandwidth)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("resident_read_bandwidth", BM_ResidentReadBandwidth)
        ->ArgName("MiB")
        ->Arg(4)
        ->Arg(16)
        ->Arg(64)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
    return 0;
}();

}  // namespace
