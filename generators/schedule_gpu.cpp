#include "schedule_gpu.h"

#include "layout.h"

namespace attngen {

using namespace Halide;

namespace {

// Value features handled by one thread's column of the attention output (the rest of the head
// is a serial loop around the threads): 16 x query_block threads per block.
constexpr int kFeatureThreads = 16;

// A projection thread's register tiles are 4 output features wide (one float4 weight load per
// step): by 4 rows on the staged path (16 FMAs for two 16-byte shared loads), by kShortRowTile
// on the short path.
constexpr int kProjectionThreadTile = 4;
// Reduction steps per unrolled projection loop iteration.
constexpr int kProjectionUnroll = 4;

// Projections of at most kShortOutputs outputs (rows x output features; and more than kFewRows
// rows) take tiles of kShortRowTile rows in blocks of kShortBlockRows (schedule_projection_gpu);
// larger ones the staged path, kStagedChunk input features per step (schedule_staged_projection).
// Measured on either side of the limit only (bench/RESULTS.md): 2^18.6 outputs (bert-512) and
// 2^21 (512 x 4096); where between them the paths cross is not known.
constexpr int64_t kShortOutputs = int64_t(1) << 20;
constexpr int kStagedChunk = 32;
constexpr int kShortRowTile = 2;
constexpr int kShortBlockRows = 16;

// Projections of at most kFewRows rows take the few-rows path (schedule_few_rows_gpu), whose
// threads split each output's reduction gpu_few_rows_split ways (resolve_gpu_knobs).
constexpr int kFewRows = 8;
// The threads of a CUDA block.
constexpr int kMaxBlockThreads = 1024;

// The flash kernel's score tiles: reduction steps per unrolled loop iteration.
constexpr int kFlashScoreUnroll = 4;

// Score threads keep a 4 keys x 4 queries register tile for the same reason.
constexpr int kScoreThreadTile = 4;
constexpr int kScoreBlockKeys = 64, kScoreBlockQueries = 32;

// Rows i of f(x, i, h, b) in blocks of `rows` queries, one GPU block per (row block, head,
// batch item). x is spread over `x_threads` threads with the rest of it a serial loop in the
// block. Returns the block's row variable, where per-block stages are computed.
Var gpu_query_blocks(Func f, const Var &x, const Var &i, const Var &h, const Var &b, int rows,
                     int x_threads) {
    Var io("io"), ii("ii"), xo("xo"), xi("xi");
    f.compute_root()
        .split(i, io, ii, rows, kGpuExact)
        .split(x, xo, xi, x_threads, kGpuExact)
        .reorder(xi, ii, xo, io, h, b)
        .gpu_blocks(io, h, b)
        .gpu_threads(xi, ii);
    return io;
}

// A thread's x_tile x y_tile accumulators of f, a reduction computed at the thread: kept in
// registers, with the reduction loops outside them. The producer's tile is exact at the edges
// (GuardWithIf), so its extent here is only bounded by tile: splitting with RoundUp gives the
// constant loop extent unrolling needs, and bound_storage the constant size registers need. Reads
// past the edge are safe because every such stage reads padded weights and clamped rows.
// reduction[0] (innermost) is unrolled by `unrolled` steps: the loads of consecutive steps are
// then independent, and ptxas schedules them ahead of the FMAs that use them. With vector_x, x
// is a vector instead of unrolled, so that an operand dense along x is one wide load.
void register_tile_stages(Stage pure, Stage update, const Var &x, const Var &y,
                          const std::vector<RVar> &reduction, int x_tile, int y_tile, int unrolled,
                          bool vector_x = false) {
    Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
    const auto tile_x = [&](Stage s) { vector_x ? s.vectorize(xi) : s.unroll(xi); };
    pure.split(x, xo, xi, x_tile, TailStrategy::RoundUp)
        .split(y, yo, yi, y_tile, TailStrategy::RoundUp)
        .unroll(yi);
    tile_x(pure);
    std::vector<VarOrRVar> order = {xi, yi};
    if (unrolled > 1) {
        RVar ro(reduction[0].name() + "_o"), ri(reduction[0].name() + "_i");
        update.split(reduction[0], ro, ri, unrolled, TailStrategy::GuardWithIf).unroll(ri);
        order.push_back(ri);
        order.push_back(ro);
    } else {
        order.push_back(reduction[0]);
    }
    order.insert(order.end(), reduction.begin() + 1, reduction.end());
    order.push_back(xo);
    order.push_back(yo);
    update.split(x, xo, xi, x_tile, TailStrategy::RoundUp)
        .split(y, yo, yi, y_tile, TailStrategy::RoundUp)
        .reorder(order)
        .unroll(yi);
    tile_x(update);
}

void register_tile(Func f, const Var &x, const Var &y, const std::vector<RVar> &reduction,
                   int x_tile, int y_tile, int unrolled = 1, bool vector_x = false) {
    f.bound_storage(x, x_tile).bound_storage(y, y_tile);
    register_tile_stages(f, f.update(), x, y, reduction, x_tile, y_tile, unrolled, vector_x);
}

// A projection's blocks of kWeightPadding features x `rows` rows, each thread a
// kProjectionThreadTile x row_tile tile of them (its accumulators: register_tile_stages). The
// loops are named after the path, `path`ob and so on: Halide places a Func computed at a loop in
// every specialization that has a loop of that name, used there or not, so the paths' loops are
// kept apart. With shared names, every projection kernel held every path's buffers and threads
// (skipped at run time): the short path's 128 threads ran in blocks of 512, with 41 KiB of shared
// memory it did not use.
void tile_projection_result(Stage result, const ProjectionStage &p, int rows, int row_tile,
                            const std::string &path) {
    Var ob(path + "ob"), nb(path + "nb"), oi(path + "oi"), ni(path + "ni"), ot(path + "ot"),
        nt(path + "nt"), ox(path + "ox"), nx(path + "nx");
    result.tile(p.o, p.n, ob, nb, oi, ni, kWeightPadding, rows, kGpuExact)
        .tile(oi, ni, ot, nt, ox, nx, kProjectionThreadTile, row_tile)
        .reorder(ox, nx, ot, nt, ob, nb)
        .gpu_blocks(ob, nb)
        .gpu_threads(ot, nt)
        .unroll(ox)
        .unroll(nx);
}

// Few rows (decoding's matrix-vector products): a block per gpu_few_rows_columns output
// features (64 by default) and row, whose gpu_few_rows_split (32) x columns / 4 threads each sum
// every split-th input feature for 4 outputs (one 16-byte weight load per feature), in
// registers; columns / 4 threads then add up the split's partial sums from shared memory. With
// the many-row tiles instead, a 1-row product kept 1 of each thread's 4 rows and 16 threads per
// block busy. Measured on an H100 in a stand-alone kernel of the same product (4096 x 4096
// weights, 1 row): 0.064 ms, 1.05 TB/s of weights (split 32; 16: 0.113 ms, 8: 0.214 ms). On an
// H200 a split of 64 over blocks 32 features wide read one row's llama3 weights 1.36-1.41x
// faster, 10% slower at GPT-2's width. Both stand-alone kernels' final sums went through a
// global buffer, which this schedule's do not (bench/gpu_experiments/few_rows_variants.cpp;
// bench/RESULTS.md, 2026-11-28), so the knobs are there for a build to time the splits in the
// library (ATTNGEN_GPU_SCHEDULE_PARAMS).
void schedule_few_rows_gpu(ProjectionStage &p, const GpuScheduleKnobs &knobs) {
    const int tile = kProjectionThreadTile;
    const int columns = knobs.gpu_few_rows_columns;
    Var ob("few_ob"), oi("few_oi"), ot("few_ot"), ox("few_ox"), to("to"), tx("tx");
    Stage few = p.result.specialize(p.rows <= p.few_rows);
    few.split(p.o, ob, oi, columns, kGpuExact)
        .split(oi, ot, ox, tile)
        .reorder(ox, ot, ob, p.n)
        .gpu_blocks(ob, p.n)
        .gpu_threads(ot)
        .unroll(ox);
    p.few_rows_sum.compute_at(p.result, ot).bound_storage(p.o, tile).unroll(p.o);
    p.few_rows_sum.update().unroll(p.o);
    // Each block's partial sums cover exactly its columns: left to bounds inference, the
    // weights' required region came out near twice the features (an H100 run refused gpt2's
    // 768 against 832 padded: "accessed at 1471").
    p.split_acc.compute_at(p.result, ob)
        .bound_extent(p.o, columns)
        .split(p.o, to, tx, tile, TailStrategy::RoundUp)
        .reorder(tx, to, p.u)
        .gpu_threads(to, p.u)
        .unroll(tx);
    p.split_acc.update()
        .split(p.o, to, tx, tile, TailStrategy::RoundUp)
        .reorder(tx, p.r_split.x, p.r_split.y, p.n, to, p.u)
        .gpu_threads(to, p.u)
        .unroll(tx);
    const std::vector<Var> w = p.weights.args();  // (column, row)
    p.weights.in(p.split_acc).compute_at(p.split_acc, p.r_split.x).vectorize(w[0]).unroll(w[1]);
}

// Many outputs (the staged path): per chunk of p.staged_chunk input features, a block's threads
// copy its `rows` rows of inputs and kWeightPadding outputs' weights into shared memory, then
// each thread sums the chunk's products for its 4 x 4 tile in registers, from one 16-byte
// shared load of weights and one of inputs per step, and adds them into the block's
// accumulators. Those stay in shared memory across the chunks: a Func computed at the block
// with thread loops inside it cannot keep them in registers. The L1 path this replaced read
// both operands through the cache per step, 4 inputs one float at a time. Stand-alone on an
// H200, against that schedule (bench/gpu_experiments/projection_runner, bench/RESULTS.md), by
// rows x input x output features: 4096 x 768 x 768 0.272 -> 0.209 ms, 8192 x 768 x 768 0.496
// -> 0.413, 512 x 4096 x 4096 0.918 -> 0.751 (torch F.linear, cuBLAS, in the same call: 0.136,
// 0.234, 0.366); chunks of 16 6-7% slower; at chunks of 16, 4 x 8 and 8 x 4 thread tiles
// 1.08-1.19x and 1.58-1.59x slower than 4 x 4. In the library (an H200, 2026-11-28, against
// the L1 path's last run there, another day): mha_forward_device/bert-512-b8 2.86 -> 2.33 ms,
// long-causal 3.19 -> 2.77, long-self-32k 576 -> 505, with the flash kernel's wide key loads
// landed in between. It loses to the short path's 4 x 2 tiles at bert-512 (0.062 against 0.058
// ms).
void schedule_staged_projection(ProjectionStage &p, int rows) {
    const int tile = kProjectionThreadTile;
    const int o_threads = kWeightPadding / tile, n_threads = rows / tile;
    tile_projection_result(p.result, p, rows, tile, "staged_");
    Var at("at"), ax("ax"), an("an"), anx("anx");
    p.staged_acc.compute_at(p.result, Var("staged_ob"))
        .bound_extent(p.o, kWeightPadding)
        .bound_extent(p.n, rows)
        .split(p.o, at, ax, tile)
        .split(p.n, an, anx, tile)
        .reorder(ax, anx, at, an)
        .gpu_threads(at, an)
        .vectorize(ax)
        .unroll(anx);
    Var ut("ut"), ux("ux"), un("un"), unx("unx");
    p.staged_acc.update()
        .split(p.o, ut, ux, tile)
        .split(p.n, un, unx, tile)
        .reorder(ux, unx, ut, un, p.r_chunks)
        .gpu_threads(ut, un)
        .vectorize(ux)
        .unroll(unx);
    // The chunk's sums at each thread, in registers; the outputs one vector, so that each
    // step's weights are one wide load from shared memory.
    p.staged_part.compute_at(p.staged_acc, ut);
    register_tile(p.staged_part, p.o, p.n, {p.r_chunk}, tile, tile, kProjectionUnroll, true);
    const RVar rki(p.r_chunk.x.name() + "_i");
    const LoopLevel chunk(p.staged_acc, p.r_chunks);
    // The chunk's weights: each thread 4 outputs in one load.
    Var wo("wo"), wv("wv"), wf("wf"), wfi("wfi");
    p.staged_w.compute_at(chunk)
        .bound_extent(p.f, p.staged_chunk)
        .split(p.o, wo, wv, tile)
        .split(p.f, wf, wfi, n_threads, TailStrategy::GuardWithIf)
        .reorder(wv, wo, wfi, wf)
        .vectorize(wv)
        .gpu_threads(wo, wfi);
    p.staged_w.in(p.staged_part).compute_at(p.staged_part, rki).vectorize(p.o);
    // The chunk's inputs: threads along the features (the inputs' dense dimension), stored rows
    // innermost so that a thread's 4 rows are one 16-byte load. Each feature's rows are padded
    // by 4 floats, which keeps those loads aligned and makes a warp's stores (16 features of 2
    // rows, bank 4 f + n) 2-way bank conflicts instead of 16-way.
    Var xf("xf"), xfi("xfi"), xn("xn"), xni("xni");
    p.staged_x.compute_at(chunk)
        .bound_extent(p.f, p.staged_chunk)
        .split(p.f, xf, xfi, o_threads, TailStrategy::GuardWithIf)
        .split(p.n, xn, xni, n_threads, TailStrategy::GuardWithIf)
        .reorder(xfi, xni, xf, xn)
        .gpu_threads(xfi, xni)
        .reorder_storage(p.n, p.f)
        .bound_storage(p.n, rows + tile);
    p.staged_x.in(p.staged_part).compute_at(p.staged_part, rki).vectorize(p.n);
}

}  // namespace

FewRowsPath gpu_few_rows_path(const GpuScheduleKnobs &requested) {
    return FewRowsPath{resolve_gpu_knobs(requested).gpu_few_rows_split, kFewRows};
}

StagedPath gpu_staged_path() {
    return StagedPath{kStagedChunk, kShortOutputs};
}

GpuScheduleKnobs resolve_gpu_knobs(GpuScheduleKnobs k) {
    const auto pick = [](int knob, int fallback) { return knob > 0 ? knob : fallback; };
    k.gpu_gemm_rows = pick(k.gpu_gemm_rows, 64);
    k.gpu_query_block = pick(k.gpu_query_block, 16);
    k.gpu_key_block = pick(k.gpu_key_block, 32);
    k.gpu_query_tile = pick(k.gpu_query_tile, 2);
    k.gpu_value_tile = pick(k.gpu_value_tile, 2);
    k.gpu_small_head_key_block = pick(k.gpu_small_head_key_block, 64);
    k.gpu_small_head_value_tile = pick(k.gpu_small_head_value_tile, 4);
    k.gpu_few_rows_split = pick(k.gpu_few_rows_split, 32);
    k.gpu_few_rows_columns = pick(k.gpu_few_rows_columns, kWeightPadding);
    k.gpu_decode_split_keys = pick(k.gpu_decode_split_keys, 128);
    k.gpu_decode_rows_per_thread = pick(k.gpu_decode_rows_per_thread, 1);
    if (k.gpu_decode_rows_per_thread != 1 && k.gpu_decode_rows_per_thread != kGpuDecodeRows) {
        throw CompileError("gpu_decode_rows_per_thread must be 1 or " +
                           std::to_string(kGpuDecodeRows) + ", got " +
                           std::to_string(k.gpu_decode_rows_per_thread));
    }
    if (k.gpu_decode_split_keys % kGpuDecodeKeyThreads != 0) {
        throw CompileError("gpu_decode_split_keys must be a multiple of " +
                           std::to_string(kGpuDecodeKeyThreads) + ", got " +
                           std::to_string(k.gpu_decode_split_keys));
    }
    // A few-rows block: columns / 4 threads of 4 outputs each, within a weight panel, times the
    // split. Its partial sums in shared memory are 16 bytes per thread, at most 16 KiB.
    const int columns = k.gpu_few_rows_columns, split = k.gpu_few_rows_split;
    if (columns % kProjectionThreadTile != 0 || kWeightPadding % columns != 0) {
        throw CompileError("gpu_few_rows_columns must be a multiple of " +
                           std::to_string(kProjectionThreadTile) + " dividing " +
                           std::to_string(kWeightPadding) + ", got " + std::to_string(columns));
    }
    if (columns / kProjectionThreadTile * split > kMaxBlockThreads) {
        throw CompileError("gpu_few_rows_split " + std::to_string(split) + " over " +
                           std::to_string(columns) + " columns needs more than " +
                           std::to_string(kMaxBlockThreads) + " threads a block");
    }
    return k;
}

// Blocks of 64 keys with 2 x 4 tiles, against the 32 keys and 2 x 2 tiles every head size can
// launch with. sdpa on an H200 at heads of 64, both in one process, with the score tiles' wide
// key loads (bench/gpu_experiments/sdpa_knobs_runner, bench/RESULTS.md): bert-512 0.255 -> 0.176
// ms, bert-512-b8 1.34 -> 1.09, gpt2-causal 0.600 -> 0.466, long-single 13.8 -> 13.3, 4096
// tokens 10.4 -> 8.38, 4096 causal 5.86 -> 4.76. At heads of 128 the keys' block (32 KiB) and
// the running state (24 KiB) alone pass the 48 KiB of shared memory Halide 21's CUDA runtime
// launches a kernel with (CUDA_ERROR_INVALID_VALUE).
GpuScheduleKnobs small_head_flash_knobs(const GpuScheduleKnobs &resolved) {
    GpuScheduleKnobs k = resolved;
    k.gpu_key_block = resolved.gpu_small_head_key_block;
    k.gpu_value_tile = resolved.gpu_small_head_value_tile;
    return k;
}

void schedule_projection_gpu(ProjectionStage &p, const GpuScheduleKnobs &requested,
                             ProjectionResult where) {
    const GpuScheduleKnobs knobs = resolve_gpu_knobs(requested);
    const int tile = kProjectionThreadTile;
    if (knobs.gpu_gemm_rows % tile != 0) {
        throw CompileError("gpu_gemm_rows must be a multiple of " + std::to_string(tile));
    }
    if (!p.staged.defined()) {
        throw CompileError(p.result.name() +
                           ": GPU projections need the staged path (gpu_staged_path)");
    }
    // A block covers at most a weight panel's kWeightPadding output features, so its register
    // tiles never pass the end of the padded weights; input rows are clamped.
    if (p.few_rows.defined()) schedule_few_rows_gpu(p, knobs);
    // Short products (at most kShortOutputs outputs: bert-128, bert-512, the tutorials) read
    // their operands through the L1 cache, in tiles of kShortRowTile rows, blocks of
    // kShortBlockRows: each weight float4 serves the tile's rows, each input value 4 features.
    // Stand-alone, on an H200, against the staged path and the 4 x 4 tiles this path had for
    // every size before it (bench/RESULTS.md), by rows x input x output features: 512 x 768 x
    // 768 0.058 ms, staged 0.062, 4 x 4 0.089; 128 x 768 x 768 0.046, 0.061, 0.081. (The
    // accumulators live at the thread: left to Halide's default, the innermost loop of the
    // result, each of a tile's outputs ran its own reduction, 2 loads per FMA; an H100 once took
    // 1.69 ms for bert-512-b8's query projection that way, against 0.23 ms with register tiles.)
    // The condition is the negation of p.staged, so that each branch's simplification drops
    // the other's algorithm from result's select.
    const Expr short_rows = !p.staged;
    tile_projection_result(p.result.specialize(short_rows), p, kShortBlockRows, kShortRowTile,
                           "short_");
    p.result.compute_root();
    schedule_staged_projection(p, knobs.gpu_gemm_rows);
    p.acc.compute_at(p.result, Var("short_ot"))
        .bound_storage(p.o, tile)
        .bound_storage(p.n, kShortRowTile);
    register_tile_stages(p.acc, p.acc.update(), p.o, p.n, {p.r.x, p.r.y}, tile, kShortRowTile,
                         kProjectionUnroll);
    // Each reduction step's weights for the tile's outputs in one wide load, which needs tiles
    // to start at a multiple of the tile, within one panel of weights (layout.h): the realized
    // features of a stage are widened to whole panels (the padded weights cover the extra), an
    // output's start at 0 (the generator's constraint). A GPU's weights are one feature per
    // row in every precision (layout.h, weights_in_pairs), so `paired` is false here; the check
    // keeps the wide load away from pairs, whose steps are not one dense vector.
    if (where == ProjectionResult::Inside) p.result.align_bounds(p.o, kWeightPadding);
    if (!p.paired) {
        const std::vector<Var> w = p.weights.args();  // (column, row)
        // Float16 weights reach acc through their widening (ProjectionStage::weights_widened),
        // inline here: the staged copy stays in the storage type.
        p.weights.in(p.weights_widened.defined() ? p.weights_widened : p.acc)
            .compute_at(p.acc, RVar(p.r.x.name() + "_i"))
            .vectorize(w[0])
            .unroll(w[1]);
    }
}

void schedule_attention_gpu(AttentionStage &a, const GpuScheduleKnobs &requested) {
    const GpuScheduleKnobs knobs = resolve_gpu_knobs(requested);
    const Var &j = a.j, &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u;

    // Scores: one kernel of 4 x 4 register tiles, written to device memory. Keys and values
    // are read in place (the CPU's packing copies would be a kernel of their own here).
    {
        Func score_tiles = a.packed.score.in();
        Var jb("jb"), ib("ib"), ji("ji"), ii("ii"), jt("jt"), it("it"), jx("jx"), ix("ix");
        score_tiles.compute_root()
            .tile(j, i, jb, ib, ji, ii, kScoreBlockKeys, kScoreBlockQueries, kGpuExact)
            .tile(ji, ii, jt, it, jx, ix, kScoreThreadTile, kScoreThreadTile)
            .reorder(jx, ix, jt, it, jb, ib, h, b)
            .fuse(h, b, h)
            .gpu_blocks(jb, ib, h)
            .gpu_threads(jt, it)
            .unroll(jx)
            .unroll(ix);
        // Safe to compute whole tiles: queries are read at a clamped row, keys are clamped.
        a.packed.score.compute_at(score_tiles, jt);
        register_tile(a.packed.score, j, i, {a.packed.r_dot}, kScoreThreadTile, kScoreThreadTile);
    }

    // The probabilities (the weights output), with their softmax statistics computed per block
    // inside the same kernel: kReductionLanes x query_block threads each reduce every
    // kReductionLanes-th key of their row. (Without the weights output the flash kernel runs,
    // whose statistics are per key block; an older schedule of this stage for that case, with
    // the statistics as kernels of their own, was never reached after the flash kernel landed
    // and is gone.)
    // Why those statistics once had to be kernels of their own: Halide 21 groups a GPU block's
    // shared buffers by their lifetimes in program order, without extending a lifetime over a
    // serial loop at block level. With the statistics computed in the output kernel, the
    // inverse sums were last read by a staged tile of probabilities at the start of each key
    // tile, and the staged tile of values that follows it was given the same shared memory: from
    // the second key tile on, the probabilities read values (kv_len > key_block wrong, every
    // output; reproduced through PoCL with the device suite's LongerRowsThanOneBlock, and by a
    // 40-line JIT pipeline). No schedule here stages a tile after a buffer that a later loop
    // iteration reads again; one that does must keep them apart.
    const Var out_block =
        gpu_query_blocks(a.out, c, i, h, b, knobs.gpu_query_block, kFeatureThreads);
    const Var block =
        gpu_query_blocks(a.probs, j, i, h, b, knobs.gpu_query_block, knobs.gpu_key_block);
    for (Func lanes : {a.max_lanes, a.sum_lanes}) {
        lanes.compute_at(a.probs, block).gpu_threads(u, i);
        lanes.update(0).gpu_threads(u, i);
        lanes.update(1).gpu_threads(i);
    }
    for (Func row : {a.row_max, a.row_sum}) {
        row.compute_at(a.probs, block).gpu_threads(i);
        row.update().gpu_threads(i);
    }
    a.inv_sum.compute_at(a.probs, block).gpu_threads(i);

    // probs x values: the block's accumulators (query_block x dv) live in shared memory; per
    // tile of key_block keys, the values are staged in shared memory by all threads, then each
    // thread accumulates its features. The probabilities are read where they are, in the weights
    // output: a staged tile of them was bounded through
    // the clamped row index, which Halide's bounds cannot tie to the block, so it had q_len x
    // key_block threads and shared floats (first run on an H100: cuLaunchKernel refused every
    // call with q_len > 32, CUDA_ERROR_INVALID_VALUE; PoCL past its 4096 work-items).
    Var co("co"), ci("ci");
    RVar rko("rko"), rki("rki");
    a.out_acc.compute_at(a.out, out_block)
        .split(c, co, ci, kFeatureThreads, TailStrategy::RoundUp)
        .reorder(ci, i, co)
        .gpu_threads(ci, i);
    a.out_acc.update()
        .split(a.r_keys, rko, rki, knobs.gpu_key_block)
        .split(c, co, ci, kFeatureThreads, TailStrategy::RoundUp)
        .reorder(rki, co, ci, i, rko)
        .gpu_threads(ci, i);
    Func values_tile = a.packed.v_packed.in(a.out_acc);
    {
        const std::vector<Var> args = values_tile.args();
        Var fo("fo"), fi("fi");
        values_tile.compute_at(a.out_acc, rko)
            .split(args[0], fo, fi, kFeatureThreads, TailStrategy::RoundUp)
            .reorder(fi, args[1], fo)
            .gpu_threads(fi, args[1]);
    }
}

void schedule_flash_attention_gpu(FlashAttentionStage &a, const GpuScheduleKnobs &requested) {
    const GpuScheduleKnobs knobs = resolve_gpu_knobs(requested);
    const int query_block = knobs.gpu_query_block, key_block = knobs.gpu_key_block;
    const int query_tile = knobs.gpu_query_tile, value_tile = knobs.gpu_value_tile;
    if (query_block % query_tile != 0 || key_block % kFeatureThreads != 0) {
        throw CompileError(
            "the GPU flash attention needs gpu_query_block a multiple of "
            "gpu_query_tile and gpu_key_block a multiple of " +
            std::to_string(kFeatureThreads));
    }
    // A block has kFeatureThreads x row_threads threads in every stage: each thread owns
    // query_tile queries of the block (consecutive rows), and in the scores key_block /
    // kFeatureThreads consecutive keys, in probs x values value_tile consecutive features per
    // step of kFeatureThreads * value_tile. Register tiles in both products: with one query and
    // one key or feature per thread, each FMA loaded both of its operands. On an H200, sdpa alone
    // (bench/RESULTS.md): bert-512-b8 2.57 -> 1.35 ms, long-single 24.8 -> 13.8 ms.
    const int row_threads = query_block / query_tile;
    const int key_tile = key_block / kFeatureThreads;
    const int feature_step = kFeatureThreads * value_tile;
    const Var &j = a.j, &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u, &jj = a.jj, &ii = a.ii;

    // One GPU block per (query block, head, item).
    Var qb("qb"), iq("iq"), it("it"), ix("ix"), co("co"), ci("ci");
    a.out.compute_root()
        .split(i, qb, iq, query_block, kGpuExact)
        .split(iq, it, ix, query_tile)
        .split(c, co, ci, kFeatureThreads, kGpuExact)
        .reorder(ix, ci, it, co, qb, h, b)
        .gpu_blocks(qb, h, b)
        .gpu_threads(ci, it);

    // The running state (output accumulators, row maximum and sum) of the block's queries in
    // shared memory; the key blocks are a serial loop of the GPU block, and each step's stages
    // below are thread loops inside it, with barriers between them.
    a.state.compute_at(a.out, qb)
        .split(c, co, ci, kFeatureThreads, TailStrategy::RoundUp)
        .split(ii, it, ix, query_tile)
        .reorder(ix, co, ci, it)
        .gpu_threads(ci, it);
    Var step_co("step_co"), step_cr("step_cr"), step_ci("step_ci"), step_cx("step_cx");
    Var step_it("step_it"), step_ix("step_ix");
    a.state.update()
        .split(c, step_co, step_cr, feature_step, TailStrategy::RoundUp)
        .split(step_cr, step_ci, step_cx, value_tile)
        .split(ii, step_it, step_ix, query_tile)
        .reorder(step_cx, step_ix, step_co, step_ci, step_it, a.r_blocks)
        .gpu_threads(step_ci, step_it)
        .unroll(step_cx)
        .unroll(step_ix);
    const LoopLevel step(a.state, a.r_blocks);

    // Every per-step buffer covers a whole key block and query block: constant sizes, as shared
    // memory needs, and constant thread loops. Past the last visible key they compute masked
    // logits of clamped reads, which the trimmed reductions never read.
    // The scores: a thread's key_tile x query_tile register tile, written out as the block's
    // logits. Its keys are consecutive, so that the tile's accumulators are one dense region.
    Var jt("jt"), jx("jx"), st("st"), sx("sx");
    a.block_logits.compute_at(step)
        .bound_extent(jj, key_block)
        .bound_extent(i, query_block)
        .split(jj, jt, jx, key_tile)
        .split(i, st, sx, query_tile)
        .reorder(jx, sx, jt, st)
        .gpu_threads(jt, st)
        .unroll(jx)
        .unroll(sx);
    a.packed.score.compute_at(a.block_logits, jt);
    // A thread's keys are consecutive in the shared copy below: one wide load per step of the
    // dot product, not one per key (ld.shared.v4 at blocks of 64 keys), and the reduction
    // unrolled so that the query loads of consecutive steps are independent. On an H200, both
    // schedules in one call (bench/RESULTS.md), the 64-key kernel: bert-512-b8 1.16 -> 1.10 ms,
    // gpt2-causal 0.493 -> 0.466, 4096 tokens 8.96 -> 8.38, long-single 16.2 -> 13.3 (it had
    // lost to the 32-key kernel there), bert-512 0.173 -> 0.176; the 32-key kernel within 1.5%
    // either way. Tiles of other than 2, 4 or 8 keys stay unrolled scalars: with 3-wide vectors
    // (blocks of 48 keys) the results were wrong through PoCL (sdpa_knobs_runner_opencl).
    const bool wide_keys = key_tile == 2 || key_tile == 4 || key_tile == 8;
    register_tile(a.packed.score, j, i, {a.packed.r_dot}, key_tile, query_tile, kFlashScoreUnroll,
                  wide_keys);
    // Without a boolean or additive mask, a specialization drops their loads: each logit loaded
    // a byte of the boolean mask and a float of the additive one whether or not they were set.
    // The specialization copies block_logits' schedule as it is here: a stage directive added
    // below would reach only the masked version.
    a.block_logits.specialize(a.mask.unmasked());
    // The step's keys in shared memory, keys innermost, so that a warp's score threads read
    // neighbouring keys of one feature (from the keys' layout, 16 rows 4 * dk bytes apart; ncu
    // on an H100: L1/TEX throughput 94%, compute 26%). Stand-alone sdpa there, float32, before
    // the register tiles: bert-512-b8 4.70 -> 2.55 ms, gpt2-causal 1.73 -> 0.88, 4096 tokens
    // 36.9 -> 19.2. The copy's threads stay within the block's: a copy of key_block (32) x 8
    // threads in a block of 16 x 16 gave wrong results through PoCL (and passed on the H100).
    Var kd_o("kd_o"), kd_i("kd_i"), kj_o("kj_o"), kj_i("kj_i");
    a.packed.k_packed.compute_at(step)
        .bound_extent(j, key_block)
        .split(j, kj_o, kj_i, kFeatureThreads)
        .split(a.d, kd_o, kd_i, row_threads, TailStrategy::GuardWithIf)
        .reorder(kj_i, kd_i, kj_o, kd_o)
        .gpu_threads(kj_i, kd_i);
    Var jo("jo"), ji("ji");
    a.block_probs.compute_at(step)
        .bound_extent(jj, key_block)
        .split(jj, jo, ji, kFeatureThreads)
        .split(ii, it, ix, query_tile)
        .reorder(jo, ix, ji, it)
        .gpu_threads(ji, it);
    // Row maxima and sums: kReductionLanes lanes per query, then a serial sum per query.
    for (Func lanes : {a.max_lanes, a.sum_lanes}) {
        lanes.compute_at(step).split(ii, it, ix, query_tile).reorder(ix, u, it).gpu_threads(u, it);
        lanes.update().split(ii, it, ix, query_tile).reorder(ix, u, it).gpu_threads(u, it);
    }
    for (Func row : {a.block_max, a.block_sum}) {
        row.compute_at(step).split(ii, it, ix, query_tile).gpu_threads(it);
        row.update().split(ii, it, ix, query_tile).gpu_threads(it);
    }
    // probs x values per thread, a value_tile x query_tile tile in registers: each key's
    // probabilities from shared memory (one value for all kFeatureThreads threads of a query),
    // its values read where they are, neighbouring features across the threads.
    a.block_out.compute_at(a.state, step_co)
        .bound_extent(c, value_tile)
        .bound_extent(ii, query_tile)
        .unroll(c)
        .unroll(ii);
    a.block_out.update().reorder(c, ii, a.r_block_keys).unroll(c).unroll(ii);
    // One key block of one query block per step: bounds inference cannot see that kb is the
    // step's block, and without it block_out was per-thread global memory.
    for (Func f : {a.block_logits, a.max_lanes, a.block_max, a.block_probs, a.sum_lanes,
                   a.block_sum, a.block_out}) {
        f.bound_extent(a.kb, 1);
    }
    for (Func f :
         {a.max_lanes, a.block_max, a.block_probs, a.sum_lanes, a.block_sum, a.block_out}) {
        f.bound_extent(a.qb, 1);
    }
}

void schedule_rope_angles_gpu(Func angles, const RopeInputs &rope) {
    // On the host: the angles are formed in double, which OpenCL devices need not support
    // (Halide refuses doubles in OpenCL kernels without cl_doubles). Without rotation the
    // table is ones and zeros, computed without the polynomials.
    angles.compute_root().specialize(rope.mode == 0);
}

void schedule_elementwise_gpu(Func f) {
    const std::vector<Var> a = f.args();
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi"), zw("zw");
    f.compute_root()
        .fuse(a[2], a[3], zw)
        .gpu_tile(a[0], a[1], xo, yo, xi, yi, 32, 8, kGpuExact)
        .gpu_blocks(xo, yo, zw);
}

void schedule_rotated_heads_gpu(Func rotated) {
    schedule_elementwise_gpu(rotated);
}

}  // namespace attngen
