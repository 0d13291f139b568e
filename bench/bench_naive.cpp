// The naive baseline: MHA as the textbook writes it, plain loops in float on one thread (the
// projections as row-times-column dot products, a full score row per query, exp, normalize,
// weighted sum of values). It shows what attngen's schedules buy over code with no blocking,
// vectorization plan or threads. Only shapes under 4 GFLOP: the long ones would take minutes.
//
//   build/bench/attngen_bench --benchmark_filter=baseline_naive
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench_rates.h"
#include "bench_shapes.h"

namespace {

using namespace attngen_bench;

// y[r, o] = sum_i x[r, i] w[o, i] + bias[o]
void naive_linear(const std::vector<float> &x, const std::vector<float> &w,
                  const std::vector<float> &bias, int rows, int d, std::vector<float> &y) {
    for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < d; ++o) {
            float acc = bias[o];
            for (int i = 0; i < d; ++i) acc += x[size_t(r) * d + i] * w[size_t(o) * d + i];
            y[size_t(r) * d + o] = acc;
        }
    }
}

void BM_MhaNaive(benchmark::State &state, Shape s) {
    const int d = s.d_model, hd = d / s.heads;
    const float w_scale = 1.0f / std::sqrt(float(d));
    std::vector<std::vector<float>> w;
    for (unsigned seed = 1; seed <= 4; ++seed)
        w.push_back(random_vector(size_t(d) * d, w_scale, seed));
    const auto bias = random_vector(d, 0.1f, 5);
    const auto x = random_vector(size_t(s.batch) * s.q_len * d, 1.0f, 6);
    const auto kv = random_vector(size_t(s.batch) * s.kv_len * d, 1.0f, 7);
    std::vector<float> q(x.size()), k(kv.size()), v(kv.size()), attn(x.size()), out(x.size());
    std::vector<float> scores(s.kv_len);
    const float scale = 1.0f / std::sqrt(float(hd));
    for (auto _ : state) {
        naive_linear(x, w[0], bias, s.batch * s.q_len, d, q);
        naive_linear(kv, w[1], bias, s.batch * s.kv_len, d, k);
        naive_linear(kv, w[2], bias, s.batch * s.kv_len, d, v);
        for (int b = 0; b < s.batch; ++b) {
            for (int h = 0; h < s.heads; ++h) {
                for (int i = 0; i < s.q_len; ++i) {
                    const float *qi = &q[(size_t(b) * s.q_len + i) * d + h * hd];
                    const int visible = s.causal ? std::min(s.kv_len, i + 1) : s.kv_len;
                    float m = -INFINITY, sum = 0.0f;
                    for (int j = 0; j < visible; ++j) {
                        const float *kj = &k[(size_t(b) * s.kv_len + j) * d + h * hd];
                        float dot = 0.0f;
                        for (int c = 0; c < hd; ++c) dot += qi[c] * kj[c];
                        scores[j] = dot * scale;
                        m = std::max(m, scores[j]);
                    }
                    for (int j = 0; j < visible; ++j) sum += scores[j] = std::exp(scores[j] - m);
                    float *oi = &attn[(size_t(b) * s.q_len + i) * d + h * hd];
                    std::fill(oi, oi + hd, 0.0f);
                    for (int j = 0; j < visible; ++j) {
                        const float *vj = &v[(size_t(b) * s.kv_len + j) * d + h * hd];
                        for (int c = 0; c < hd; ++c) oi[c] += scores[j] / sum * vj[c];
                    }
                }
            }
        }
        naive_linear(attn, w[3], bias, s.batch * s.q_len, d, out);
        benchmark::DoNotOptimize(out.data());
    }
    set_rates(state, mha_flops(s));
}

const int registered = [] {
    for (const Shape &s : shapes()) {
        if (mha_flops(s) > 4e9) continue;
        benchmark::RegisterBenchmark(("baseline_naive/" + std::string(s.name)).c_str(), BM_MhaNaive,
                                     s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    return 0;
}();

}  // namespace
