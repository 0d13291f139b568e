// Google Benchmark suite: the full MHA forward, SDPA and the projection at the named shapes,
// with GFLOP/s as a rate counter. FLOPs are counted as 2*B*Lq*D^2 for each of the q and
// output projections, 2*B*Lkv*D^2 for each of k and v, and 4*B*Lq*Lkv*D for attention (half
// with a causal mask).
//
//   build/bench/attngen_bench --benchmark_filter=tutorial --benchmark_counters_tabular=true
#include <attngen/attngen.h>
#include <benchmark/benchmark.h>

#include "bench_rates.h"
#include "bench_shapes.h"
#include "bf16_dot_probe.h"
#include "mha_forward_call.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace attngen_bench;

void check(attngen_status status, benchmark::State &state) {
    if (status != ATTNGEN_OK) state.SkipWithError(attngen_last_error());
}

// precision: of the handle's weights (float32 inputs and outputs in every precision).
void BM_MhaForward(benchmark::State &state, Shape s, attngen_precision precision) {
    MhaForwardCall forward(s, precision);
    if (!forward.error().empty()) {
        state.SkipWithError(forward.error().c_str());
        return;
    }
    for (auto _ : state) {
        check(forward(), state);
        benchmark::DoNotOptimize(forward.out());
    }
    set_rates(state, mha_flops(s));
}

void BM_Sdpa(benchmark::State &state, Shape s) {
    const int hd = s.d_model / s.heads;
    auto q = random_vector(size_t(s.batch) * s.heads * s.q_len * hd, 1.0f, 1);
    auto k = random_vector(size_t(s.batch) * s.heads * s.kv_len * hd, 1.0f, 2);
    auto v = random_vector(size_t(s.batch) * s.heads * s.kv_len * hd, 1.0f, 3);
    std::vector<float> out(q.size());
    attngen_mask mask{};
    mask.causal = s.causal ? ATTNGEN_CAUSAL_TOP_LEFT : ATTNGEN_CAUSAL_NONE;
    for (auto _ : state) {
        check(attngen_sdpa(s.batch, s.heads, s.q_len, s.kv_len, hd, hd, q.data(), k.data(),
                           v.data(), &mask, 0.0f, out.data(), nullptr),
              state);
        benchmark::DoNotOptimize(out.data());
    }
    set_rates(state, attention_flops(s));
}

void BM_Linear(benchmark::State &state, Shape s) {
    const int rows = s.batch * s.q_len;
    auto x = random_vector(size_t(rows) * s.d_model, 1.0f, 1);
    auto w = random_vector(size_t(s.d_model) * s.d_model, 0.05f, 2);
    auto b = random_vector(s.d_model, 0.1f, 3);
    std::vector<float> y(x.size());
    for (auto _ : state) {
        check(attngen_linear(rows, s.d_model, s.d_model, x.data(), w.data(), b.data(), y.data()),
              state);
        benchmark::DoNotOptimize(y.data());
    }
    set_rates(state, 2.0 * rows * s.d_model * s.d_model);
}

// Which products the bfloat16 forward runs on this machine, in the output's context: the
// choice is the library's own probe (runtime/bf16_dot_probe.h) unless ATTNGEN_CPU_DISPATCH
// sets it, and results from machines on either side of it are not comparable.
void describe_bf16_products() {
    const attngen::rt::DotProductRates &rates = attngen::rt::process_dot_product_rates();
    char text[160];
    std::snprintf(
        text, sizeof text,
        "vdpbf16ps %.1f, FMA %.1f billion multiply-adds/s on one core; the probe picks %s",
        rates.bf16_dot * 1e-9, rates.fp32_fma * 1e-9,
        attngen::rt::bf16_dot_product_pays() ? "the AVX512-BF16 variant" : "float32 FMAs");
    benchmark::AddCustomContext("bf16_products", text);
    const char *dispatch = std::getenv("ATTNGEN_CPU_DISPATCH");
    benchmark::AddCustomContext("ATTNGEN_CPU_DISPATCH", dispatch != nullptr ? dispatch : "");
}

const int registered = [] {
    describe_bf16_products();
    for (const Shape &s : shapes()) {
        const std::string name = s.name;
        benchmark::RegisterBenchmark(("mha_forward/" + name).c_str(), BM_MhaForward, s,
                                     ATTNGEN_PRECISION_F32)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("mha_forward_bf16/" + name).c_str(), BM_MhaForward, s,
                                     ATTNGEN_PRECISION_BF16)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("mha_forward_f16/" + name).c_str(), BM_MhaForward, s,
                                     ATTNGEN_PRECISION_F16)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("sdpa/" + name).c_str(), BM_Sdpa, s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("linear/" + name).c_str(), BM_Linear, s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        if (s.causal) {
            // The same attention without its causal mask: the causal one should take about
            // half the time, because masked key blocks are skipped, not computed.
            Shape unmasked = s;
            unmasked.causal = false;
            benchmark::RegisterBenchmark(("sdpa_unmasked/" + name).c_str(), BM_Sdpa, unmasked)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        }
    }
    return 0;
}();

}  // namespace

BENCHMARK_MAIN();
