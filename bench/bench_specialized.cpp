// The fused forward with sizes fixed at build time (attngen_add_library's HEAD_DIM / NUM_HEADS)
// beside the generic kernel, both called the same way (attngen/specialized.hpp), at the named
// shapes with 12 heads of 64.
//
//   build/bench/attngen_bench --benchmark_filter=kernel/
#include <benchmark/benchmark.h>
#include <attngen/specialized.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "attngen_mha_forward_cpu.h"
#include "attngen_mha_forward_h12_d64_cpu.h"
#include "bench_rates.h"
#include "bench_shapes.h"

namespace {

using attngen_bench::random_vector;

struct KernelShape {
    const char *name;
    int batch, q_len, kv_len;
};
constexpr int kModel = 768, kHeads = 12, kHeadDim = 64;

template <typename Kernel>
void BM_Kernel(benchmark::State &state, Kernel kernel, KernelShape s) {
    const size_t dd = size_t(kModel) * kModel;
    const float w_scale = 1.0f / std::sqrt(float(kModel));
    const auto wq = random_vector(dd, w_scale, 1), wk = random_vector(dd, w_scale, 2);
    const auto wv = random_vector(dd, w_scale, 3), wo = random_vector(dd, w_scale, 4);
    const auto b = random_vector(kModel, 0.1f, 5);
    const attngen::specialized::MhaWeights w(kModel, kHeads, kHeadDim, 0, 0, wq.data(), wk.data(),
                                             wv.data(), wo.data(), b.data(), b.data(), b.data(),
                                             b.data());
    const auto q = random_vector(size_t(s.batch) * s.q_len * kModel, 1.0f, 6);
    const auto kv = random_vector(size_t(s.batch) * s.kv_len * kModel, 1.0f, 7);
    std::vector<float> out(size_t(s.batch) * s.q_len * kModel);
    for (auto _ : state) {
        const int code =
            attngen::specialized::forward(kernel, w, s.batch, s.q_len, s.kv_len, q.data(),
                                          kv.data(), kv.data(), nullptr, out.data());
        if (code != 0) state.SkipWithError(attngen_last_error());
        benchmark::DoNotOptimize(out.data());
    }
    const attngen_bench::Shape shape{s.name, s.batch, s.q_len, s.kv_len,
                                     kModel, kHeads,  false,   false};
    attngen_bench::set_rates(state, attngen_bench::mha_flops(shape));
}

const int registered = [] {
    for (const KernelShape &s :
         {KernelShape{"bert-128", 1, 128, 128}, KernelShape{"bert-512", 1, 512, 512}}) {
        const std::string name = s.name;
        benchmark::RegisterBenchmark(("kernel/generic/" + name).c_str(),
                                     BM_Kernel<decltype(&attngen_mha_forward_cpu)>,
                                     attngen_mha_forward_cpu, s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("kernel/h12_d64/" + name).c_str(),
                                     BM_Kernel<decltype(&attngen_mha_forward_h12_d64_cpu)>,
                                     attngen_mha_forward_h12_d64_cpu, s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    return 0;
}();

}  // namespace
