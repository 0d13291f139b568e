// Which attention tile knobs suit this CPU? attngen_sdpa's kernel generated several times, one
// object per knob setting (sdpa_knobs_ab.sh runs the build's generator for one x86 target, each
// function named after its setting), linked into one process with the library, checked against
// attngen_sdpa itself, then timed in alternating rounds: every round times each variant (best of
// 3 calls), in an order that rotates, so that a slow minute of a shared host falls on all of them.
// Prints per variant the median time and the median over rounds of the first variant's time over
// its own. The kernels are called as runtime/sdpa.cpp calls them (inputs finite, no weights
// output), on attngen's thread pool. Not built by CMake, not a test:
//
//     bench/cpu_experiments/sdpa_knobs_ab.sh /tmp/knobs "A:" "B:score_rows=6,score_vectors=4"
//     /tmp/knobs/sdpa_knobs_ab [batch 1] [length 512] [causal 0] [rounds 30] [heads 12] [dim 64]
//
// bench/RESULTS.md (2026-12-04, "the attention tiles re-measured") has what it measured.
#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "knobs_ab_harness.h"
#include "mask_buffers.h"
#include "tensor_buffer.h"
#include "variants.h"  // written by sdpa_knobs_ab.sh: the headers and ATTNGEN_VARIANTS

namespace {

using attngen::rt::MaskBuffers;
using attngen::rt::TensorBuffer;
using Kernel = int (*)(void const *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float,
                       int32_t, halide_buffer_t *, bool, halide_buffer_t *, bool, halide_buffer_t *,
                       halide_buffer_t *);
using Variant = attngen_experiments::Variant<Kernel>;

}  // namespace

int main(int argc, char **argv) {
    const auto arg = [&](int i, int fallback) {
        return attngen_experiments::int_arg(argc, argv, i, fallback);
    };
    const int batch = arg(1, 1), len = arg(2, 512), causal = arg(3, 0), rounds = arg(4, 30);
    const int heads = arg(5, 12), dim = arg(6, 64);
    const std::vector<Variant> variants = {ATTNGEN_VARIANTS};

    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t n = size_t(batch) * heads * len * dim;
    std::vector<float> q(n), k(n), v(n), want(n), out(n);
    for (std::vector<float> *t : {&q, &k, &v}) {
        for (float &e : *t) e = normal(rng);
    }
    attngen_mask mask{};
    mask.causal = causal ? ATTNGEN_CAUSAL_TOP_LEFT : ATTNGEN_CAUSAL_NONE;
    if (attngen_sdpa(batch, heads, len, len, dim, dim, q.data(), k.data(), v.data(), &mask, 0.0f,
                     want.data(), nullptr) != ATTNGEN_OK) {
        std::fprintf(stderr, "attngen_sdpa: %s\n", attngen_last_error());
        return 1;
    }
    TensorBuffer<float, 4> qb(q.data(), {batch, heads, len, dim});
    TensorBuffer<float, 4> kb(k.data(), {batch, heads, len, dim});
    TensorBuffer<float, 4> vb(v.data(), {batch, heads, len, dim});
    TensorBuffer<float, 4> ob(out.data(), {batch, heads, len, dim});
    MaskBuffers masks(&mask, batch, heads, len, len);
    const float scale = 1.0f / std::sqrt(float(dim));
    const auto call = [&](Kernel f) {
        return f(nullptr, qb.get(), kb.get(), vb.get(), scale, masks.causal(), masks.kv_lengths(),
                 false, masks.bool_mask(), false, masks.additive(), ob.get());
    };
    for (const Variant &x : variants) {
        if (call(x.kernel) != 0) {
            std::fprintf(stderr, "%s: the kernel failed\n", x.name);
            return 1;
        }
        double diff = 0.0;
        for (size_t i = 0; i < n; ++i) diff = std::max(diff, double(std::fabs(out[i] - want[i])));
        std::printf("%-6s max |out - attngen_sdpa| %.3g\n", x.name, diff);
        if (!(diff < 1e-4)) return 1;
    }

    const double flops = 4.0 * batch * heads * double(len) * len * dim * (causal ? 0.5 : 1.0);
    const bool timed = attngen_experiments::time_alternating_rounds(variants, rounds, flops, call);
    return timed ? 0 : 1;
}
