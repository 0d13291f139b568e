// The CPU schedules' knobs (schedule_cpu.h) and what their schedules share (schedule_cpu_tiles.h);
// the schedules themselves are in schedule_cpu_projection.cpp, schedule_cpu_attention.cpp and
// schedule_cpu_decode.cpp.
#include "schedule_cpu.h"

#include <numeric>
#include <utility>
#include <vector>

#include "layout.h"
#include "schedule_cpu_tiles.h"

namespace attngen {

using namespace Halide;

int vector_width(const Target &target) {
    return target.natural_vector_size<float>();
}

bool wide_register_file(const Target &target) {
    return target.arch == Target::ARM ||
           target.features_any_of({Target::AVX512, Target::AVX512_KNL, Target::AVX512_Skylake,
                                   Target::AVX512_Cannonlake, Target::AVX512_Zen4,
                                   Target::AVX512_Zen5, Target::AVX512_SapphireRapids});
}

int vector_registers(const Target &target) {
    return wide_register_file(target) ? 32 : 16;
}

bool tile_spans_panel(int vectors, const Target &target) {
    return vectors * vector_width(target) >= kWeightPadding;
}

bool tile_fits(int vectors, int rows, const Target &target) {
    return vectors * rows + vectors + 1 <= vector_registers(target);
}

Expr ceil_div(const Expr &a, const Expr &b) {
    return (a + b - 1) / b;
}

void schedule_transpose(Func f, Func source, const Var &x, const Var &y, const Expr &y_extent,
                        int vec, TailStrategy x_tail, const Expr &specialize_on) {
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    const auto tile = [&](Stage s, TailStrategy y_tail) {
        s.split(x, xo, xi, vec, x_tail)
            .split(y, yo, yi, vec, y_tail)
            .reorder(xi, yi, xo, yo)
            .vectorize(xi)
            .unroll(yi);
    };
    tile(f.specialize(y_extent >= vec), TailStrategy::ShiftInwards);
    tile(f, TailStrategy::GuardWithIf);
    const std::vector<Var> s = source.args();
    // A constant-size tile lives on the stack: sized by the (guarded) tile instead, it was a
    // heap block per tile, and its free alone was 3% of attngen_sdpa at bert-128 (perf).
    Func staged = source.in(f);
    staged.compute_at(f, xo).bound_storage(s[0], vec).bound_storage(s[1], vec);
    staged.vectorize(s[0], vec, TailStrategy::GuardWithIf);
    // The rows unrolled, but not those of a general source that a specialization simplifies
    // (a rotation: unrolled, it was most of the forward's code).
    Stage rows = specialize_on.defined() ? staged.specialize(specialize_on) : Stage(staged);
    rows.unroll(s[1], vec, TailStrategy::GuardWithIf);
}

void order_tile_update(Stage update, const Var &lanes, const Var &vectors, const Var &rows,
                       const TileReduction &reduction) {
    std::vector<VarOrRVar> order = {lanes, vectors, rows};
    if (reduction.dot_product) {
        // Each accumulator lane adds the products of a pair: the pair and the columns make one
        // vector of 2 x vec products reduced into vec lanes, which Halide emits as vdpbf16ps
        // (twice the multiply-adds of an FMA per instruction).
        order.insert(order.begin(), *reduction.pair);
    } else if (reduction.pair) {
        order.push_back(*reduction.pair);
    }
    order.insert(order.end(), reduction.steps.begin(), reduction.steps.end());
    update.reorder(order);
    if (reduction.dot_product) {
        update.atomic().vectorize(*reduction.pair).vectorize(lanes);
    } else {
        update.vectorize(lanes);
        if (reduction.pair) update.unroll(*reduction.pair);
    }
    update.unroll(vectors).unroll(rows);
}

void schedule_register_tile_into(Func acc, Func tile, const LoopLevel &at, const Var &columns,
                                 const Var &rows, const Var &tile_columns, const Var &tile_rows,
                                 const TileReduction &reduction, int vectors, int rows_per_tile,
                                 int vec, const std::vector<TileShape> &shapes,
                                 const std::vector<Expr> &when, TileCopy copy) {
    Var co("co"), ci("ci"), ro("ro"), ri("ri"), cv("cv"), cl("cl");
    const auto tile_stage = [&](Stage s, int vectors, int rows_per_tile) {
        s.tile(tile_columns, tile_rows, co, ro, ci, ri, vectors * vec, rows_per_tile,
               TailStrategy::RoundUp)
            .reorder(ci, ri, co, ro)
            .split(ci, cv, cl, vec)
            .vectorize(cl);
        if (copy == TileCopy::Unrolled) s.unroll(cv).unroll(ri);
    };
    tile.compute_at(at);
    for (const TileShape &t : shapes) tile_stage(tile.specialize(t.when), t.vectors, t.rows);
    tile_stage(tile, vectors, rows_per_tile);
    for (const Expr &w : when) tile.specialize(w);
    // Unrolled tiles (TileCopy) compute their first term unrolled too: a float32 product, or
    // the zeros that the first pair's update adds to.
    acc.compute_at(tile, co).split(columns, cv, cl, vec).vectorize(cl).unroll(rows);
    if (copy == TileCopy::Unrolled) acc.unroll(cv);
    // With several shapes, each specialization's tile is a constant of its own.
    if (shapes.empty()) acc.bound_extent(columns, vectors * vec).bound_extent(rows, rows_per_tile);
    int update = 0;
    if (reduction.first_pair) {
        TileReduction first = reduction;
        first.steps.clear();
        first.pair = reduction.first_pair;
        first.first_pair.reset();
        order_tile_update(acc.update(update++).split(columns, cv, cl, vec), cl, cv, rows, first);
    }
    order_tile_update(acc.update(update).split(columns, cv, cl, vec), cl, cv, rows, reduction);
}

void schedule_register_tile_at(Func acc, const LoopLevel &at, const Var &columns, const Var &rows,
                               const TileReduction &reduction, int vectors, int rows_per_tile,
                               int vec, const std::vector<TileShape> &shapes,
                               const std::vector<Expr> &when, TileCopy copy) {
    schedule_register_tile_into(acc, acc.in(), at, columns, rows, columns, rows, reduction, vectors,
                                rows_per_tile, vec, shapes, when, copy);
}

void schedule_amx_product(Func out, Func tiles, const RDom &r, const LoopLevel &at) {
    std::vector<Var> args = out.args();
    std::swap(args[1], args[2]);  // (x, t, y, ...)
    const Var &x = args[0], &y = args[2];
    Var ox("ox"), oy("oy"), ix("ix"), iy("iy"), ux("ux"), uy("uy");
    out.compute_at(at).reorder_storage(args).tile(x, y, ox, oy, kAmxTile, kAmxTile,
                                                  TailStrategy::RoundUp);
    std::vector<VarOrRVar> loops = {ox, oy};
    loops.insert(loops.end(), args.begin(), args.end());
    out.reorder(loops).vectorize(ox).vectorize(oy);
    tiles.compute_at(out, x)
        .store_in(MemoryType::AMXTile)
        .tile(x, y, ix, iy, kAmxTile, kAmxTile)
        .vectorize(ix)
        .vectorize(iy);
    std::vector<VarOrRVar> steps = {r.x, ux, uy, r.y};
    for (const Var &v : tiles.args()) steps.push_back(v);
    tiles.update()
        .tile(x, y, ux, uy, kAmxTile, kAmxTile, TailStrategy::GuardWithIf)
        .reorder(steps)
        .atomic()
        .vectorize(r.x)
        .vectorize(ux)
        .vectorize(uy);
}

bool has_bfloat16_dot_product(const Target &t) {
    return (t.has_feature(Target::AVX512_Zen4) || t.has_feature(Target::AVX512_Zen5)) &&
           !uses_amx(t);
}

bool uses_amx(const Target &t) {
    return t.has_feature(Target::AVX512_SapphireRapids);
}

CpuScheduleKnobs resolve_cpu_knobs(CpuScheduleKnobs k, const Target &target) {
    // Register tiles sized to the register file: AArch64 (NEON) and AVX-512 have 32 vector
    // registers, AVX2 and SSE 16. A tile of V vectors by R rows keeps V*R accumulators plus V
    // weight vectors and one broadcast live, so 2 x 6 (12 + 3) fits 16 registers and 4 x 6 or
    // 2 x 12 (24 + 5, 24 + 3) fits 32. NEON vectors are 4 floats, so it takes 4 of them to
    // cover the same 16 output features as 2 AVX2 vectors.
    const bool wide_registers = wide_register_file(target);
    const bool narrow_vectors = vector_width(target) <= 4;
    // One set of knobs serves every dispatch variant of a build (a tuned file, or the tuner's
    // candidate, is passed to the multi-target generator once), so a tile tuned for 32
    // registers reaches the AVX2 and SSE4.1 variants too. There it spills: 4 x 4 projection
    // tiles (21 registers) ran the AVX2 variant's projection at 32% of its peak against 65% on
    // AVX-512 (issue 18). A tile that does not fit the target's registers takes the derived
    // size of that target instead.
    const auto pick = [](int knob, int fallback) { return knob > 0 ? knob : fallback; };
    const auto fit_tile = [&](int &vectors, int &rows, int derived_vectors, int derived_rows) {
        const int v = pick(vectors, derived_vectors), r = pick(rows, derived_rows);
        const bool keep = tile_fits(v, r, target);
        vectors = keep ? v : derived_vectors;
        rows = keep ? r : derived_rows;
    };
    // SSE4.1 (16 registers of 4 floats, no FMA) takes 4 x 2: each input broadcast there is a
    // load and a shuffle on the FP pipes, and a wider, shorter tile needs fewer of them per
    // multiply-add (2 per 8 against 6 per 12 for 2 x 6). ATTNGEN_CPU_DISPATCH=sse41, Zen 4, 2
    // threads, scripts/ab_runs.py, 5 rounds, 2 x 6 / 4 x 2 time: projection/bert-512 1.08x,
    // bert-128 1.04x; mha_forward/ bert-128 1.07x, bert-512 1.02x, gpt2-causal 1.06x, tutorial
    // 1.03x; mha_forward_bf16/bert-512 1.09x; decode/llama3-8b-prefill 1.03x (the tuner had
    // found the same within its noise: bench/RESULTS.md, 2026-11-28).
    const int derived_gemm_rows =
        wide_registers ? (narrow_vectors ? 6 : 12) : (narrow_vectors ? 2 : 6);
    fit_tile(k.gemm_vectors, k.gemm_rows, narrow_vectors ? 4 : 2, derived_gemm_rows);
    k.gemm_row_tiles = pick(k.gemm_row_tiles, 4);
    // A register tile narrower than a weight panel leaves the rest of the panel to the next
    // tiles of the same rows, which read the block of weights again: blocks of 64 features keep
    // a panel's block (16 KiB) in L1 for them. projection/bert-512, AVX2 variant, 2 threads,
    // Zen 4: 0.79 -> 0.86 of the FMA peak with the panel-wide accumulator (256-feature blocks:
    // level).
    // On AVX2, blocks of 512 features instead, where the reduction is longer than
    // kShortReductionFeatures (schedule_projection_cpu), float32 only. Paired calls
    // (scripts/paired_ab.py, 20 pairs in 4 sessions, 2 threads, Zen 3, this rule against
    // blocks of 64), old/new time: mha_forward/ llama3-8b-prefill 1.08x, bert-512-b8 1.06x,
    // gpt2-causal and long-causal 1.05x, bert-512 1.04x, long-single 1.01x; tutorial,
    // tutorial-cross, bert-128, gpt2-decode, bfloat16 and the baseline variant level. Blocks of
    // 512 at every length lost at the tutorial shapes (512 features, 0.90-0.91x; at 128 still
    // 0.93-0.96x); 256 gained less than 512 (0.98-0.99x of it), 1024 the same as 512, and 32
    // lost everywhere (0.86-0.93x). Not measured on SSE or NEON, which keep 64.
    const bool narrow_tile = !tile_spans_panel(k.gemm_vectors, target);
    const int narrow_block =
        target.has_feature(Target::AVX2) ? kAvx2LongReductionBlock : kShortReductionBlock;
    k.gemm_k_block = pick(k.gemm_k_block, narrow_tile ? narrow_block : 256);
    // Attention tiles of 2 vectors by 6 rows where the file has 16 registers (12 accumulators
    // and 3 operands), as the projection's: 2 x 4 tiles did 8 multiply-adds per 6 loads.
    const int narrow_file_rows = wide_registers ? 4 : 6;
    fit_tile(k.score_vectors, k.score_rows, wide_registers && narrow_vectors ? 4 : 2,
             narrow_file_rows);
    fit_tile(k.out_vectors, k.out_rows, wide_registers && narrow_vectors ? 4 : 2, narrow_file_rows);
    // Query blocks are whole tiles of rows, rounded up: a block of 16 rows took tiles of 6, 6
    // and 4. sdpa/<shape>, AVX2 variant (2 x 6 tiles, blocks of 18 and 132 rows against 2 x 4
    // tiles, 16 and 128), 2 threads, Zen 4, scripts/ab_runs.py, 3 rounds: bert-512, bert-512-b8,
    // gpt2-causal, long-causal 1.04-1.05x, long-single 1.03x, bert-128 0.96x; mha_forward/
    // 0.99-1.03x. Blocks of 24 rows: 1.02-1.03x, long-single 0.99x.
    const int tile_rows = std::lcm(k.score_rows, k.out_rows);
    const auto whole_tiles = [&](int rows) {
        return (rows + tile_rows - 1) / tile_rows * tile_rows;
    };
    k.query_block = whole_tiles(pick(k.query_block, 32));
    k.key_block = pick(k.key_block, 128);
    k.long_query_block = whole_tiles(pick(k.long_query_block, 128));
    // 256 keys of a 128-wide head are 128 KiB of keys and values per split: a split's K and V
    // stay in L2 while its rows are computed, and a cache of 4096 gives 16 splits per head.
    // The x86 tuned file takes 512 (256 KiB, half a Zen 3's L2): fewer, longer tasks, decode/
    // 1.02-1.05x and decode_bf16/long-decode 1.13x on a Zen 4 (its `edited` note).
    k.decode_split_keys = pick(k.decode_split_keys, 256);
    return k;
}

}  // namespace attngen
