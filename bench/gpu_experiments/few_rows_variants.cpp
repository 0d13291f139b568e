// Few-row (matrix-vector) GPU schedule variants of the projection: the reduction split across a
// block's threads by rfactor, each block `columns` output features wide. schedule_few_rows_gpu
// follows gemv_k32_r1 (64 columns): a llama3 key projection (1024 outputs) is then 16 blocks for
// an H200's 132 SMs.
#include <string>

#define ATTNGEN_EXPERIMENT_GENERATOR
#include "experiment_util.h"
using namespace Halide;

struct Variant {
    const char *name;
    int ksplit;
    int rows_tile;
    int columns = 64;
};

int build_variants(const std::string &dir) {
    Variant vs[] = {{"gemv_k8_r1", 8, 1},
                    {"gemv_k16_r1", 16, 1},
                    {"gemv_k16_r2", 16, 2},
                    {"gemv_k32_r1", 32, 1},
                    {"gemv_k16_r4", 16, 4},
                    {"gemv_k64_r1", 64, 1},
                    {"gemv_k64_r1_c32", 64, 1, 32},
                    {"gemv_k128_r1_c32", 128, 1, 32},
                    {"gemv_k64_r1_c16", 64, 1, 16},
                    {"gemv_k128_r1_c16", 128, 1, 16},
                    {"gemv_k256_r1_c16", 256, 1, 16},
                    {"gemv_k128_r1_c8", 128, 1, 8}};
    VariantLibrary library(dir);
    for (const Variant &v : vs) {
        ImageParam x(Float(32), 2, "x"), w(Float(32), 2, "w"), bias(Float(32), 1, "bias");
        Var o("o"), n("n"), f("f"), u("u");
        Expr K = x.dim(0).extent(), rows = x.dim(1).extent();
        Func acc("acc"), out("out"), xc("xc");
        xc(f, n) = x(f, clamp(n, 0, rows - 1));
        RDom r(0, K, "r");
        acc(o, n) = bias(o);
        acc(o, n) += xc(r, n) * w(o, r);
        out(o, n) = acc(o, n);
        RVar ro("ro"), ri("ri");
        Func intm =
            acc.update().split(r, ro, ri, v.ksplit, TailStrategy::GuardWithIf).rfactor(ri, u);
        Var ob("ob"), oi("oi"), ot("ot"), ox("ox"), nb("nb"), ni("ni");
        out.compute_root()
            .split(o, ob, oi, v.columns, TailStrategy::GuardWithIf)
            .split(oi, ot, ox, 4)
            .split(n, nb, ni, v.rows_tile, TailStrategy::GuardWithIf)
            .reorder(ox, ni, ot, ob, nb)
            .gpu_blocks(ob, nb)
            .gpu_threads(ot)
            .unroll(ox)
            .unroll(ni);
        // Storage of a constant size, so that the accumulators stay in registers: sized by the
        // guarded region instead (fewer than 4 outputs in the last block), Halide 21 moved them
        // to a global buffer sized for the out stage's threads alone but indexed by every thread
        // of the block (intm's as well), and the threads' sums overlapped and ran past its end:
        // wrong sums on an H200 (three variants at 8 rows) and heap corruption under PoCL (every
        // variant).
        acc.compute_at(out, ot)
            .bound_storage(o, 4)
            .bound_storage(n, v.rows_tile)
            .unroll(o)
            .unroll(n);
        acc.update().reorder(o, n, ri).unroll(o).unroll(n);
        Var to("to"), tx("tx");
        intm.compute_at(out, ob)
            .bound_extent(n, v.rows_tile)
            .split(o, to, tx, 4, TailStrategy::RoundUp)
            .reorder(tx, n, to, u)
            .gpu_threads(to, u)
            .unroll(tx)
            .unroll(n);
        intm.update()
            .split(o, to, tx, 4, TailStrategy::RoundUp)
            .reorder(tx, n, ro, to, u)
            .gpu_threads(to, u)
            .unroll(tx)
            .unroll(n);
        w.in().compute_at(intm, ro).vectorize(_0).unroll(_1);
        library.add(v.name, x, w, bias, out, false);
    }
    return 0;
}
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    return run_reporting_errors([&] { return build_variants(argv[1]); });
}
