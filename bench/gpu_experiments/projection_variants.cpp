// GPU schedule variants of result(o, n) = bias(o) + sum_f x(f, n) w(o, f), AOT-compiled for
// CUDA into OUT_DIR with a header listing them (variants.h) for product_runner.cpp. What
// schedule_projection_gpu adopted came from these (bench/RESULTS.md, "CUDA on an H100, second").
#include <string>

#define ATTNGEN_EXPERIMENT_GENERATOR
#include "experiment_util.h"
using namespace Halide;

struct Variant {
    const char *name;
    int to, tn, bo, bn, ru, xvec, wvec, splitk;
};

int build_variants(const std::string &dir) {
    // "lib": as schedule_projection_gpu builds them (16-byte weight loads, inputs read one
    // float at a time since the library's inputs are not known to be aligned, reduction
    // unrolled by 4); smaller thread tiles and split reductions give short products more threads.
    // Larger thread tiles (4 x 8, 8 x 4, 8 x 8) load fewer operands per FMA; "wide" also reads
    // inputs 16 bytes at a time, as Halide's apps/cuda_mat_mul does.
    Variant vs[] = {
        {"lib_4x4_16x8", 4, 4, 16, 8, 4, 0, 1, 1},   {"lib_4x2_16x8", 4, 2, 16, 8, 4, 0, 1, 1},
        {"lib_4x8_16x8", 4, 8, 16, 8, 4, 0, 1, 1},   {"lib_4x8_16x4", 4, 8, 16, 4, 4, 0, 1, 1},
        {"lib_4x8_16x2", 4, 8, 16, 2, 4, 0, 1, 1},   {"lib_4x8_16x4_u8", 4, 8, 16, 4, 8, 0, 1, 1},
        {"lib_8x4_8x16", 8, 4, 8, 16, 4, 0, 1, 1},   {"lib_8x4_8x8", 8, 4, 8, 8, 4, 0, 1, 1},
        {"lib_8x8_8x8", 8, 8, 8, 8, 4, 0, 1, 1},     {"lib_8x8_8x4", 8, 8, 8, 4, 4, 0, 1, 1},
        {"lib_4x16_16x4", 4, 16, 16, 4, 4, 0, 1, 1}, {"wide_4x4_16x8", 4, 4, 16, 8, 4, 1, 1, 1},
        {"wide_4x8_16x2", 4, 8, 16, 2, 8, 1, 1, 1},  {"wide_4x8_16x4", 4, 8, 16, 4, 4, 1, 1, 1},
        {"wide_8x8_8x8", 8, 8, 8, 8, 4, 1, 1, 1},
    };
    VariantLibrary library(dir);
    for (const Variant &v : vs) {
        ImageParam x(Float(32), 2, "x"), w(Float(32), 2, "w"), bias(Float(32), 1, "bias");
        Var o("o"), n("n"), f("f"), k("k");
        Expr K = x.dim(0).extent(), rows = x.dim(1).extent();
        Func acc("acc"), out("out"), xc("xc"), part("part");
        xc(f, n) = x(f, clamp(n, 0, rows - 1));
        Expr chunk = (K + v.splitk - 1) / v.splitk;
        RDom r(0, chunk, "r");
        Expr feature = k * chunk + r;
        Func T;
        if (v.splitk == 1) {
            acc(o, n) = bias(o);
            acc(o, n) += xc(r, n) * w(o, r);
            out(o, n) = acc(o, n);
            T = out;
        } else {
            Expr fc = min(feature, K - 1);
            acc(o, n, k) = 0.0f;
            acc(o, n, k) += select(feature < K, xc(fc, n) * w(o, fc), 0.0f);
            part(o, n, k) = acc(o, n, k);
            RDom s(0, v.splitk);
            out(o, n) = bias(o) + sum(part(o, n, s));
            T = part;
            Var oo, ooi;
            out.compute_root()
                .split(o, oo, ooi, 64, TailStrategy::GuardWithIf)
                .gpu_blocks(oo, n)
                .gpu_threads(ooi);
            part.bound(k, 0, v.splitk);
        }
        Var ob, nb, oi, ni, ot, nt, ox, nx;
        T.compute_root()
            .tile(o, n, ob, nb, oi, ni, v.to * v.bo, v.tn * v.bn,
                  v.splitk == 1 ? TailStrategy::GuardWithIf : TailStrategy::RoundUp)
            .tile(oi, ni, ot, nt, ox, nx, v.to, v.tn)
            .unroll(ox)
            .unroll(nx);
        if (v.splitk == 1)
            T.reorder(ox, nx, ot, nt, ob, nb).gpu_blocks(ob, nb);
        else
            T.reorder(ox, nx, ot, nt, ob, nb, k).gpu_blocks(ob, nb, k);
        T.gpu_threads(ot, nt);
        Var ao, ai, ano, ani;
        acc.compute_at(T, ot)
            .bound_storage(o, v.to)
            .bound_storage(n, v.tn)
            .split(o, ao, ai, v.to, TailStrategy::RoundUp)
            .split(n, ano, ani, v.tn, TailStrategy::RoundUp)
            .unroll(ai)
            .unroll(ani);
        RVar ro("ro"), ri("ri");
        acc.update()
            .split(o, ao, ai, v.to, TailStrategy::RoundUp)
            .split(n, ano, ani, v.tn, TailStrategy::RoundUp)
            .split(r, ro, ri, v.ru, TailStrategy::GuardWithIf)
            .reorder(ai, ani, ri, ro, ao, ano)
            .unroll(ai)
            .unroll(ani)
            .unroll(ri);
        if (v.wvec) w.in().compute_at(acc, ri).vectorize(_0).unroll(_1);
        if (v.xvec && v.splitk == 1)
            xc.compute_at(acc, ro).bound_extent(f, v.ru).vectorize(f).unroll(n);
        library.add(v.name, x, w, bias, out, true);
    }
    return 0;
}
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    return run_reporting_errors([&] { return build_variants(argv[1]); });
}
