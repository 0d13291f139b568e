// Times the projection variants (projection_variants.cpp) on a CUDA GPU, each checked against
// a float64 reference at 200 outputs and for NaN (unwritten) outputs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "HalideBuffer.h"
#include "HalideRuntimeCuda.h"
#include "variants.h"
using Halide::Runtime::Buffer;

int main() {
    struct Shape {
        const char *name;
        int rows, K, M;
    } shapes[] = {{"bert-128", 128, 768, 768},
                  {"bert-512", 512, 768, 768},
                  {"bert-512-b8", 4096, 768, 768},
                  {"long-causal", 8192, 768, 768},
                  {"llama-4096x4096-r512", 512, 4096, 4096}};
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> U(-1, 1);
    const halide_device_interface_t *cuda = halide_cuda_device_interface();
    for (auto s : shapes) {
        int Mp = (s.M + 63) / 64 * 64;
        Buffer<float> x(s.K, s.rows), w(Mp, s.K), bias(s.M), out(s.M, s.rows);
        x.for_each_value([&](float &v) { v = U(rng); });
        w.for_each_value([&](float &v) { v = U(rng); });
        bias.for_each_value([&](float &v) { v = U(rng); });
        x.set_host_dirty();
        w.set_host_dirty();
        bias.set_host_dirty();
        x.copy_to_device(cuda);
        w.copy_to_device(cuda);
        bias.copy_to_device(cuda);
        out.device_malloc(cuda);
        double flops = 2.0 * s.rows * s.K * s.M;
        for (auto &v : variants) {
            out.set_device_dirty(false);
            out.fill(NAN);
            out.set_host_dirty();
            out.copy_to_device(cuda);
            int e = v.fn(nullptr, x, w, bias, out);
            if (e) {
                printf("%s %s error %d\n", s.name, v.name, e);
                continue;
            }
            out.copy_to_host();
            double worst = 0;
            for (int t = 0; t < 200; t++) {
                int o = (t * 7919) % s.M, n = (t * 104729) % s.rows;
                if (t == 0) {
                    o = s.M - 1;
                    n = s.rows - 1;
                }
                double ref = bias(o);
                for (int f = 0; f < s.K; f++) ref += double(x(f, n)) * w(o, f);
                worst = std::max(worst, std::fabs(out(o, n) - ref) / (1 + std::fabs(ref)));
            }
            int nan = 0;
            for (int n = 0; n < s.rows; n++)
                for (int o = 0; o < s.M; o++) nan += std::isnan(out(o, n));
            std::vector<double> ts;
            for (int rep = 0; rep < 7; rep++) {
                int iters = 10;
                halide_device_sync(nullptr, out);
                auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < iters; i++) v.fn(nullptr, x, w, bias, out);
                halide_device_sync(nullptr, out);
                ts.push_back(
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count() /
                    iters);
            }
            std::sort(ts.begin(), ts.end());
            printf("%-22s %-16s %8.4f ms %8.2f TFLOP/s err %.2e nan %d\n", s.name, v.name, ts[3],
                   flops / ts[3] * 1e-9, worst, nan);
        }
    }
}
