// Does Halide 21's AMX lowering (ExtractTileOperations: tdpbf16ps on 16 x 16 float32 tiles) run a
// bfloat16 projection over the weights exactly as the library stores them for a CPU, and how
// fast? The weights are packed by runtime/packed_projection.h (bfloat16 pairs, panels of 16
// outputs) and read in place, as the library's AMX variant does (generators/stages.cpp,
// define_amx_sums). The operand is x rounded to bfloat16, as the
// library's paired projections take it. Each shape is checked against a float64 sum of the same
// bfloat16 operands and then timed, best of 20 calls. Not built by CMake, not a test (JIT, needs
// the .venv's libHalide and a CPU with AMX-BF16 whose tile state Linux grants, asked by the
// library's own runtime/amx_tile_state.cpp):
//
//     H=.venv/lib/python3.11/site-packages/halide
//     g++ -O2 -std=c++17 -Iruntime -Igenerators -Iinclude -I$H/include
//         bench/cpu_experiments/amx_projection.cpp runtime/amx_tile_state.cpp -L$H/lib64
//         -lHalide -Wl,-rpath,$H/lib64 -lpthread -ldl -o amx_projection     (one command)
//     HL_NUM_THREADS=2 ./amx_projection [outputs per task, a multiple of 16]
//
// bench/RESULTS.md ("AMX") has what it measured and torch's bfloat16 linear beside it.
#include "Halide.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "amx_tile_state.h"
#include "packed_projection.h"

using namespace Halide;

namespace {

constexpr int kTile = 16;   // AMX: 16 rows of 16 float32 sums
constexpr int kTileK = 32;  // bfloat16 features per tdpbf16ps (16 pairs, 64 bytes a row)

struct Shape {
    const char *name;
    int rows, in, out;
};

// out(x, n, t): output t * 16 + x of row n. The weights are read in place from the kernels'
// 3-D view of them, (pair element, output in panel, pair row + pair rows * panel), panels one
// tile wide (layout.h): Halide 21's AMX lowering matches the right-hand tile only as such a
// load whose last coordinate is the pair row plus a base, times a stride that is not a
// constant as wide as a row. (Read from panels of 64 outputs as a 2-D buffer, it stopped with
// "Store to AMX tile allocation of a non-tile value"; copied into tiles each call, or read in
// place from panels of 64 as a 3-D buffer, it ran slower: bench/RESULTS.md.)
Func amx_projection(ImageParam &x, ImageParam &w, int in, int outputs_per_task) {
    const int pair_rows = (in + 1) / 2;
    Var xi("xi"), n("n"), t("t");
    RDom r(0, kTileK, 0, in / kTileK, "r");
    const Expr feature = r.y * kTileK + r.x;
    Func mm("mm");
    mm(xi, n, t) = 0.0f;
    mm(xi, n, t) +=
        cast<float>(x(feature, n)) * cast<float>(w(feature % 2, xi, feature / 2 + t * pair_rows));
    Func out = mm.in();
    Var rxi("rxi"), ryi("ryi"), ixi("ixi"), iyi("iyi"), oxi("oxi"), oyi("oyi"), task("task");
    mm.compute_at(out, xi)
        .store_in(MemoryType::AMXTile)
        .update()
        .tile(xi, n, rxi, ryi, kTile, kTile, TailStrategy::GuardWithIf)
        .reorder({r.x, rxi, ryi, r.y, xi, n, t})
        .atomic()
        .vectorize(r.x)
        .vectorize(rxi)
        .vectorize(ryi);
    mm.compute_at(out, xi).tile(xi, n, ixi, iyi, kTile, kTile).vectorize(ixi).vectorize(iyi);
    // A task takes outputs_per_task outputs (its weights stay in L2) and walks every row.
    out.tile(xi, n, oxi, oyi, kTile, kTile)
        .vectorize(oxi)
        .vectorize(oyi)
        .split(t, task, t, outputs_per_task / kTile)
        .reorder(oxi, oyi, xi, t, n, task)
        .parallel(task);
    return out;
}

}  // namespace

int main(int argc, char **argv) {
    const int outputs_per_task = argc > 1 ? std::atoi(argv[1]) : 128;
    if (!attngen::rt::amx_tile_state_granted()) {
        std::printf("error: no AMX tile state here (CPU, kernel or Linux's grant)\n");
        return 1;
    }
    const Target target = get_host_target().with_feature(Target::AVX512_SapphireRapids);
    const Shape shapes[] = {{"bert-128 qkv", 128, 768, 2304},
                            {"bert-512 qkv", 512, 768, 2304},
                            {"bert-512 out", 512, 768, 768},
                            {"bert-512-b8 qkv", 4096, 768, 2304},
                            {"llama3 prefill q", 512, 4096, 4096}};
    int failures = 0;
    for (const Shape &s : shapes) {
        // The weights' bits are bfloat16's: the pipeline reads them as that type.
        ImageParam x(BFloat(16), 2, "x"), wb(BFloat(16), 3, "wb");
        Func out = amx_projection(x, wb, s.in, outputs_per_task);
        try {
            out.compile_jit(target);
        } catch (const CompileError &e) {
            std::printf("%s: %s\n", s.name, e.what());
            return 1;
        }
        std::vector<float> weights(size_t(s.out) * s.in);
        for (size_t i = 0; i < weights.size(); ++i)
            weights[i] = float(int(i * 7919 % 61) - 30) / 64;
        attngen::rt::PackedProjection packed;
        packed.pack(weights.data(), nullptr, s.out, s.in, ATTNGEN_DEVICE_CPU,
                    ATTNGEN_PRECISION_BF16);
        const auto shape = packed.kernel_shape();
        Buffer<bfloat16_t> w_buf(reinterpret_cast<bfloat16_t *>(packed.weight_bits.data()),
                                 shape[2], shape[1], shape[0]);
        Buffer<bfloat16_t> x_buf(s.in, s.rows);
        for (int n = 0; n < s.rows; ++n)
            for (int f = 0; f < s.in; ++f)
                x_buf(f, n) = bfloat16_t(float((n * 31 + f * 17) % 23 - 11) / 16);
        wb.set(w_buf);
        x.set(x_buf);
        Buffer<float> y(kTile, s.rows, s.out / kTile);
        out.realize(y);
        double worst = 0;
        for (int n = 0; n < s.rows; n += 7) {
            for (int o = 0; o < s.out; o += 5) {
                double sum = 0;
                for (int f = 0; f < s.in; ++f) {
                    sum += double(float(x_buf(f, n))) *
                           double(attngen::rt::from_bfloat16(
                               attngen::rt::to_bfloat16(weights[size_t(o) * s.in + f])));
                }
                worst = std::max(worst, std::fabs(sum - y(o % kTile, n, o / kTile)));
            }
        }
        double best = 1e30;
        for (int i = 0; i < 20; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            out.realize(y);
            best = std::min(
                best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const bool ok = worst <= 1e-3;  // the operands' products are exact in float32
        failures += !ok;
        std::printf("%-18s %5d x %4d x %4d  %7.3f ms  %6.0f GFLOP/s  max error %.2g%s\n", s.name,
                    s.rows, s.in, s.out, best * 1e3, 2.0 * s.rows * s.in * s.out / best / 1e9,
                    worst, ok ? "" : "  WRONG");
    }
    return failures == 0 ? 0 : 1;
}
