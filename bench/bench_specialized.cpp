// Kernels of the fused forward called the same way (attngen/specialized.hpp), side by side:
// - kernel/generic: attngen's schedules, every size a run-time value;
// - kernel/h12_d64: sizes fixed at build time (attngen_add_library's HEAD_DIM / NUM_HEADS),
//   at the shapes with 12 heads of 64;
// - kernel/Mullapudi2016, kernel/Li2018: the same pipeline planned by Halide's autoschedulers.
//
//   build/bench/attngen_bench --benchmark_filter=kernel/
#include <benchmark/benchmark.h>
#include <attngen/specialized.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "attngen_mha_forward_cpu.h"
#include "attngen_mha_forward_h12_d64_cpu.h"
#include "attngen_mha_forward_li2018_cpu.h"
#include "bench_rates.h"
#include "bench_shapes.h"

namespace {

using attngen_bench::random_vector;

using attngen_bench::Shape;

template <typename Kernel>
void BM_Kernel(benchmark::State &state, Kernel kernel, Shape s) {
    const int d = s.d_model, hd = d / s.heads;
    const size_t dd = size_t(d) * d;
    const float w_scale = 1.0f / std::sqrt(float(d));
    const auto wq = random_vector(dd, w_scale, 1), wk = random_vector(dd, w_scale, 2);
    const auto wv = random_vector(dd, w_scale, 3), wo = random_vector(dd, w_scale, 4);
    const auto b = random_vector(d, 0.1f, 5);
    const attngen::specialized::MhaWeights w(d, s.heads, hd, 0, 0, wq.data(), wk.data(), wv.data(),
                                             wo.data(), b.data(), b.data(), b.data(), b.data());
    const auto q = random_vector(size_t(s.batch) * s.q_len * d, 1.0f, 6);
    const auto kv = random_vector(size_t(s.batch) * s.kv_len * d, 1.0f, 7);
    std::vector<float> out(size_t(s.batch) * s.q_len * d);
    attngen_mask mask{};
    mask.causal = s.causal ? ATTNGEN_CAUSAL_TOP_LEFT : ATTNGEN_CAUSAL_NONE;
    for (auto _ : state) {
        const int code =
            attngen::specialized::forward(kernel, w, s.batch, s.q_len, s.kv_len, q.data(),
                                          kv.data(), kv.data(), &mask, out.data());
        if (code != 0) {
            state.SkipWithError(attngen_last_error());
            break;
        }
        benchmark::DoNotOptimize(out.data());
    }
    attngen_bench::set_rates(state, attngen_bench::mha_flops(s));
}

template <typename Kernel>
void Register(const std::string &name, Kernel kernel, const Shape &s) {
    benchmark::RegisterBenchmark(("kernel/" + name + "/" + s.name).c_str(), BM_Kernel<Kernel>,
                                 kernel, s)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

const int registered = [] {
    for (const Shape &s : attngen_bench::shapes()) {
        const std::string name = s.name;
        // The autoschedulers' plans materialize q_len x kv_len scores: skip the long shapes,
        // which take minutes per call with them.
        if (name == "long-causal" || name == "long-single") continue;
        Register("generic", attngen_mha_forward_cpu, s);
        if (s.heads == 12 && s.d_model == 768)
            Register("h12_d64", attngen_mha_forward_h12_d64_cpu, s);
        Register("Li2018", attngen_mha_forward_li2018_cpu, s);
    }
    return 0;
}();

}  // namespace
