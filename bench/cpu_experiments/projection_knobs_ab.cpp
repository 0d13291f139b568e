// Which projection tile and block knobs suit this CPU? The fused forward's projection
// (attngen_linear over weights packed as attngen_mha_set_weights packs them) generated several
// times, one object per knob setting (sdpa_knobs_ab.sh with KERNEL=projection), linked into one
// process, checked against a float64 product, then timed in alternating rounds as sdpa_knobs_ab.cpp
// times its kernels: every round times each variant (best of 3 calls) in an order that rotates.
// Prints per variant the median time and the median over rounds of the first variant's time over
// its own. Called on attngen's thread pool, as inside a forward. Not built by CMake, not a test:
//
//     KERNEL=projection bench/cpu_experiments/sdpa_knobs_ab.sh /tmp/proj "A:" "B:gemm_k_block=768"
//     /tmp/proj/projection_knobs_ab [rows 512] [in 768] [out 768] [rounds 30]
#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "knobs_ab_harness.h"
#include "packed_projection.h"
#include "tensor_buffer.h"
#include "variants.h"  // written by sdpa_knobs_ab.sh: the headers and ATTNGEN_VARIANTS

namespace {

using attngen::rt::PackedProjection;
using attngen::rt::TensorBuffer;
using Kernel = int (*)(void const *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                       halide_buffer_t *);
using Variant = attngen_experiments::Variant<Kernel>;

}  // namespace

int main(int argc, char **argv) {
    const auto arg = [&](int i, int fallback) {
        return attngen_experiments::int_arg(argc, argv, i, fallback);
    };
    const int rows = arg(1, 512), in = arg(2, 768), out = arg(3, 768), rounds = arg(4, 30);
    const std::vector<Variant> variants = {ATTNGEN_VARIANTS};

    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(size_t(rows) * in), w(size_t(out) * in), b(out), y(size_t(rows) * out);
    for (std::vector<float> *t : {&x, &w, &b}) {
        for (float &e : *t) e = uniform(rng);
    }
    PackedProjection packed;
    packed.pack(w.data(), b.data(), out, in);
    // Entry points install attngen's thread pool and allocator; this one installs them too.
    attngen_install_error_handler();
    TensorBuffer<float, 2> x_buf(x.data(), {rows, in});
    TensorBuffer<float, 2> w_buf(packed.weight.data(), {packed.panels(), packed.panel_size()});
    TensorBuffer<float, 1> b_buf(packed.bias.data(), {packed.padded_out});
    TensorBuffer<float, 2> y_buf(y.data(), {rows, out});
    const auto call = [&](Kernel f) {
        return f(nullptr, x_buf.get(), w_buf.get(), b_buf.get(), y_buf.get());
    };
    for (const Variant &v : variants) {
        if (call(v.kernel) != 0) {
            std::fprintf(stderr, "%s: the kernel failed\n", v.name);
            return 1;
        }
        double worst = 0.0;
        for (int r = 0; r < rows; r += std::max(1, rows / 7)) {
            for (int o = 0; o < out; ++o) {
                double want = b[o], scale = std::fabs(b[o]);
                for (int i = 0; i < in; ++i) {
                    const double p = double(x[size_t(r) * in + i]) * w[size_t(o) * in + i];
                    want += p;
                    scale += std::fabs(p);
                }
                worst = std::max(worst, std::fabs(y[size_t(r) * out + o] - want) / scale);
            }
        }
        std::printf("%-6s max |y - float64| / sum |products| %.3g\n", v.name, worst);
        if (!(worst < 1e-5)) return 1;
    }

    const bool timed = attngen_experiments::time_alternating_rounds(
        variants, rounds, 2.0 * rows * double(in) * out, call);
    return timed ? 0 : 1;
}
