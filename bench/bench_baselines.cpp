// Baselines measured in the same binary as attngen: the machine's FMA peak, OpenBLAS sgemm on
// the projection shapes, and an MHA written on OpenBLAS the way a careful user would (sgemm
// projections; per head and block of queries, sgemm scores, a vectorizable softmax, sgemm
// with the values; no q_len x kv_len buffer).
//
//   build/bench/attngen_bench --benchmark_filter='fma_peak|openblas'
//   --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bench_rates.h"
#include "bench_shapes.h"

namespace {

using namespace attngen_bench;

// y[rows, out] = x[rows, in] w[out, in]^T + bias
void linear(const float *x, const float *w, const float *bias, int rows, int in, int out,
            float *y) {
    for (int r = 0; r < rows; ++r) std::copy(bias, bias + out, y + size_t(r) * out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in, w, in, 1.0f, y,
                out);
}

// Softmax of each row of s [rows, cols] in place, keys past `visible(row)` masked.
void softmax_rows(float *s, int rows, int cols, int first_row, int causal_offset, bool causal) {
    for (int r = 0; r < rows; ++r) {
        float *row = s + size_t(r) * cols;
        const int visible = causal ? std::min(cols, first_row + r + causal_offset + 1) : cols;
        float m = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < visible; ++j) m = std::max(m, row[j]);
        float sum = 0;
        for (int j = 0; j < visible; ++j) sum += row[j] = std::exp(row[j] - m);
        const float inv = visible > 0 ? 1.0f / sum : 0.0f;
        for (int j = 0; j < visible; ++j) row[j] *= inv;
        for (int j = visible; j < cols; ++j) row[j] = 0.0f;
    }
}

void BM_MhaOpenBlas(benchmark::State &state, Shape s) {
    openblas_set_num_threads(2);
    const int d = s.d_model, hd = d / s.heads, block = 256;
    const float w_scale = 1.0f / std::sqrt(float(d));
    const auto wq = random_vector(size_t(d) * d, w_scale, 1),
               wk = random_vector(size_t(d) * d, w_scale, 2);
    const auto wv = random_vector(size_t(d) * d, w_scale, 3),
               wo = random_vector(size_t(d) * d, w_scale, 4);
    const auto b = random_vector(d, 0.1f, 5);
    const auto x = random_vector(size_t(s.batch) * s.q_len * d, 1.0f, 6);
    const auto kv = random_vector(size_t(s.batch) * s.kv_len * d, 1.0f, 7);
    std::vector<float> q(x.size()), k(kv.size()), v(kv.size()), attn(x.size()), out(x.size());
    std::vector<float> scores(size_t(block) * s.kv_len);
    const float scale = 1.0f / std::sqrt(float(hd));
    for (auto _ : state) {
        linear(x.data(), wq.data(), b.data(), s.batch * s.q_len, d, d, q.data());
        linear(kv.data(), wk.data(), b.data(), s.batch * s.kv_len, d, d, k.data());
        linear(kv.data(), wv.data(), b.data(), s.batch * s.kv_len, d, d, v.data());
        for (int bi = 0; bi < s.batch; ++bi) {
            for (int h = 0; h < s.heads; ++h) {
                const float *qh = q.data() + size_t(bi) * s.q_len * d + h * hd;
                const float *kh = k.data() + size_t(bi) * s.kv_len * d + h * hd;
                const float *vh = v.data() + size_t(bi) * s.kv_len * d + h * hd;
                float *oh = attn.data() + size_t(bi) * s.q_len * d + h * hd;
                for (int i0 = 0; i0 < s.q_len; i0 += block) {
                    const int rows = std::min(block, s.q_len - i0);
                    // A causal block sees keys up to its last row only.
                    const int keys = s.causal ? std::min(s.kv_len, i0 + rows) : s.kv_len;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd, scale,
                                qh + size_t(i0) * d, d, kh, d, 0.0f, scores.data(), keys);
                    softmax_rows(scores.data(), rows, keys, i0, 0, s.causal);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys, 1.0f,
                                scores.data(), keys, vh, d, 0.0f, oh + size_t(i0) * d, d);
                }
            }
        }
        linear(attn.data(), wo.data(), b.data(), s.batch * s.q_len, d, d, out.data());
        benchmark::DoNotOptimize(out.data());
    }
    set_rates(state, mha_flops(s));
}

// One projection of the shape, [B*Lq, D] x [D, D], as attngen's linear/<shape> runs it.
void BM_SgemmOpenBlas(benchmark::State &state, Shape s) {
    openblas_set_num_threads(2);
    const int rows = s.batch * s.q_len, d = s.d_model;
    const auto x = random_vector(size_t(rows) * d, 1.0f, 1);
    const auto w = random_vector(size_t(d) * d, 0.05f, 2);
    const auto b = random_vector(d, 0.1f, 3);
    std::vector<float> y(x.size());
    for (auto _ : state) {
        linear(x.data(), w.data(), b.data(), rows, d, d, y.data());
        benchmark::DoNotOptimize(y.data());
    }
    set_rates(state, 2.0 * rows * d * d);
}

void BM_FmaPeak(benchmark::State &state, PeakIsa isa) {
    double gflops = 0;
    for (auto _ : state) gflops = measure_fma_peak(2, 0.5, isa);
    state.counters["GFLOP/s"] = gflops;
}

const int registered = [] {
    // fma_peak is the native peak; the x86 variants' own peaks beside it (bench_rates.h divides
    // by the one ATTNGEN_CPU_DISPATCH selects).
    const std::pair<const char *, PeakIsa> peaks[] = {{"fma_peak", PeakIsa::kNative},
#if defined(__x86_64__)
                                                      {"fma_peak_avx2", PeakIsa::kAvx2},
                                                      {"fma_peak_sse41", PeakIsa::kSse41}
#endif
    };
    for (const auto &[name, isa] : peaks) {
        benchmark::RegisterBenchmark(name, BM_FmaPeak, isa)
            ->Iterations(3)
            ->Unit(benchmark::kMillisecond);
    }
    // The bfloat16 kernels' own peak, where the CPU has AVX512-BF16: their rates divided by it,
    // not by the float32 one that their peak= counters use.
    if (has_avx512_bf16()) {
        benchmark::RegisterBenchmark("fma_peak_bf16", BM_FmaPeak, PeakIsa::kAvx512Bf16)
            ->Iterations(3)
            ->Unit(benchmark::kMillisecond);
    }
    for (const Shape &s : shapes()) {
        const std::string name = s.name;
        benchmark::RegisterBenchmark(("baseline_openblas/" + name).c_str(), BM_MhaOpenBlas, s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("sgemm_openblas/" + name).c_str(), BM_SgemmOpenBlas, s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    return 0;
}();

}  // namespace
