// CPU schedules of the projections (schedule_cpu.h): the matrix products of many rows in register
// tiles, the split reductions of decoding's few rows, and the AMX path.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "layout.h"
#include "schedule_cpu.h"
#include "schedule_cpu_tiles.h"

namespace attngen {

using namespace Halide;

namespace {

// Rows per parallel task of a projection's operand rounding (bfloat16 and float16 weights): a
// task of one row was a few kilobytes of work, and with a task per row a bfloat16 forward's
// four roundings took 105 of 1936 us at bert-128 and 409 of 9467 us at bert-512
// (attngen_parallel_timeline); 72 us at bert-128 in tasks of 16 rows, mha_forward_bf16 1.03x.
constexpr int kOperandRowsPerTask = 16;

// Register tile columns (tile_o output features each) per parallel task of a projection in
// row blocks, rounded up to whole weight panels: 256 features with AVX-512's 4 x 16-float
// tiles, 3 tasks per row block at d_model 768; one panel with AVX2's 2 x 8-float tiles.
constexpr int kRowBlockOutputTiles = 4;
// Row blocks kTallRowBlockFactor times taller for projections with at least
// kTallRowBlockMinGroups groups of output panels (schedule_projection_cpu).
constexpr int kTallRowBlockMinGroups = 8;
constexpr int kTallRowBlockFactor = 4;

// Rows of a register tile of vdpbf16ps on a projection's direct path, at most, and the rows of
// a block of its projections where the knobs' tiles are taller (schedule_projection_cpu).
constexpr int kBf16DotDirectMaxRows = 4;
constexpr int kBf16DotBlockRows = 128;

// A projection whose input is at most this large makes panels of output features its parallel
// tasks (schedule_projection_cpu): the input, and a panel of weights, then stay in L2 (1 MiB
// per core on the x86 server CPUs attngen is measured on).
constexpr int64_t kPanelTasksMaxInputBytes = 640 * 1024;

// At least this many parallel tasks per split reduction: a few per core of the 2- to 16-core
// CPUs attngen is measured on, so that tasks of equal size balance.
constexpr int kSplitReductionTasks = 16;
// At most this many bytes of one panel's weights per task of a split reduction: row tiles
// after the first read the run again, from L2.
constexpr int kSplitReductionRunBytes = 128 * 1024;
// Input features per unrolled step of a split reduction's task.
constexpr int kSplitReductionUnroll = 8;
// At most this many vectors of partial sums per row of a split reduction's register tile of
// several rows: a panel of kWeightPadding outputs is 4 AVX-512 vectors; AVX2 and SSE tiles take
// part of one (one_row_tile_vectors for tiles of one row).
constexpr int kSplitReductionTileVectors = 4;
// Rows of a split reduction's register tile on targets with 32 vector registers
// (split_reduction_tile_rows): each run of weights read from memory serves this many rows.
constexpr int kSplitReductionTileRows = 4;

// Few rows (decoding): a parallel task is one panel of output features (layout.h) over one
// range of the input features, and the ranges' partial sums are added at the end. The ranges
// are as few as give kSplitReductionTasks tasks and keep a task's run of its panel's weights
// within kSplitReductionRunBytes: a GPT-2 projection (12 panels of 768 features) takes 2
// ranges, Llama 3's 4096 x 4096 (64 panels) 8. Only the rows asked for are computed: a
// register tile's rows past the last one, products of a repeated row, took 2.3x the time at 1
// row of 4 (JIT experiment).
// A task reads its run front to back into a register tile of split_reduction_tile_rows rows
// (one row for calls of fewer), whose partial sums stay in registers across the run; further
// tiles of rows read the run again, from L2.
// Before, a task was one of kSplitReductionTasks ranges of features over every panel, a run of
// 12 KiB (GPT-2) to 64 KiB (Llama 3) from each panel. Against those tasks (scripts/ab_runs.py, 3
// rounds, 2 threads, Zen 4, with a step's keys appended as vectors (then schedule_cache_rows_cpu)
// and copied into the cache without a call per element (kv_cache.cpp)): AVX-512 decode/gpt2-decode
// 1.51x, llama3-8b-decode 1.05x, its batch of 8 1.08x, bfloat16 1.23x, 1.31x, 1.08x; AVX2
// 1.15x, 0.94-1.14x per round (bound by DRAM), 1.10x. One range per panel (no run bound) gave the
// AVX2 batch of 8 0.90x: its 4 tiles of 2 rows read a 1 MiB run 4 times. Weights stored as [in,
// out] rows, with all outputs in each step, had been 1.15x slower at gpt2-decode and 1.34x at
// llama3-8b-decode than the feature ranges over panels (Zen 5); with the panels inside the step
// loop, or the sums in memory, 1.14x and 1.25-1.9x slower still.
// Vectors of partial sums in a split reduction's register tile of one row (a decoding step at
// batch 1): the whole panel where its sums leave registers for the broadcast input and a load
// and the target multiplies and adds in one instruction (x86 FMA, every AVX-512 variant,
// AArch64's fmla), since each weight vector is used once (on x86 the FMA's memory operand); a
// task then reads its run front to back once. A narrower tile reads the run once per tile
// column, each pass a part of every panel row (AVX2: two passes of 128 of 256 bytes). AVX2
// variant (ATTNGEN_CPU_DISPATCH=avx2), Zen 4, 2 threads, scripts/paired_ab.py, 12 pairs in 2
// sessions, 4 vectors against 8, old/new: decode/llama3-8b-decode 1.264x (12 of 12 pairs; each
// projection's loop 1.37x, attngen_parallel_timeline), gpt2-decode 1.152x (12 of 12), bfloat16
// weights 1.105x and 1.097x (8 pairs); the batch of 8, whose tiles have 2 rows, 0.987x. The SSE4.1
// variant (no FMA: a product and a sum per weight vector) lost with 8 vectors, llama3-8b-decode
// 0.836x, and keeps 4. AArch64 (16 vectors, one pass for 4) was not timed: qemu checks it.
int one_row_tile_vectors(const Target &target) {
    const int panel_vectors = kWeightPadding / vector_width(target);
    const bool fused =
        target.arch == Target::ARM || target.has_feature(Target::FMA) || wide_register_file(target);
    if (fused && panel_vectors + 2 <= vector_registers(target)) return panel_vectors;
    return std::min(panel_vectors, kSplitReductionTileVectors);
}

// Rows of a split reduction's register tile for calls of at least as many rows (fewer go one
// row at a time): kSplitReductionTileRows with 32 vector registers, half as many with 16. But
// where a tile of one row spans the panel and one of several would not (AVX2), every row of
// float32 weights goes alone: each task then reads its run once from memory, whole, and again
// from L2 for each further row, where tiles of 2 rows by half the panel read half of every
// panel row per pass. AVX2 variant, Zen 4, 2 threads, scripts/paired_ab.py, 2-row tiles against
// one row at a time, old/new: decode/llama3-8b-decode-b8 1.116x (8 of 8 pairs) and 1.080x (7 of
// 8), gpt2-decode 1.031x, llama3-8b-decode 1.008x. 16-bit weights keep the 2-row tiles, which
// widen each weight once per 2 rows: one row at a time, decode_bf16/llama3-8b-decode-b8 0.921x
// (12 pairs in 3 sessions, 1 won).
int split_reduction_tile_rows(const Target &target, const Type &weights) {
    if (wide_register_file(target)) return kSplitReductionTileRows;
    const bool row_spans_panel = one_row_tile_vectors(target) > kSplitReductionTileVectors;
    return row_spans_panel && weights.bits() == 32 ? 1 : kSplitReductionTileRows / 2;
}

void schedule_split_reduction(ProjectionStage &p, const Target &target) {
    const int vec = vector_width(target);
    const int tile_rows = split_reduction_tile_rows(target, p.weights.type());
    Stage few = p.acc.update().specialize(p.rows <= kSplitReductionMaxRows);
    RVar task_r("task_r"), within("within"), fo("fo"), fu("fu");
    Var task("task"), ov("ov"), ol("ol");
    // The tasks split the flat features f = g * group_size + d (rows of the weights, contiguous
    // within a panel) without dividing f by the run-time group size, which fusing (d, g) took
    // at every step: one group (an input projection) splits d, several (the output projection,
    // over heads) split g, and bfloat16 weights (ProjectionStage::paired) split their pairs of
    // flat features. A step takes kSplitReductionUnroll features (as half as many pairs).
    const bool split_groups = !p.paired && !Internal::is_const_one(p.groups);
    const RVar split = p.paired || split_groups ? p.r.y : p.r.x;
    const int step = p.paired ? kSplitReductionUnroll / 2 : kSplitReductionUnroll;
    const Expr extent = p.paired       ? (p.in_features + 1) / 2
                        : split_groups ? p.groups
                                       : p.in_features;
    const int granule = split_groups ? 1 : step;
    // A task reads one panel's weights for its range of the reduction: a contiguous run of
    // unit_bytes per unit of `extent`, at most kSplitReductionRunBytes, and into as many
    // ranges as give kSplitReductionTasks tasks over the panels.
    const Expr unit_bytes = kWeightPadding * p.weights.type().bytes() * (p.paired ? 2 : 1) *
                            (split_groups ? p.in_features / p.groups : 1);
    const Expr panels = ceil_div(p.out_features, kWeightPadding);
    const Expr feature_tasks = max(ceil_div(kSplitReductionTasks, panels),
                                   ceil_div(extent, max(kSplitReductionRunBytes / unit_bytes, 1)));
    const Expr per_round = feature_tasks * granule;
    const Expr per_task = ceil_div(extent, per_round) * granule;
    few.split(split, task_r, within, per_task, TailStrategy::GuardWithIf);
    Func partial = few.rfactor(task_r, task);
    few.vectorize(p.o, vec);  // the sum over tasks
    // Zeroing the partial sums (rows x out floats per task) costs less than waking the threads.
    // Every task covers whole panels: the weights are padded to them, and the sum over tasks
    // reads only the outputs it needs.
    const int tile = std::min(kWeightPadding, kSplitReductionTileVectors * vec);
    const int row_tile = one_row_tile_vectors(target) * vec;
    Func sums = partial.in();
    Var op("op"), oin("oin"), oo("oo"), oi("oi"), no("no"), ni("ni"), pt("pt");
    sums.compute_root().align_bounds(p.o, kWeightPadding);
    const auto tiles = [&](Stage s, int rows, int width, TailStrategy tail) {
        s.split(p.o, op, oin, kWeightPadding, TailStrategy::RoundUp)
            .split(oin, oo, oi, width, TailStrategy::RoundUp)
            .split(p.n, no, ni, rows, tail)
            .reorder(oi, ni, no, oo, op, task)
            .vectorize(oi, vec)
            .fuse(op, task, pt)
            .parallel(pt);
    };
    if (tile_rows > 1) {
        tiles(sums.specialize(p.rows >= tile_rows), tile_rows, tile, TailStrategy::ShiftInwards);
    }
    tiles(sums, 1, row_tile, TailStrategy::RoundUp);
    // No bound_extent on the outputs: the two branches' tiles differ in width, and each
    // branch's partial sums take its own (bounds inference gives a constant extent in each).
    partial.compute_at(sums, no).vectorize(p.o, vec).unroll(p.o).unroll(p.n);
    Stage steps = partial.update()
                      .split(split_groups ? p.r.x : within, fo, fu, step, TailStrategy::GuardWithIf)
                      .split(p.o, ov, ol, vec);
    if (p.paired) {
        // Not the pair as vdpbf16ps lanes here, as the matrix product below does: inside this
        // parallel task loop Halide 21 did not match the pattern and reduced the pairs with
        // scalar shuffles (2.9 GB/s in a JIT experiment, a 1-row 4096 x 4096 bfloat16
        // projection; the same loops serial did emit vdpbf16ps). Pairs as two loads of a
        // vector each: 36.4 GB/s there.
        steps.reorder(ol, p.r.x, ov, p.n, fu, fo).vectorize(ol).unroll(p.r.x);
    } else if (split_groups) {
        // A task's groups outermost: each is one contiguous run of its panel.
        steps.reorder(ol, ov, p.n, fu, fo, within).vectorize(ol);
    } else {
        steps.reorder(ol, ov, p.n, fu, fo).vectorize(ol);
    }
    steps.unroll(ov).unroll(p.n).unroll(fu);
}

// Whether the target widens a vector of float16 in one instruction: x86 with F16C, which AVX2 and
// AVX-512 imply (Halide's x86 code generator completes the features; the dispatch variants'
// target strings name only their flavour, schedule_cpu_tiles.h), and the other CPUs attngen
// builds for (AArch64's fcvtl).
bool widens_float16_in_one(const Target &target) {
    return target.arch != Target::X86 || target.has_feature(Target::F16C) ||
           target.has_feature(Target::AVX2) || wide_register_file(target);
}

// A copy of bfloat16 weights widened to float32 (ProjectionStage::weights_f32), (o, e, pair):
// the outputs vectorized, both features of a pair at once. Without vdpbf16ps, the direct path
// widens one panel per task for all of the task's row tiles, and the blocked path one block of
// the panel for all of its tiles of rows. Widened in each tile instead, every pair of weight
// vectors took a shift and a mask beside the tile's FMAs (on Intel cores 512-bit integer
// operations issue on the FMA ports), and AVX2's tiles, narrower than a panel, widened each
// block once per tile column too. Intel Xeon model 207 (whose vdpbf16ps runs at half the FMA's
// rate of multiply-adds, so the probe takes the variant without it), 2 threads,
// scripts/ab_runs.py, medians of per-round ratios (bench/runs/bf16-widened-intel):
// - blocked path, ATTNGEN_CPU_DISPATCH=avx2, 3 rounds, two runs: mha_forward_bf16/bert-128
//   1.61x and 1.29x, bert-512 1.24x and 1.31x, gpt2-causal 1.33x and 1.33x (float32 controls
//   0.95x and 0.98x). AVX-512, decode_bf16/llama3-8b-prefill (4096 input features): 1.26x in
//   one run, 0.98x in another; not resolved from this host's noise.
// - direct path (AVX-512), 5 rounds: mha_forward_bf16/bert-128 1.12x, bert-512 1.01x,
//   bert-512-b8 1.00x, gpt2-causal 1.01x, within the float32 controls' noise (0.87-1.23x).
//   Halide's profiler, bert-512: each projection's register tiles take float32's time (2.3-3.5
//   ms a call against 2.8-3.6), plus 0.28 ms widening.
// Decoding's few-row projections keep the widening inline (their stmt unchanged). AVX2's
// staged block is 64 pairs of float32, 32 KiB: all of L1 on a Zen 4, where this was not
// measured (the float32 block it replaced was 16 KiB).
Func stage_widened_weights(Func staged, int vec) {
    const std::vector<Var> args = staged.args();
    // Guarded: the output projection's result is bounded to its features, and a vector shifted
    // inwards from fewer than a vector of them read the panel before (panel -1). Regions aligned to
    // whole panels instead (align_bounds) made the bounds inferred for the weights twice the
    // panels at bert-512 (the call refused: "wo_t is accessed at 22").
    return staged.bound_extent(args[1], kWeightPairs)
        .vectorize(args[0], vec, TailStrategy::GuardWithIf)
        .unroll(args[1]);
}

// Whether a projection operand's rows are rounded in parallel tasks: only for more than a
// decoding step's, since a loop of one task still wakes the threads (a bfloat16 GPT-2 step ran
// five of them).
Expr operand_rows_in_tasks(const Expr &rows) {
    return rows > kSplitReductionMaxRows;
}

// The bfloat16 or float16 operand of a projection, where it has one.
void schedule_projection_operand(ProjectionStage &p, int vec) {
    if (!p.operand.defined()) return;
    if (p.operand_shared) {
        p.operand.compute_inline();
        return;
    }
    // Where the AMX path is the projection's one algorithm, its own bfloat16 copy of the rows
    // (amx_operand) is the operand's only reader: rounded there, the input is read once, not
    // copied twice (the two passes took 8% of mha_forward_bf16/bert-512-b8's samples).
    // scripts/ab_runs.py, 3 rounds, 2 threads, Intel Xeon with AMX, old/new: mha_forward_bf16/
    // bert-128, bert-512-b8 and long-causal 1.04x, bert-512 1.03x, tutorial 1.05x, gpt2-causal
    // 1.00x.
    if (p.amx_tiles.defined() && !p.amx_result.defined() && !p.r_operand.defined()) {
        p.operand.compute_inline();
        return;
    }
    // Rounded once per input element, into a buffer that the register tiles read as they
    // read a float32 input: rounded inline, every broadcast of the tile would round again.
    const std::vector<Var> a = p.operand.args();
    const Expr many_rows = operand_rows_in_tasks(p.rows);
    p.operand.compute_root().vectorize(a.front(), vec, TailStrategy::GuardWithIf);
    p.operand.specialize(many_rows).parallel(a.back(), kOperandRowsPerTask,
                                             TailStrategy::GuardWithIf);
    if (p.r_operand.defined()) {
        // Each (d, g) writes its own feature g * group_size + d (d < group_size), which
        // Halide cannot prove for a run-time group size: there is no race to allow.
        Stage update = p.operand.update();
        update.allow_race_conditions().vectorize(p.r_operand.x, vec, TailStrategy::GuardWithIf);
        update.specialize(many_rows).parallel(a.back(), kOperandRowsPerTask,
                                              TailStrategy::GuardWithIf);
    }
}

// Rows per parallel task of the copy of an AMX projection's result (ProjectionStage::
// amx_result).
constexpr int kAmxCopyRowsPerTask = 64;

// The AMX path (ProjectionStage::amx_tiles). A parallel task takes kAmxTaskOutputs outputs by
// up to kAmxTaskRows rows; its tiles walk the outputs inside each tile of rows, so that the
// task's weights (kAmxTaskOutputs x in bfloat16, 192 KiB for 768 features) stay in L2 and
// each tile of rows is read from L1 by all of them. Stand-alone (bench/cpu_experiments/
// amx_projection.cpp, 2 threads, Intel Xeon with AMX, 512 x 768 x 2304, weights read in place
// from panels one tile wide): tasks of 128 outputs 1.9-2.0 TFLOP/s, the row tiles outside the
// outputs 0.72; with the weights copied into tiles each call, 1.37.
// With AmxPath::min_rows the tasks compute amx_result, which result copies in the calls that
// take it (schedule_projection_cpu).
void schedule_projection_amx(ProjectionStage &p, const Expr &output_features) {
    constexpr int kAmxTaskOutputs = 128, kAmxTaskRows = 512;
    const int vec = kAmxTile;
    const Var &n = p.n, &o = p.o;
    Var f = p.amx_operand.args()[0], m = p.amx_operand.args()[1];
    if (!p.amx_operand.function().same_as(p.operand.function())) {
        p.amx_operand.compute_root()
            .vectorize(f, vec, TailStrategy::GuardWithIf)
            .parallel(m, kOperandRowsPerTask, TailStrategy::GuardWithIf);
    }
    Func result = p.amx_result.defined() ? p.amx_result : p.result;
    if (!p.amx_result.defined()) {
        const Expr padded_features = ceil_div(p.out_features, kWeightPadding) * kWeightPadding;
        p.result.bound(o, 0, output_features.defined() ? output_features : padded_features);
    }
    Var oo("oo"), oi("oi"), nb("nb"), ni("ni"), task("task"), row_tile("row_tile"), nr("nr");
    result.compute_root()
        .split(o, oo, oi, kAmxTaskOutputs, TailStrategy::GuardWithIf)
        .split(n, nb, ni, kAmxTaskRows, TailStrategy::GuardWithIf)
        .split(ni, row_tile, nr, kAmxTile, TailStrategy::GuardWithIf)
        .vectorize(oi, vec, TailStrategy::GuardWithIf)
        .reorder(oi, nr, row_tile, oo, nb)
        .fuse(oo, nb, task)
        .parallel(task);
    p.amx_tail.compute_at(result, task).vectorize(o, vec, TailStrategy::GuardWithIf);
    p.amx_tail.update().vectorize(o, vec, TailStrategy::GuardWithIf);
    // Without a tail (input features a multiple of kAmxBlock), no amx_tail: zeroed per task and
    // added for nothing, it was a memset of rows x kAmxTaskOutputs floats per task (LLVM's, one
    // call per row; 4% of mha_forward_bf16/bert-512's samples). scripts/ab_runs.py, 3 rounds,
    // 2 threads, Intel Xeon with AMX, old/new: mha_forward_bf16/ tutorial 1.08x, gpt2-causal
    // 1.06x, bert-128 and bert-512 1.02x; decode_bf16/llama3-8b-prefill 1.07x.
    result.specialize(!p.amx_has_tail);
    // The tile products need whole tiles: rows past the call's are computed (their operand rows
    // clamped) and not read.
    // Their copy to memory per tile of rows, 8 KiB of constant size, which Halide keeps on the
    // stack: a task then allocates nothing where it has no tail, so the output projection may
    // write the forward's output in place (runtime/mha.cpp). Per task it was 256 KiB from the
    // heap.
    schedule_amx_product(p.amx_out, p.amx_tiles, p.r_amx, LoopLevel(result, row_tile));
    p.amx_out.bound_storage(p.n, kAmxTile).bound_storage(p.t, kAmxTaskOutputs / kAmxTile);
}

}  // namespace

void schedule_input_operands(const InputOperands &ops, const Target &target) {
    const int vec = vector_width(target);
    Func rounded = ops.rounded;
    rounded.compute_root();
    const Var f = rounded.args()[0];
    for (size_t source = 0; source < ops.rows.size(); ++source) {
        const RVar rows = ops.rows[source].x;
        // Row r writes row first_row + r alone, which Halide cannot prove for a run-time
        // first_row: there is no race to allow.
        Stage update = rounded.update(int(source));
        update.allow_race_conditions().reorder(f, rows).vectorize(f, vec,
                                                                  TailStrategy::GuardWithIf);
        update.specialize(operand_rows_in_tasks(ops.row_counts[source]))
            .parallel(rows, kOperandRowsPerTask, TailStrategy::GuardWithIf);
    }
}

DirectPath cpu_direct_path(const Target &target, const CpuScheduleKnobs &requested) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    if (knobs.gemm_vectors * vector_width(target) != kWeightPadding) return {};
    return DirectPath{kSplitReductionMaxRows, kDirectMaxInFeatures};
}

void schedule_projection_cpu(ProjectionStage &p, const Target &target,
                             const CpuScheduleKnobs &requested, ProjectionRows rows,
                             const Expr &output_features) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const int vec = vector_width(target);
    const int tile_o = knobs.gemm_vectors * vec;
    if (kWeightPadding % tile_o != 0) {
        throw CompileError("gemm_vectors * vector width (" + std::to_string(tile_o) +
                           ") must divide the weight padding (" + std::to_string(kWeightPadding) +
                           ")");
    }
    const int tile_l = knobs.gemm_rows;
    // The direct path's vdpbf16ps tiles (the bfloat16 kernels' AVX512-BF16 variant, taken where
    // vdpbf16ps pays, of the CPUs measured AMD Zen 4 and 5: runtime/bf16_dot_probe.h) take at most
    // kBf16DotDirectMaxRows rows, in row blocks of kBf16DotBlockRows. The 4 x 6 tile of the tuned
    // file (from an Intel Xeon) fits by resolve_cpu_knobs' count (29 registers), yet LLVM did not
    // keep it in them: perf of mha_forward_bf16/bert-128's q_proj on a Zen 4 showed about 20
    // vmovaps moving accumulators between registers in every step, one stored to the stack and
    // loaded back, and the rows' broadcast addresses computed in a vector register; the 4 x 4
    // tile's step is 4 loads, 4 broadcasts and 16 vdpbf16ps. attngen_parallel_timeline bert-128
    // bf16: each input projection 487 -> 342 us (0.67 -> 0.96 of fma_peak_bf16).
    // scripts/paired_ab.py, 2 threads, Zen 4, old/new: mha_forward_bf16/bert-128 1.20x (new faster
    // in 20 of 20 pairs), bert-512-b8 1.06x, gpt2-causal 1.04x, long-causal 1.03x, tutorial 1.02x,
    // bert-512 0.98x and 1.02x in two runs; tutorial-cross, long-single, the llama3 prefill and the
    // decode shapes 0.99-1.01x. The 4-row tiles in the tuned blocks of 132 rows (22 x 6) lost at
    // bert-512 (0.96x); in blocks of 128 they did not. The blocked path's 6-row vdpbf16ps tiles
    // step cleanly (6 broadcasts, 24 products) and keep tile_l: with 4 there too, the llama3
    // prefill (4096 input features) lost 0.96x. The result's row tiles are the direct path's on
    // every path (acc_direct is computed per tile of the result's rows).
    const bool dot_tiles = p.paired && has_bfloat16_dot_product(target);
    const int direct_tile_l = dot_tiles ? std::min(tile_l, kBf16DotDirectMaxRows) : tile_l;
    schedule_projection_operand(p, vec);
    if (p.amx_tiles.defined()) {
        schedule_projection_amx(p, output_features);
        if (!p.amx_result.defined()) return;
    }
    // Before the matrix-product schedule below: a specialization starts from a copy of the
    // stage's schedule as it is when specialized.
    if (rows == ProjectionRows::FewOrMany) schedule_split_reduction(p, target);

    Var oo("oo"), oi("oi"), no("no"), ni("ni"), nb("nb"), nr("nr");
    // Exact tails on the result (it may be an output); the accumulator always covers a whole
    // register tile, which is safe because weights are padded and input rows are clamped.
    // Tiles start at 0 or a multiple of kWeightPadding, so each reads its weights within one
    // panel (layout.h) as dense vectors: from a start Halide cannot see, the panel of every
    // output was a division and each load a gather (7x the time, projection/bert-128). Results
    // inside a pipeline cover whole panels from 0. Aligned instead (align_bounds) from the
    // start that bounds inference derives, the bfloat16 key projection's register tiles were
    // indexed by offsets constant only modulo that start, and LLVM kept them in memory
    // (mha_forward_bf16/bert-128 0.81x).
    const Expr padded_features = ceil_div(p.out_features, kWeightPadding) * kWeightPadding;
    p.result.bound(p.o, 0, output_features.defined() ? output_features : padded_features);
    p.result.compute_root()
        .split(p.o, oo, oi, kWeightPadding, TailStrategy::GuardWithIf)
        .vectorize(oi, vec, TailStrategy::GuardWithIf);
    // Calls that take the AMX path copy its result, rows in parallel.
    if (p.amx_rows.defined()) {
        p.result.specialize(p.amx_rows)
            .parallel(p.n, kAmxCopyRowsPerTask, TailStrategy::GuardWithIf);
    }
    // Few rows (their inputs fit in L2 beside a panel of weights): the parallel tasks are
    // panels of output features (kWeightPadding), each over every row, so each weight is read
    // from memory once and the rows stay in L2. In a forward the weights come cold from memory
    // (four matrices of 2.25 MiB at bert-128), and with row blocks as the tasks each block
    // streamed all of them again. MHA forward, medians of 6 alternating rounds: 0.97x the time at
    // tutorial and bert-128, 0.98x at tutorial-cross. With panels at every size, bert-512 and
    // gpt2-causal measured 1.01x and 1.02x, so larger inputs keep the row blocks below. A split
    // reduction's result is the sum of its tasks' partial sums: a few rows by the output features,
    // each added kSplitReductionTasks times, less work than waking the threads for it (see
    // schedule_decode_attention_cpu's merge).
    const auto panels = [&](Stage s, int rows_per_tile) {
        return s.split(p.n, no, ni, rows_per_tile, TailStrategy::GuardWithIf)
            .reorder(oi, ni, no, oo);
    };
    // With the direct path (DirectPath), each branch of many rows gets a copy of itself for the
    // calls that take it: the same loops over the same tasks, the sum from acc_direct. Its
    // copy of a register tile into the result is unrolled, so that every read of acc_direct is
    // at a constant place and LLVM keeps the tile in registers to the result's stores; in a
    // loop, the tile went through a stack buffer, stored after its products and loaded back
    // vector by vector (perf: 4-8% of the bfloat16 tutorial's q and output projections).
    // scripts/paired_ab.py, 8 pairs in 2 sessions, 2 threads, Zen 4, old/new:
    // mha_forward_bf16/ bert-128 1.054x (8 of 8), tutorial-cross 1.048x, gpt2-causal 1.043x,
    // tutorial 1.041x, bert-512-b8 1.025x, bert-512 1.019x, the long shapes 1.007-1.015x;
    // float32 (6 x 4 tiles, 6 rows a copy) 0.99-1.07x, bert-128 1.012x (7 of 8).
    const auto and_direct = [&](Stage s) {
        if (p.acc_direct.defined()) s.specialize(p.direct).unroll(oi).unroll(ni);
    };
    if (rows == ProjectionRows::FewOrMany)
        panels(p.result.specialize(p.rows <= kSplitReductionMaxRows), direct_tile_l);
    const Expr input_bytes = cast<int64_t>(p.rows) * p.in_features * int(sizeof(float));
    and_direct(
        panels(p.result.specialize(input_bytes <= Expr(kPanelTasksMaxInputBytes)), direct_tile_l)
            .parallel(oo));
    // Otherwise rows go in blocks of gemm_row_tiles register tiles, with the blocks parallel and
    // the tiles of a block innermost: one panel of weights (kWeightPadding x in floats,
    // 192 KiB for 768 inputs) is read from L3 once per block and from L2 by the block's other
    // tiles, instead of the whole weight matrix streaming from L3 for every tile of rows.
    // Rows of all batches are one sequence (ProjectionStage): with blocks per batch, 10 rows
    // per batch (the tutorial shape) made 12-row blocks, and the projection took 0.92 ms
    // against 0.77 ms for the same rows as one batch (attngen_bench projection/tutorial, min
    // of 5 repetitions, 3 alternating runs).
    // The parallel tasks are (row block, group of kRowBlockOutputTiles tile columns): each task
    // reads its group's slice of the weights once, and a whole weight matrix streams once per
    // row block, so fewer, taller blocks read it fewer times; the groups keep the tasks many
    // enough for more cores than rows / block_rows. projection/<shape>, AVX-512 variant, 2
    // threads, Zen 4, medians of 3 repetitions per round, 3 interleaved rounds, row blocks of
    // 32 rows without groups against 128 rows with them (gemm_row_tiles 8 against 32):
    // llama3-8b-prefill (512 x 4096 x 4096, 64 MiB of weights) 186-202 against 118-126 ms,
    // long-causal 28.0-35.8 against 27.6-30.3, bert-512 3.80-5.79 against 3.83-4.19,
    // bert-512-b8 29.2-39.6 against 29.9-33.4. 128 rows without the groups measured the same
    // as with them on these 2 cores; 32 rows with them, no better than without.
    // With outputs enough for kTallRowBlockMinGroups groups of panels, the groups alone keep
    // the cores busy, and the row blocks are kTallRowBlockFactor times taller, so that weights
    // too large for the last-level cache stream from memory fewer times.
    // projection/llama3-8b-prefill (512 x 4096 x 4096, 64 MiB of weights, 16 groups), 2
    // threads, Zen 5, scripts/ab_runs.py, 3 rounds, one 512-row block against four of 128:
    // 45.9 -> 38.6 ms (1.19x), decode/llama3-8b-prefill 1.13x. At every size, bert-512 (3
    // groups) lost 0.80x: one row block of 3 tasks on 2 threads.
    Var og("og"), task("task");
    const int group_features = std::max(kWeightPadding, tile_o * kRowBlockOutputTiles);
    const auto row_blocks = [&](Stage s, int block_rows) {
        s.split(p.n, nb, nr, block_rows, TailStrategy::GuardWithIf)
            .split(nr, no, ni, direct_tile_l, TailStrategy::GuardWithIf)
            .split(oo, og, oo, group_features / kWeightPadding, TailStrategy::GuardWithIf)
            .reorder(oi, ni, no, oo, og, nb)
            .fuse(og, nb, task)
            .parallel(task);
        and_direct(s);
    };
    const int block_rows = dot_tiles && tile_l > kBf16DotDirectMaxRows
                               ? kBf16DotBlockRows
                               : knobs.gemm_row_tiles * tile_l;
    const Expr groups = ceil_div(p.out_features, group_features);
    row_blocks(p.result.specialize(groups >= kTallRowBlockMinGroups),
               kTallRowBlockFactor * block_rows);
    row_blocks(p.result, block_rows);

    if (p.acc_direct.defined()) {
        // The direct path's sum: one register tile per row tile of the result, the whole
        // reduction inside it, then stored to the result as it is.
        Var dv("dv"), dl("dl");
        p.acc_direct.compute_at(p.result, no)
            .bound_extent(p.o, tile_o)
            .bound_extent(p.n, direct_tile_l)
            .split(p.o, dv, dl, vec)
            .vectorize(dl)
            .unroll(dv)
            .unroll(p.n);
        const TileReduction direct_reduction =
            p.paired ? TileReduction(std::vector<RVar>{p.r.y}, p.r.x, target)
                     : TileReduction(std::vector<RVar>{p.r.x, p.r.y}, std::nullopt, target);
        order_tile_update(p.acc_direct.update().split(p.o, dv, dl, vec), dl, dv, p.n,
                          direct_reduction);
        if (p.weights_f32.defined()) {
            stage_widened_weights(p.weights_f32.in(p.acc_direct), vec).compute_at(p.result, oo);
        }
    }

    // The register tile: tile_o / vec vectors by tile_l rows of accumulators, with the
    // reduction outside it, so each step loads tile_o / vec weight vectors and broadcasts
    // tile_l inputs into tile_o / vec * tile_l FMAs. A tile as wide as its panel (AVX-512) reads
    // the panel's block from L2 in each tile of rows, so the rows per tile set the L2 traffic
    // per FMA: with 4 x 4 tiles (16 B per FMA) perf put 97% of projection/llama3-8b-prefill's
    // task samples on the inner loop at 0.57 of fma_peak, and the bare loop reached 0.70 from
    // L2 against 0.76 for 6 x 4 (bench/cpu_experiments/register_tile_ceiling.cpp, Intel Xeon
    // with AMX); the tuned x86 file's 6 x 4 tiles (22 per row block, 132 rows) made
    // projection/ 1.07-1.21x faster there (bench/RESULTS.md, 2026-11-29; not measured on a
    // Zen). The reduction over input features is blocked (gemm_k_block features): per block,
    // every register tile of the task's rows runs over the same block of the panel's weights,
    // which then stays in L2, and adds its sums into the task's accumulators. Unblocked, a
    // panel of 64 outputs by 4096 inputs is 1 MiB, L2's size, and every tile streamed it from
    // L3. JIT, 2 threads, Zen 4 (FMA peak about 220 GFLOP/s), rows x in x out: 512 x 4096 x
    // 4096 went from 81 to 151 GFLOP/s with blocks of 256 (144 with 512, 116 with 1024), 512 x
    // 768 x 768 from 185 to 212.
    // The weights come in panels of kWeightPadding outputs (layout.h), so a tile's block of
    // its panel is one contiguous run, read front to back by every tile of the task. Before,
    // as rows of [in, out], each block of a panel was first copied together per task (each
    // step of a tile in place read a new row, 3 to 16 KiB on), and perf put 8-15% of a
    // projection's samples on that copy. With the panels read in place: projection/<shape>,
    // scripts/ab_runs.py, 3 rounds, AVX-512, 2 threads, Zen 5 (branch exp/panel-major):
    // bert-128 1.04x, bert-512 1.09x, bert-512-b8 1.10x, gpt2-causal 1.11x, llama3-8b-prefill
    // 1.05x; with caches evicted first, 1.05-1.10x.
    // The rows are rounded up to a whole tile by the stages' own splits, not bounded on the
    // Func: the split reduction's sum over tasks (a specialization of the update, without the
    // split) then asks its partial sums for only the rows the call has.
    // The accumulators span a whole panel, and a tile narrower than it (AVX2, SSE, NEON) walks
    // the panel's tile columns inside each tile of rows: the rows' inputs are read from L1 by
    // every column, and the block's weights, a quarter of a 64-byte line per step for each
    // column, stay in L1 in blocks of kShortReductionBlock (64) features; AVX2's blocks of
    // kAvx2LongReductionBlock (512, 128 KiB of a panel, for reductions over more than 512) are
    // read from L2, from the staged copy below (gemm_k_block, resolve_cpu_knobs). With one
    // accumulator per tile column, each column read the rows again from L2 and its weights
    // with a 256-byte stride, which maps a block onto a quarter of L1's sets: the AVX2
    // variant's inner loop ran at 0.82 of a core's FMA peak (projection/bert-512, 1 thread,
    // Zen 4), 0.92 now; a C++ model of the two loop orders ran at 0.87 and 0.96.
    Var ov("ov"), ol("ol"), nt("nt"), nl("nl"), oc("oc"), ot("ot");
    p.acc.compute_at(p.result, oo).bound_extent(p.o, kWeightPadding).vectorize(p.o, vec);
    // Features per block along each of the reduction's two dimensions: within a group first,
    // then whole groups (the output projection reduces over heads of head_dim features).
    // Bfloat16 pairs are blocked by pairs.
    RVar xo("xo"), xi("xi"), yo("yo"), yi("yi");
    Var xb("xb"), yb("yb");
    // AVX2's narrow float32 tiles read a copy of each block of their panel's weights, made
    // per task: in a forward the weights come from memory, not from the cache that a
    // projection called again and again keeps them in (attngen_parallel_timeline bert-128 put
    // each of the forward's projections at 1.3x its time alone, bench/RESULTS.md, 2026-12-02).
    // scripts/paired_ab.py, 16 pairs in 4 sessions, 2 threads, Zen 3, old/new:
    // decode/llama3-8b-prefill 1.07x (new faster in 12 of 16 pairs), mha_forward/bert-128 1.06x
    // (15 of 16), bert-512 and gpt2-causal 1.00x. Not measured on SSE or NEON; a tile as wide
    // as its panel (AVX-512) reads each row of the block whole already.
    const bool stage_float_blocks = !p.paired && target.has_feature(Target::AVX2) &&
                                    !tile_spans_panel(knobs.gemm_vectors, target);
    // Float16 weights are widened once per block where the target has no F16C (the SSE4.1 and
    // baseline variants), or where the block is staged anyway (AVX2's narrow tiles): inline,
    // each tile widened every weight vector it read, in Halide's emulated conversion (about 20
    // instructions per 4 weights) on SSE4.1, once per tile of rows, and mha_forward_f16/bert-128
    // took 89.8 ms against 9.8 for float32 weights. ATTNGEN_CPU_DISPATCH=sse41, Zen 4, 2
    // threads, scripts/paired_ab.py --f16, 6 pairs in 2 sessions, old/new: tutorial 5.22x,
    // bert-128 5.48x, bert-512 4.22x, llama3-8b-prefill 5.15x (each 6 of 6); the AVX2 variant
    // 0.975-1.056x, level (bench/RESULTS.md, 2026-12-07).
    const bool stage_widened_halves =
        p.weights_widened.defined() && (stage_float_blocks || !widens_float16_in_one(target));
    // The reduction in blocks of `block` features (pairs: kShortReductionBlock or a panel's
    // bytes), each a register tile's sum added into acc.
    const auto blocks = [&](Stage blocked, int block) {
        Func tile_sums;
        std::vector<VarOrRVar> block_order = {ol, ov, nl, oc, nt};
        if (p.paired) {
            // A tile narrower than a panel takes blocks of the same bytes as float32 (twice the
            // features), the panel's 16 KiB kept in L1 (mha_forward_bf16, AVX2 variant, Zen 4,
            // against blocks of gemm_k_block features: 1.03-1.04x at bert-512 and gpt2-causal).
            // That was before the blocks were staged as float32 (stage_widened_weights): staged,
            // such a block is 32 KiB, not measured on a Zen.
            const int pairs = tile_spans_panel(knobs.gemm_vectors, target)
                                  ? std::max(1, block / kWeightPairs)
                                  : block;
            blocked.split(p.r.y, yo, yi, pairs, TailStrategy::GuardWithIf);
            tile_sums = blocked.rfactor(yo, yb);
            block_order.push_back(yo);
        } else {
            const Expr group = p.r.x.extent();
            blocked.split(p.r.x, xo, xi, min(group, block), TailStrategy::GuardWithIf)
                .split(p.r.y, yo, yi, max(1, block / group), TailStrategy::GuardWithIf);
            tile_sums = blocked.rfactor({{xo, xb}, {yo, yb}});
            block_order.insert(block_order.end(), {xo, yo});
        }
        blocked.split(p.o, oc, ot, tile_o)
            .split(ot, ov, ol, vec)
            .split(p.n, nt, nl, tile_l, TailStrategy::RoundUp)
            .reorder(block_order)
            .vectorize(ol)
            .unroll(ov)
            .unroll(nl);
        if (p.weights_f32.defined()) {
            stage_widened_weights(p.weights_f32.in(tile_sums), vec).compute_at(p.acc, yo);
        } else if (stage_widened_halves || stage_float_blocks) {
            // Each tile column reads 64 bytes of every 256-byte row of its panel's block, a
            // stride that cold weights come from memory at slowly; the copy reads the block
            // front to back once per task, and the tiles read the copy from L2. Float16 blocks
            // are copied widened.
            Func staged = (stage_widened_halves ? p.weights_widened : p.weights).in(tile_sums);
            staged.compute_at(p.acc, xo).vectorize(staged.args()[0], vec,
                                                   TailStrategy::GuardWithIf);
        }
        // The tile's zeros unrolled, each at a constant place, so that LLVM keeps the tile in
        // registers. In a loop over its vectors they were a memset to LLVM, which kept it there
        // too, until its loop idioms were turned off (llvm_options.cpp): then every tile was
        // zeroed on the stack and loaded before its loop, and stored after it, and
        // decode_bf16/llama3-8b-prefill (4096 input features, 512 rows) lost 4%
        // (scripts/paired_ab.py --bf16, AVX512-BF16 variant, Zen 4: unrolled, 1.032x).
        tile_sums.compute_at(p.acc, oc)
            .bound_extent(p.o, tile_o)
            .bound_extent(p.n, tile_l)
            .split(p.o, ov, ol, vec)
            .vectorize(ol)
            .unroll(ov)
            .unroll(p.n);
        const TileReduction reduction =
            p.paired ? TileReduction(std::vector<RVar>{yi}, p.r.x, target)
                     : TileReduction(std::vector<RVar>{xi, yi}, std::nullopt, target);
        order_tile_update(tile_sums.update().split(p.o, ov, ol, vec), ol, ov, p.n, reduction);
    };
    // A tile narrower than a panel over a short reduction (float32), or any bfloat16 pairs on
    // it, keep blocks of kShortReductionBlock (resolve_cpu_knobs); a constant block per
    // specialization, as a block chosen at run time inside one schedule cost the tutorial
    // shapes 0.95x.
    const int block = knobs.gemm_k_block;
    const bool narrow = !tile_spans_panel(knobs.gemm_vectors, target);
    const int short_block = std::min(block, kShortReductionBlock);
    if (narrow && !p.paired && block > short_block) {
        const Expr in_features = p.r.x.extent() * p.r.y.extent();
        blocks(p.acc.update().specialize(in_features > kShortReductionFeatures), block);
    }
    blocks(p.acc.update(), narrow ? short_block : block);
}

void schedule_weight_pack_cpu(Func pack, const Target &target) {
    // Tiles of vec x vec: each vector of the tile gathers one float from vec rows of the
    // [out, in] weight, and the vec gathers of a tile read those rows' same cache line, which
    // stays in L1 for all of them. Vectorized along o alone, each gather's lines were evicted
    // before the next feature used them: attngen_linear (attngen_bench linear/, 3 alternating
    // runs) went from 0.51 to 0.24 ms at tutorial-cross and 1.22 to 0.93 ms at bert-128 with
    // the tiles. The staged transpose of schedule_transpose measured slower here (1.84 ms at
    // bert-128).
    const Var o = pack.args()[0], f = pack.args()[1], panel = pack.args()[2];
    const int vec = vector_width(target);
    Var oo("oo"), fo("fo"), oi("oi"), fi("fi"), task("task");
    pack.compute_root()
        .tile(o, f, oo, fo, oi, fi, vec, vec, TailStrategy::GuardWithIf)
        .vectorize(oi)
        .unroll(fi)
        .fuse(fo, panel, task)
        .parallel(task);
}

}  // namespace attngen
