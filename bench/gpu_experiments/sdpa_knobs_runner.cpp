// Times attngen_sdpa kernels generated with several values of the GPU flash knobs (build.sh
// writes them and sdpa_variants.h, their table), each checked against a float64 reference at 8
// rows of every shape. Built for CUDA, or with ATTNGEN_SDPA_OPENCL for OpenCL, where PoCL checks
// the variants' results on a machine without a GPU (smaller shapes, one timed call).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "experiment_util.h"
#ifdef ATTNGEN_SDPA_OPENCL
#include "HalideRuntimeOpenCL.h"
#endif
#include "sdpa_variants.h"  // SdpaFn, struct SdpaVariant sdpa_variants[]

using Halide::Runtime::Buffer;

namespace {

struct Shape {
    const char *name;
    int b, h, lq, lkv, d, causal;  // attngen_causal
};

// The largest error of out against a float64 reference, at 8 rows spread over the shape.
double worst_error(const Shape &s, const Buffer<float> &q, const Buffer<float> &k,
                   const Buffer<float> &v, const Buffer<float> &out, float scale) {
    double worst = 0;
    for (int t = 0; t < 8; t++) {
        const int i = t == 0 ? s.lq - 1 : (t * 977) % s.lq, hh = t % s.h, bb = t % s.b;
        // causal 1 is top-left (query i sees keys j <= i), 2 bottom-right (j <= i + lkv - lq).
        // A query that sees no key has output 0.
        const int limit = s.causal == 1 ? i : s.causal == 2 ? i + (s.lkv - s.lq) : s.lkv - 1;
        const int last = std::min(limit, s.lkv - 1);
        std::vector<double> p(std::max(last + 1, 0));
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
            const double got = out(d, i, hh, bb);
            const double want = last < 0 ? 0.0 : o / sum;
            worst = std::isfinite(got) ? std::max(worst, std::fabs(want - got)) : INFINITY;
        }
    }
    return worst;
}

// Halide's default handler aborts: a variant that fails to launch (too much shared memory for
// a shape, say) is reported by its error code instead, and the runner goes on.
void print_error(void *, const char *message) {
    std::fprintf(stderr, "halide: %s\n", message);
}

}  // namespace

int main() {
    halide_set_error_handler(print_error);
#ifdef ATTNGEN_SDPA_OPENCL
    const halide_device_interface_t *device = halide_opencl_device_interface();
    const Shape shapes[] = {{"b2-h3-100x77-d64", 2, 3, 100, 77, 64, 0},
                            {"b1-h2-257-d33-causal", 1, 2, 257, 257, 33, 1},
                            {"b1-h2-129x300-d128", 1, 2, 129, 300, 128, 0},
                            {"b1-h1-17x5-d7-bottom-right", 1, 1, 17, 5, 7, 2}};
    const int repetitions = 1, iterations = 1;
#else
    const halide_device_interface_t *device = halide_cuda_device_interface();
    const Shape shapes[] = {
        {"bert-512", 1, 12, 512, 512, 64, 0},       {"bert-512-b8", 8, 12, 512, 512, 64, 0},
        {"gpt2-causal", 1, 12, 1024, 1024, 64, 1},  {"long-single", 1, 1, 16384, 16384, 64, 0},
        {"long-4096", 1, 12, 4096, 4096, 64, 0},    {"long-causal", 1, 12, 4096, 4096, 64, 1},
        {"llama-512-d128", 1, 32, 512, 512, 128, 1}};
    const int repetitions = 5, iterations = 5;
#endif
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 1);
    int failures = 0;
    for (const Shape &s : shapes) {
        Buffer<float> q(s.d, s.lq, s.h, s.b), k(s.d, s.lkv, s.h, s.b), v(s.d, s.lkv, s.h, s.b),
            out(s.d, s.lq, s.h, s.b);
        for (auto *buffer : {&q, &k, &v}) {
            buffer->for_each_value([&](float &x) { x = normal(rng); });
            upload(*buffer, device);
        }
        Buffer<int32_t> lens(s.b);
        lens.fill(s.lkv);
        upload(lens, device);
        Buffer<uint8_t> bool_mask(s.lkv, 1, 1);
        bool_mask.fill(0);
        upload(bool_mask, device);
        Buffer<float> additive(s.lkv, 1, 1, 1);
        additive.fill(0);
        upload(additive, device);
        out.device_malloc(device);
        const float scale = 1.0f / std::sqrt(float(s.d));
        // The causal kernels skip the key blocks past the diagonal: about half the products.
        const double flops = 4.0 * s.b * s.h * s.lq * s.lkv * s.d * (s.causal ? 0.5 : 1.0);
        for (const SdpaVariant &variant : sdpa_variants) {
            const auto call = [&] {
                return variant.fn(nullptr, q, k, v, scale, s.causal, lens, false, bool_mask, false,
                                  additive, out);
            };
            poison(out, device);
            if (const int e = call()) {
                std::printf("%-20s %-16s error %d\n", s.name, variant.name, e);
                std::fflush(stdout);
                ++failures;
                continue;
            }
            out.copy_to_host();
            const double worst = worst_error(s, q, k, v, out, scale);
            const double ms = median_call_ms(call, out, repetitions, iterations);
            const bool wrong = !(worst < 1e-4);
            failures += wrong;
            std::printf("%-20s %-16s %9.3f ms %7.2f TFLOP/s err %.1e%s\n", s.name, variant.name, ms,
                        flops / ms * 1e-9, worst, wrong ? "  WRONG" : "");
            std::fflush(stdout);
        }
    }
    return failures == 0 ? 0 : 1;
}
