// Times the variants of result(o, n) = bias(o) + sum_f x(f, n) w(o, f) that a *_variants.cpp
// program compiled (its variants.h) on a CUDA GPU, each checked against a float64 reference at
// 200 outputs and for NaN (unwritten) outputs. Built with ATTNGEN_FEW_ROWS for the few-rows
// variants' shapes (decoding's matrix-vector products); GB/s counts the weights read once.
// Built with ATTNGEN_EXPERIMENT_OPENCL (build.sh: ATTNGEN_EXPERIMENT_API=opencl), it only checks
// each variant, through PoCL, at shapes off every tile edge.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "experiment_util.h"
#include "variants.h"
using Halide::Runtime::Buffer;

namespace {

struct Shape {
    const char *name;
    int rows, K, M;
};

#if defined(ATTNGEN_EXPERIMENT_OPENCL)
// Through PoCL on a CPU: correctness only, at shapes off every tile edge.
const Shape kShapes[] = {{"odd", 37, 100, 72},
                         {"one-row", 1, 64, 64},
                         {"block+1", 65, 36, 129},
                         {"eight-rows", 8, 300, 200}};
#elif defined(ATTNGEN_FEW_ROWS)
const Shape kShapes[] = {{"llama-q-r1", 1, 4096, 4096},
                         {"llama-q-r8", 8, 4096, 4096},
                         {"llama-kv-r1", 1, 4096, 1024},
                         {"gpt2-r1", 1, 768, 768}};
#else
const Shape kShapes[] = {
    {"tutorial", 320, 512, 512},      {"bert-128", 128, 768, 768},
    {"bert-512", 512, 768, 768},      {"bert-512-b8", 4096, 768, 768},
    {"8192x768x768", 8192, 768, 768}, {"llama-4096x4096-r512", 512, 4096, 4096}};
#endif

// The largest error relative to 1 + |reference| at 200 outputs, the last one among them.
double worst_error(const Shape &s, Buffer<float> &x, Buffer<float> &w, Buffer<float> &bias,
                   Buffer<float> &out) {
    double worst = 0;
    for (int t = 0; t < 200; t++) {
        const int o = t == 0 ? s.M - 1 : (t * 7919) % s.M;
        const int n = t == 0 ? s.rows - 1 : (t * 104729) % s.rows;
        double ref = bias(o);
        for (int f = 0; f < s.K; f++) ref += double(x(f, n)) * w(o, f);
        worst = std::max(worst, std::fabs(out(o, n) - ref) / (1 + std::fabs(ref)));
    }
    return worst;
}

}  // namespace

int main() {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uniform(-1, 1);
    const halide_device_interface_t *device = experiment_device();
    for (const Shape &s : kShapes) {
        const int padded = (s.M + 63) / 64 * 64;
        Buffer<float> x(s.K, s.rows), w(padded, s.K), bias(padded), out(s.M, s.rows);
        for (Buffer<float> *b : {&x, &w, &bias}) {
            b->for_each_value([&](float &v) { v = uniform(rng); });
            upload(*b, device);
        }
        out.device_malloc(device);
        const double flops = 2.0 * s.rows * s.K * s.M;
        for (auto &v : variants) {
            // ATTNGEN_EXPERIMENT_FILTER: only the variants whose names contain it.
            const char *filter = std::getenv("ATTNGEN_EXPERIMENT_FILTER");
            if (filter && !std::strstr(v.name, filter)) continue;
            poison(out, device);
            if (const int e = v.fn(nullptr, x, w, bias, out)) {
                printf("%s %s error %d\n", s.name, v.name, e);
                continue;
            }
            out.copy_to_host();
            int unwritten = 0;
            out.for_each_value([&](float value) { unwritten += std::isnan(value); });
            // Checked before the timed calls, which leave out dirty on the device (reading it on
            // the host then trips HalideBuffer's assertion).
            const double error = worst_error(s, x, w, bias, out);
#ifdef ATTNGEN_EXPERIMENT_OPENCL
            printf("%-22s %-24s err %.2e nan %d\n", s.name, v.name, error, unwritten);
            continue;
#endif
            const double ms = median_call_ms([&] { v.fn(nullptr, x, w, bias, out); }, out, 7, 10);
            printf("%-22s %-24s %8.4f ms %8.2f TFLOP/s %6.0f GB/s err %.2e nan %d\n", s.name,
                   v.name, ms, flops / ms * 1e-9, 4.0 * s.K * s.M / ms * 1e-6, error, unwritten);
            fflush(stdout);
        }
    }
}
