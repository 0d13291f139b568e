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

// A thread's to x tn accumulators of f (computed at the thread), in registers: the reduction r
// runs outside the tile, split into ro and ri (unrolled, ru steps). With vector_o the outputs
// are one vector, so that weights dense along them are one wide load.
void register_tile(Func f, const Var &o, const Var &n, const RVar &r, const RVar &ro,
                   const RVar &ri, int to, int tn, int ru, bool vector_o) {
    Var oo("oo"), oi("oi"), no("no"), ni("ni");
    const auto tile_o = [&](Stage s) { vector_o ? s.vectorize(oi) : s.unroll(oi); };
    f.bound_storage(o, to).bound_storage(n, tn);
    Stage pure = f;
    pure.split(o, oo, oi, to, TailStrategy::RoundUp)
        .split(n, no, ni, tn, TailStrategy::RoundUp)
        .unroll(ni);
    tile_o(pure);
    Stage update = f.update();
    update.split(o, oo, oi, to, TailStrategy::RoundUp)
        .split(n, no, ni, tn, TailStrategy::RoundUp)
        .split(r, ro, ri, ru, TailStrategy::GuardWithIf)
        .reorder(oi, ni, ri, ro, oo, no)
        .unroll(ni)
        .unroll(ri);
    tile_o(update);
}

// Operands staged in shared memory, as SGEMM kernels do: per chunk of kc input features, the
// block's bn * tn rows of inputs and bo * to outputs' weights are copied into shared memory by
// all threads (one 16-byte global load per thread and row of weights), then each thread sums
// the chunk's products for its to x tn tile in registers (one 16-byte shared load of weights,
// and of inputs where the inputs are stored rows innermost, x_rows_inner) and adds them into
// the block's accumulators, which live in shared memory across the chunks (a Func computed at
// the block with thread loops inside it cannot keep them in registers in Halide 21).
struct StagedVariant {
    const char *name;
    int to, tn, bo, bn, kc;
    bool x_rows_inner;
};

void add_staged_variant(VariantLibrary &library, const StagedVariant &v) {
    ImageParam x(Float(32), 2, "x"), w(Float(32), 2, "w"), bias(Float(32), 1, "bias");
    Var o("o"), n("n"), f("f"), kb("kb");
    Expr K = x.dim(0).extent(), rows = x.dim(1).extent();
    Expr padded = w.dim(0).extent(), bias_extent = bias.dim(0).extent();
    Func xz("xz"), wz("wz"), part("part"), acc("acc"), out("out");
    // Zero past the last input feature, so that the chunk loop needs no guard.
    xz(f, n) = select(f < K, x(min(f, K - 1), clamp(n, 0, rows - 1)), 0.0f);
    wz(o, f) = select(f < K, w(min(o, padded - 1), min(f, K - 1)), 0.0f);
    RDom rk(0, v.kc, "rk");
    part(o, n, kb) = 0.0f;
    part(o, n, kb) += xz(kb * v.kc + rk, n) * wz(o, kb * v.kc + rk);
    RDom rb(0, (K + v.kc - 1) / v.kc, "rb");
    acc(o, n) = bias(min(o, bias_extent - 1));
    acc(o, n) += part(o, n, rb);
    out(o, n) = acc(o, n);

    const int block_o = v.to * v.bo, block_n = v.tn * v.bn;
    Var ob("ob"), nb("nb"), oi("oi"), ni("ni"), ot("ot"), nt("nt"), ox("ox"), nx("nx");
    out.compute_root()
        .tile(o, n, ob, nb, oi, ni, block_o, block_n, TailStrategy::GuardWithIf)
        .tile(oi, ni, ot, nt, ox, nx, v.to, v.tn)
        .reorder(ox, nx, ot, nt, ob, nb)
        .gpu_blocks(ob, nb)
        .gpu_threads(ot, nt)
        .unroll(ox)
        .unroll(nx);
    Var at("at"), ax("ax"), an("an"), anx("anx"), ut("ut"), ux("ux"), un("un"), unx("unx");
    acc.compute_at(out, ob)
        .bound_extent(o, block_o)
        .bound_extent(n, block_n)
        .split(o, at, ax, v.to)
        .split(n, an, anx, v.tn)
        .reorder(ax, anx, at, an)
        .gpu_threads(at, an)
        .unroll(ax)
        .unroll(anx);
    acc.update()
        .split(o, ut, ux, v.to)
        .split(n, un, unx, v.tn)
        .reorder(ux, unx, ut, un, rb)
        .gpu_threads(ut, un)
        .unroll(ux)
        .unroll(unx);
    RVar rko("rko"), rki("rki");
    part.compute_at(acc, ut);
    register_tile(part, o, n, rk, rko, rki, v.to, v.tn, 4, true);
    const LoopLevel chunk(acc, rb);
    // The chunk's weights: a thread's `to` outputs in wide loads, bo threads along the outputs.
    Var wo("wo"), wv("wv"), wf("wf"), wfi("wfi");
    wz.compute_at(chunk)
        .bound_extent(f, v.kc)
        .split(o, wo, wv, v.to)
        .split(f, wf, wfi, v.bn)
        .reorder(wv, wo, wfi, wf)
        .vectorize(wv)
        .gpu_threads(wo, wfi);
    wz.in(part).compute_at(part, rki).vectorize(o);
    // The chunk's inputs: bo threads along the features (coalesced reads), bn along the rows.
    Var xf("xf"), xfi("xfi"), xn("xn"), xni("xni");
    xz.compute_at(chunk)
        .bound_extent(f, v.kc)
        .split(f, xf, xfi, v.bo)
        .split(n, xn, xni, v.bn)
        .reorder(xfi, xni, xf, xn)
        .gpu_threads(xfi, xni);
    if (v.x_rows_inner) {
        // Rows innermost, so that a thread's 4 rows are one 16-byte load; each feature's rows
        // padded by 4 floats, which keeps those loads aligned and makes a warp's stores (16
        // features x 2 rows, bank 4 f + n) 2-way bank conflicts instead of 16-way.
        xz.reorder_storage(n, f).bound_storage(n, block_n + 4);
        xz.in(part).compute_at(part, rki).vectorize(n);
    }
    library.add(v.name, x, w, bias, out, true);
}

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
        RVar ro("ro"), ri("ri");
        acc.compute_at(T, ot);
        register_tile(acc, o, n, r, ro, ri, v.to, v.tn, v.ru, false);
        if (v.wvec) w.in().compute_at(acc, ri).vectorize(_0).unroll(_1);
        if (v.xvec && v.splitk == 1)
            xc.compute_at(acc, ro).bound_extent(f, v.ru).vectorize(f).unroll(n);
        library.add(v.name, x, w, bias, out, true);
    }
    const StagedVariant staged[] = {
        {"smem_4x4_16x16_k16", 4, 4, 16, 16, 16, false},
        {"smem_4x4_16x16_k16_xv", 4, 4, 16, 16, 16, true},
        {"smem_4x4_16x16_k32_xv", 4, 4, 16, 16, 32, true},
        {"smem_8x4_16x16_k16_xv", 8, 4, 16, 16, 16, true},
        {"smem_4x8_16x8_k16_xv", 4, 8, 16, 8, 16, true},
        {"smem_8x8_16x8_k16_xv", 8, 8, 16, 8, 16, true},
        {"smem_8x4_16x8_k32_xv", 8, 4, 16, 8, 32, true},
    };
    for (const StagedVariant &v : staged) add_staged_variant(library, v);
    return 0;
}
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    return run_reporting_errors([&] { return build_variants(argv[1]); });
}
