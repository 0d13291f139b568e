// Times attngen_sdpa CUDA kernels generated with several gpu_query_block x gpu_key_block knob
// values (build.sh), each checked against a float64 reference at 8 rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "experiment_util.h"
// build.sh generates four variants, sdpa_v0 to sdpa_v3, and names their knobs in SDPA_LABELS.
#ifndef SDPA_LABELS
#define SDPA_LABELS "v0", "v1", "v2", "v3"
#endif
#define V(n)                                                                             \
    extern "C" int sdpa_v##n(const void *, halide_buffer_t *, halide_buffer_t *,         \
                             halide_buffer_t *, float, int32_t, halide_buffer_t *, bool, \
                             halide_buffer_t *, bool, halide_buffer_t *, halide_buffer_t *);
V(0)
V(1)
V(2)
V(3)
using Fn = decltype(&sdpa_v0);
const char *const labels[] = {SDPA_LABELS};
struct Variant {
    const char *name;
    Fn fn;
} variants[] = {
    {labels[0], sdpa_v0}, {labels[1], sdpa_v1}, {labels[2], sdpa_v2}, {labels[3], sdpa_v3}};
using Halide::Runtime::Buffer;
int main() {
    struct Shape {
        const char *name;
        int b, h, lq, lkv, d, causal;
    } shapes[] = {{"bert-512-b8", 8, 12, 512, 512, 64, 0},
                  {"gpt2-causal", 1, 12, 1024, 1024, 64, 1},
                  {"long-4096", 1, 12, 4096, 4096, 64, 0},
                  {"long-causal", 1, 12, 4096, 4096, 64, 1}};
    std::mt19937 rng(1);
    std::normal_distribution<float> N(0, 1);
    const halide_device_interface_t *cuda = halide_cuda_device_interface();
    for (auto s : shapes) {
        Buffer<float> q(s.d, s.lq, s.h, s.b), k(s.d, s.lkv, s.h, s.b), v(s.d, s.lkv, s.h, s.b),
            out(s.d, s.lq, s.h, s.b);
        for (auto *B : {&q, &k, &v}) {
            B->for_each_value([&](float &x) { x = N(rng); });
            upload(*B, cuda);
        }
        Buffer<int32_t> lens(s.b);
        lens.fill(s.lkv);
        upload(lens, cuda);
        Buffer<uint8_t> bm(s.lkv, 1, 1);
        bm.fill(0);
        upload(bm, cuda);
        Buffer<float> add(s.lkv, 1, 1, 1);
        add.fill(0);
        upload(add, cuda);
        out.device_malloc(cuda);
        const float scale = 1.0f / std::sqrt(float(s.d));
        double flops = 4.0 * s.b * s.h * s.lq * s.lkv * s.d * (s.causal ? 0.5 : 1.0);
        for (auto &var : variants) {
            poison(out, cuda);
            int e = var.fn(nullptr, q, k, v, scale, s.causal, lens, false, bm, false, add, out);
            if (e) {
                printf("%s %s error %d\n", s.name, var.name, e);
                continue;
            }
            out.copy_to_host();
            double worst = 0;
            for (int t = 0; t < 8; t++) {
                int i = (t * 977) % s.lq, hh = t % s.h, bb = t % s.b;
                if (t == 0) i = s.lq - 1;
                int last = s.causal ? i + (s.lkv - s.lq) : s.lkv - 1;
                std::vector<double> p(last + 1);
                double m = -1e300, sum = 0;
                for (int j = 0; j <= last; j++) {
                    double dot = 0;
                    for (int d = 0; d < s.d; d++) dot += double(q(d, i, hh, bb)) * k(d, j, hh, bb);
                    p[j] = dot * scale;
                    m = std::max(m, p[j]);
                }
                for (int j = 0; j <= last; j++) {
                    p[j] = std::exp(p[j] - m);
                    sum += p[j];
                }
                for (int d = 0; d < s.d; d++) {
                    double o = 0;
                    for (int j = 0; j <= last; j++) o += p[j] * v(d, j, hh, bb);
                    o /= sum;
                    worst = std::max(worst, std::fabs(o - out(d, i, hh, bb)));
                }
            }
            const double ms = median_call_ms(
                [&] {
                    var.fn(nullptr, q, k, v, scale, s.causal, lens, false, bm, false, add, out);
                },
                out, 5, 5);
            printf("%-12s %-8s %9.3f ms %7.2f TFLOP/s err %.1e\n", s.name, var.name, ms,
                   flops / ms * 1e-9, worst);
            fflush(stdout);
        }
    }
}
