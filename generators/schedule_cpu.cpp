#include "schedule_cpu.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "layout.h"

namespace attngen {

using namespace Halide;

namespace {

int vector_width(const Target &target) {
    return target.natural_vector_size<float>();
}

// AArch64 (NEON) and AVX-512 have 32 vector registers, AVX2 and SSE 16. Halide 21 implies no
// feature from another: a target string of avx512_skylake or avx512_zen4, as the dispatch
// variants are named, lacks Target::AVX512 itself, so each flavour is asked for. (Asking for
// AVX512 alone gave the AVX-512 variants AVX2's tiles.)
bool wide_register_file(const Target &target) {
    return target.arch == Target::ARM ||
           target.features_any_of({Target::AVX512, Target::AVX512_KNL, Target::AVX512_Skylake,
                                   Target::AVX512_Cannonlake, Target::AVX512_Zen4,
                                   Target::AVX512_Zen5, Target::AVX512_SapphireRapids});
}

int vector_registers(const Target &target) {
    return wide_register_file(target) ? 32 : 16;
}

// Whether a projection register tile of `vectors` vectors covers a whole weight panel: a
// narrower one shares its panel's blocks of weights with the next tile columns.
bool tile_spans_panel(int vectors, const Target &target) {
    return vectors * vector_width(target) >= kWeightPadding;
}

// Whether a register tile of `vectors` vectors by `rows` rows fits the target's registers: it
// keeps vectors * rows accumulators plus `vectors` loaded operands and one broadcast live.
bool tile_fits(int vectors, int rows, const Target &target) {
    return vectors * rows + vectors + 1 <= vector_registers(target);
}

// Decoding's attention rows are the query heads of a key/value head times q_len: 1 for MHA,
// 4 to 8 for the GQA models at one token per step. Its score tiles have at most this many
// rows: rounded up to a tile tuned for prefill (8 rows), long-decode computed twice its
// scores.
constexpr int kDecodeTileRows = 4;
// Value features in a decoding probs x values tile, at most: for heads up to the narrow width
// (GPT-2's 64, the smallest of the decode shapes attngen is measured on), and for wider ones
// (Llama's 128).
constexpr int kDecodeNarrowValueTile = 64;
constexpr int kDecodeWideValueTile = 128;

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

// Input features per block of a projection's reduction where the register tile is narrower than
// a weight panel and the reduction short (at most kShortReductionFeatures): the panel's block,
// 16 KiB, then stays in L1 for the tile columns after the first. Longer reductions take
// gemm_k_block (resolve_cpu_knobs).
constexpr int kShortReductionBlock = 64;
constexpr int kShortReductionFeatures = 512;
// gemm_k_block derived for AVX2's narrow tiles, used past kShortReductionFeatures
// (resolve_cpu_knobs has the measurements).
constexpr int kAvx2LongReductionBlock = 512;

// Rows of a register tile of vdpbf16ps on a projection's direct path, at most, and the rows of
// a block of its projections where the knobs' tiles are taller (schedule_projection_cpu).
constexpr int kBf16DotDirectMaxRows = 4;
constexpr int kBf16DotBlockRows = 128;

// A projection whose input is at most this large makes panels of output features its parallel
// tasks (schedule_projection_cpu): the input, and a panel of weights, then stay in L2 (1 MiB
// per core on the x86 server CPUs attngen is measured on).
constexpr int64_t kPanelTasksMaxInputBytes = 640 * 1024;

// a / b rounded up, for non-negative a and positive b.
Expr ceil_div(const Expr &a, const Expr &b) {
    return (a + b - 1) / b;
}

// An attention task takes several query blocks where each is small, up to about this many
// elements of work (rows x keys x head size; a bert-128 block of 16 rows is one task). The
// tutorial shape's 256 heads of 10 queries and 20 keys made two loops of 256 tasks, 381 and
// 210 us of a 6.4 ms forward for 6.5 MFLOP; in 26 tasks of 10 heads, 279 and 148 us
// (attngen_parallel_timeline), sdpa/tutorial 1.06x (scripts/ab_runs.py, 3 rounds, Zen 4). At
// most 16 blocks, so that a loop still has several tasks per core to balance.
constexpr int kAttentionTaskElements = 1 << 17;
constexpr int kAttentionMaxBlocksPerTask = 16;

// Parallel tasks over (query block, head, batch): enough of them to fill the cores even at
// batch 1 with a single head (long sequences), each one small enough to stay in L2. Returns
// the loop of one query block, inside its task; `rows` (a block's rows in use) and
// `head_elements` (PackedScore) size the work of a block.
Var split_query_blocks(Func f, const Var &row, const Var &h, const Var &b, const Expr &query_block,
                       const Expr &rows, const Expr &head_elements) {
    Var row_block("row_block"), row_in_block("row_in_block"), task("task");
    Var block_in_task("block_in_task");
    const Expr work = max(cast<int64_t>(rows) * head_elements, 1);
    const Expr per_task = cast<int>(clamp(Expr(int64_t(kAttentionTaskElements)) / work, 1,
                                          Expr(int64_t(kAttentionMaxBlocksPerTask))));
    f.split(row, row_block, row_in_block, query_block, TailStrategy::GuardWithIf)
        .fuse(row_block, h, block_in_task)
        .fuse(block_in_task, b, block_in_task)
        .split(block_in_task, task, block_in_task, per_task, TailStrategy::GuardWithIf)
        .parallel(task);
    return block_in_task;
}

// A transposing copy, f(x, y) = source(y, x, ...) with y dense in the source: tiles of
// vec x vec, each staged through a small buffer filled with dense vector loads of the source
// and read back transposed. For the keys (head_dim 64) it took the packing from 3.4% to 2.1%
// of an attngen_sdpa call at bert-512 (perf, two runs each); vectorized along x alone, every
// lane was a separate scalar load.
// y_extent is the extent of y that f's consumers ask for, from 0, never more: where it is at least
// a tile (y_extent >= vec), the last tile is shifted inwards, not guarded, so that the tile's
// strided reads of the buffer are one block, which LLVM partly combines into permutes.
// attngen_parallel_timeline bert-512, AVX-512, Zen 4, with the source staged by its unclamped key
// (stages.cpp, k_rows): the keys' panels 124 -> 107 us, the bfloat16 keys' rows 125 -> 106 us;
// sdpa/tutorial 1.02x (scripts/ab_runs.py, 3 rounds), the forwards level. With `specialize_on`
// defined, the staging has a branch for it as well (the source is an inline expression that it
// simplifies).
// x_tail is RoundUp where f may be computed past its consumers' region along x (f is not an
// output and its source may be read there): the last tile of x is then whole, not guarded.
void schedule_transpose(Func f, Func source, const Var &x, const Var &y, const Expr &y_extent,
                        int vec, TailStrategy x_tail, const Expr &specialize_on = Expr()) {
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

// A packing task takes several heads where each is small, up to about this many elements:
// the tutorial shape's 256 heads of 20 keys made loops of 256 tasks of 1280 elements each.
// scripts/ab_runs.py, AVX-512, Zen 4, 3 rounds: mha_forward/tutorial 1.04x,
// mha_forward_bf16/tutorial 1.01x, bert-128 and tutorial-cross level (2 and 1 heads a task).
constexpr int kPackingTaskElements = 16384;
constexpr int kPackingMaxHeadsPerTask = 16;

// Keys transposed, into panels (jl, d, jp, h, b) where the attention asked for them
// (PackedScore::k_panels) or to (j, d, h, b), and values copied to panels of a tile's features
// (PackedScore::v_panels) or to (c, j, h, b), at root, one task per few heads
// (kPackingTaskElements). Bfloat16 pairs (PackedScore::paired) are made from two rows of the
// transposed keys each, contiguous along the keys (or the value features), interleaved: a
// vector of keys (or features) per row of the pair, the two stored as one interleaved vector.
// (Vectorized over (e, j) together, each vector was a gather: its lanes read two rows, and the
// features' clamp was per lane. attngen_parallel_timeline bert-512 bf16, AVX512-BF16 variant,
// Zen 4: key pairs 107 -> 33 us, value pairs 156 -> 40 us of a 9.7 ms call.)
void schedule_key_value_packing(const PackedScore &p, int vec) {
    Func k_packed = p.k_packed, v_packed = p.v_packed;
    const std::vector<Var> v = v_packed.args();
    Var hb("hb");
    const bool panels = p.k_panels.defined();
    Func keys = panels ? p.k_panels : p.k_transposed;
    const std::vector<Var> k = keys.args();  // (jl, d, jp, h, b) or (j, d, h, b)
    const Expr heads_per_task =
        clamp(kPackingTaskElements / max(p.head_elements, 1), 1, kPackingMaxHeadsPerTask);
    keys.compute_root()
        .fuse(k[k.size() - 2], k.back(), hb)
        .parallel(hb, heads_per_task, TailStrategy::GuardWithIf);
    if (panels) keys.bound(k[0], 0, kKeyPanel);
    // k_source reads every key past kv_len as the last key (clamped), so a whole last tile of a
    // head's keys reads nothing outside k, and it is computed whole: guarded, the tutorial's
    // heads of 20 keys took their last 4 one by one, in a loop of scalar loads and masked
    // stores. attngen_parallel_timeline tutorial 300 bf16, AVX512-BF16 variant, Zen 4, two
    // runs: the keys' transpose 173 -> 136 and 154 us of a 3.2 ms call; the float32 forward's
    // packing loop level (146-159 us).
    schedule_transpose(keys, p.k_source, k[0], k[1], p.dk, vec, TailStrategy::RoundUp,
                       p.sources_unrotated);
    if (p.v_panels.defined()) {
        // Row by row: each value row is read once, front to back, into value_tile-wide runs.
        Func panels = p.v_panels;
        const std::vector<Var> w = panels.args();  // (cl, j, cp, hk, b)
        panels.compute_root()
            .bound(w[0], 0, p.value_tile)
            .reorder(w[0], w[2], w[1], w[3], w[4])
            .fuse(w[3], w[4], hb)
            .parallel(hb, heads_per_task, TailStrategy::GuardWithIf)
            .vectorize(w[0], vec);
        return;
    }
    if (!p.paired) {
        v_packed.compute_root()
            .fuse(v[2], v[3], hb)
            .parallel(hb, heads_per_task, TailStrategy::GuardWithIf)
            .vectorize(v[0], vec);
        return;
    }
    for (Func pairs : {k_packed, v_packed}) {
        const std::vector<Var> a = pairs.args();  // (e, j or c, p, h, b)
        Var outer("outer"), inner("inner");
        pairs.compute_root()
            .fuse(a[3], a[4], hb)
            .parallel(hb, heads_per_task, TailStrategy::GuardWithIf)
            .bound(a[0], 0, 2)
            .split(a[1], outer, inner, vec, TailStrategy::GuardWithIf)
            .reorder(inner, a[0], outer)
            .vectorize(inner)
            .unroll(a[0]);
    }
}

// The queries of one query block, computed once per block: with rotary positions they are
// rotated here, not again at every key tile. Paired or rounded, they are rounded to bfloat16
// here.
void schedule_query_tile(const PackedScore &p, const LoopLevel &block, int vec) {
    Func q = p.q_operand;
    const std::vector<Var> a = q.args();
    q.compute_at(block);
    // The common case, loaded as vectors and copied: no rotation, an even head size.
    Expr common = p.sources_unrotated;
    if (p.q_even_features.defined()) {
        common = common.defined() ? common && p.q_even_features : p.q_even_features;
    }
    if (p.paired) {
        // (e, p, i): stored with each pair of the rows together, (e, i, p), so that the score
        // tile's rows are one address apart by a constant; stored by rows, (e, p, i), LLVM
        // kept the tile's row addresses in a vector and extracted each at every step (14
        // instructions beside the 16 vdpbf16ps of the score tile's loop).
        // In tiles of vec / 2 rows by 8 pairs, each staged from dense vectors of its rows
        // (q_rows, by unclamped row) and read back at constant offsets; in the common
        // specialization (no rotation, an even head size) the pairs unrolled, so that every
        // store is one dense vector. A tile's pairs are one vector of each staged row (pairs
        // exist only where vdpbf16ps does: 8 pairs, 16 features), whose storage is
        // constant-size so that it lives on the stack (as schedule_transpose's tiles).
        // Vectorized over (e, rows) from the queries themselves, each vector was 16 scalar
        // loads at lanes' own clamped rows: perf put 15% of the bfloat16 attention task at
        // bert-128 there (AVX512-BF16 variant, Zen 4), 5.5% with the tiles; pairs vectorized
        // as well made the stores 128 scalar ones. mha_forward_bf16/bert-128 1.02x, bert-512,
        // gpt2-causal and tutorial-cross level (scripts/ab_runs.py, 5 rounds, noisy host).
        const int rows = vec / 2, pairs = vec / 2;
        Var po("po"), pi("pi"), io("io"), ii("ii");
        q.reorder_storage(a[0], a[2], a[1])
            .bound(a[0], 0, 2)
            .split(a[2], io, ii, rows, TailStrategy::GuardWithIf)
            .split(a[1], po, pi, pairs, TailStrategy::GuardWithIf)
            .reorder(a[0], ii, pi, io, po)
            .vectorize(a[0])
            .vectorize(ii);
        const std::vector<Var> r = p.q_rows.args();
        Func q_rows = p.q_rows;
        q_rows.compute_at(q, io)
            .bound_storage(r[0], 2 * pairs)
            .bound_storage(r[1], rows)
            .vectorize(r[0], vec, TailStrategy::GuardWithIf);
        if (common.defined()) q.specialize(common).unroll(pi);
        return;
    }
    q.vectorize(a[0], vec, TailStrategy::GuardWithIf);
    if (common.defined()) q.specialize(common);
}

// The condition on which the probs x values tile reads the values in place, as a specialization
// of the tile (none where define_packed_score had no value_tile). Checks that the tile is the
// one the values were defined for: a wider tile would read past a head.
std::vector<Expr> values_in_place(const PackedScore &p, const CpuScheduleKnobs &knobs,
                                  const Target &target) {
    if (!p.values_in_place.defined()) return {};
    const int tile = cpu_value_tile(knobs, target);
    if (p.value_tile != tile) {
        throw CompileError("values in place for tiles of " + std::to_string(p.value_tile) +
                           " features, but the schedule's tile is " + std::to_string(tile));
    }
    return {p.values_in_place};
}

// Tiles of values' features start at multiples of the value tile, so that Halide proves each
// vector of a tile lies in one of v_panels' panels and loads it whole (at the output's min,
// not known to be one, every load was a gather: sdpa 2x the time).
void align_value_tiles(const PackedScore &p, Func tile, const Var &features) {
    if (p.v_panels.defined()) tile.align_bounds(features, p.value_tile);
}

// The reduction of a register tile: its steps (innermost first), and with bfloat16 products
// (ProjectionStage::paired, PackedScore::paired) a pair of features inside each step. A pair
// becomes one vdpbf16ps lane where the target has it; elsewhere its two products are unrolled
// FMAs.
struct TileReduction {
    TileReduction(const RDom &r) : steps{r.x} {}  // NOLINT: a 1-D RDom is the common case
    // A 2-D RDom whose x is the pair when paired.
    TileReduction(const RDom &r, bool paired, const Target &target)
        : TileReduction(paired ? std::vector<RVar>{r.y} : std::vector<RVar>{r.x},
                        paired ? std::optional<RVar>(r.x) : std::nullopt, target) {}
    TileReduction(std::vector<RVar> steps, std::optional<RVar> pair, const Target &target)
        : steps(std::move(steps)),
          pair(std::move(pair)),
          dot_product(this->pair && has_bfloat16_dot_product(target)) {}
    std::vector<RVar> steps;
    std::optional<RVar> pair;
    bool dot_product = false;
};

// A register tile's update, the loops of one step innermost: the lanes of the columns
// vectorized, their vectors and the rows unrolled, then the reduction's steps.
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

// A register-blocked reduction computed inside a larger loop nest (a query block of attention,
// or a key block of it): `vectors` vectors along `columns` by `rows_per_tile` rows of
// accumulators, unrolled, with the reduction loop just outside them, so each step of the
// reduction loads `vectors` vectors and broadcasts `rows_per_tile` scalars. A wrapper Func covers
// the region `at` needs in whole tiles, and the reduction is computed per tile into a buffer of
// constant size, fully unrolled, which LLVM keeps in registers. (Scheduled directly at `at`, the
// accumulators of the probs x values tile stayed in memory: a load, an FMA and a store per step,
// which perf showed as half the kernel's time.)
// With `shapes`, calls where a shape's `when` holds (the first that does) get tiles of its
// `vectors` vectors by `rows` rows instead, each specialization with constant tiles of its own.
struct TileShape {
    Expr when;
    int vectors, rows;
};
// How a tile's Func reads the accumulators: in loops over its rows and vectors, or unrolled.
// Unrolled, every read is at a constant place in acc's constant-size buffer, and LLVM takes it
// from the register that holds it instead of storing the tile and loading it back. The flash
// kernel's two tiles take it: in its scores' loop LLVM had kept three of the eight row pointers
// of the broadcasts on the stack (reloaded at every step, perf of sdpa/bert-512, Intel Xeon
// with AMX), and the block's logits loaded each accumulator from memory. With both unrolled,
// scripts/ab_runs.py, 3 rounds, AVX-512, 2 threads, same host: sdpa/ bert-128 1.02x, bert-512
// 1.03x, bert-512-b8 1.02x, gpt2-causal 1.01x, long-causal 1.04x, long-single 1.03x;
// mha_forward/ 0.99-1.04x; AVX2 variant, sdpa/ 1.00-1.03x (bench/RESULTS.md, 2026-11-29).
// The other tiles keep the loops: the decode kernel's (several shapes each) lost with them
// unrolled, decode/llama3-8b-decode 0.91x (2 rounds); the attention that also returns the
// weights (schedule_attention_cpu) was not measured apart.
enum class TileCopy { Loops, Unrolled };
// schedule_register_tile_into: the tiles are those of `tile`, a pure Func over (tile_columns,
// tile_rows) in place of the wrapper, which reads each accumulator of acc once, at the same
// position in its tile, so that it takes the accumulators from registers. Each condition in
// `when` gives `tile` a specialization of its own, with the same tiles.
void schedule_register_tile_into(Func acc, Func tile, const LoopLevel &at, const Var &columns,
                                 const Var &rows, const Var &tile_columns, const Var &tile_rows,
                                 const TileReduction &reduction, int vectors, int rows_per_tile,
                                 int vec, const std::vector<TileShape> &shapes = {},
                                 const std::vector<Expr> &when = {},
                                 TileCopy copy = TileCopy::Loops) {
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
    acc.compute_at(tile, co).vectorize(columns, vec).unroll(rows);
    // With several shapes, each specialization's tile is a constant of its own.
    if (shapes.empty()) acc.bound_extent(columns, vectors * vec).bound_extent(rows, rows_per_tile);
    order_tile_update(acc.update().split(columns, cv, cl, vec), cl, cv, rows, reduction);
}

void schedule_register_tile_at(Func acc, const LoopLevel &at, const Var &columns, const Var &rows,
                               const TileReduction &reduction, int vectors, int rows_per_tile,
                               int vec, const std::vector<TileShape> &shapes = {},
                               const std::vector<Expr> &when = {},
                               TileCopy copy = TileCopy::Loops) {
    schedule_register_tile_into(acc, acc.in(), at, columns, rows, columns, rows, reduction, vectors,
                                rows_per_tile, vec, shapes, when, copy);
}

// Per head, keys and values beyond this many bytes are "long": query blocks of long_query_block
// then amortize streaming them from L3 (L2 is 1-2 MiB per core on the CPUs attngen targets).
// (query_block 16 suits bert-512, whose 256 KiB of keys and values per head stay in L2; at
// long-single, 8 MiB per head, it took 1979 ms against about 480 ms with 128.)
constexpr int64_t kLongKeyValueBytes = 512 * 1024;

// At most this many rows, a decoding projection splits its reduction (schedule_split_reduction).
constexpr int kSplitReductionMaxRows = 8;
// At most this many splits per row, the decode kernel merges them on one thread.
constexpr int kDecodeSerialMergeSplits = 8;
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

}  // namespace

bool has_bfloat16_dot_product(const Target &t) {
    return (t.has_feature(Target::AVX512_Zen4) || t.has_feature(Target::AVX512_Zen5)) &&
           !uses_amx(t);
}

bool uses_amx(const Target &t) {
    return t.has_feature(Target::AVX512_SapphireRapids);
}

Expr flash_query_block(const CpuScheduleKnobs &requested, const Target &target, const Expr &kv_len,
                       const Expr &dk, const Expr &dv, const Expr &causal) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const Expr kv_bytes = cast<int64_t>(kv_len) * (dk + dv) * int(sizeof(float));
    // A causal call computes, in the key block that holds its query block's diagonal, up to a
    // query block's height of masked keys per query. There long blocks cost more than their
    // streaming saves: at long-causal (sdpa, 2 alternating rounds against 128 rows), 32 rows
    // took 0.95x the time, 16 and 64 rows 0.97x.
    const int long_causal_query_block = std::min(knobs.long_query_block, 2 * knobs.query_block);
    return select(kv_bytes <= Expr(kLongKeyValueBytes), knobs.query_block, causal != 0,
                  long_causal_query_block, knobs.long_query_block);
}

int cpu_value_tile(const CpuScheduleKnobs &requested, const Target &target) {
    return resolve_cpu_knobs(requested, target).out_vectors * vector_width(target);
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

// Projections over at most this many input features take the direct path (DirectPath) where
// a register tile spans a weight panel: a panel of kWeightPadding outputs by 1024 features is
// 256 KiB, which stays in L2 while every row tile of a task reads it whole. Blocked instead,
// each tile's partial sums went through a task's buffer of 64 outputs by its rows (32 KiB at
// 128 rows, all of L1), and copying it to the result took 3.4% of a projection's samples at
// bert-512 and 5.7% at bert-128 (perf: the stores, to lines last written by the previous
// call). scripts/ab_runs.py, AVX-512, 2 threads, Zen 4, 3-5 rounds: mha_forward/bert-128
// 1.02-1.08x (three runs), bert-512 and bert-512-b8 1.01x, gpt2-causal, long-causal level;
// mha_forward_bf16/bert-128 1.09x, bert-512 1.03-1.05x, bert-512-b8 1.08x; projection/bert-128
// 1.03-1.08x.
constexpr int kDirectMaxInFeatures = 1024;

DirectPath cpu_direct_path(const Target &target, const CpuScheduleKnobs &requested) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    if (knobs.gemm_vectors * vector_width(target) != kWeightPadding) return {};
    return DirectPath{kSplitReductionMaxRows, kDirectMaxInFeatures};
}

namespace {

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

// The bfloat16 or float16 operand of a projection, where it has one.
void schedule_projection_operand(ProjectionStage &p, int vec) {
    if (!p.operand.defined()) return;
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
    // In parallel over blocks of rows only for more than a decoding step's: a loop of one
    // task still wakes the threads, and a bfloat16 GPT-2 step ran five of them.
    const std::vector<Var> a = p.operand.args();
    const Expr many_rows = p.rows > kSplitReductionMaxRows;
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

// An AMX product (ProjectionStage::amx_tiles, AmxAttention): `out`(x, y, t, ...), the copy of
// `tiles` to memory, computed at `at` in tiles of kAmxTile x kAmxTile over (x, y), the tiles of
// t inside those of y; `tiles` computed per tile in a tile register, its reduction r's blocks
// outside the tile and each block (r.x) one tdpbf16ps. `out` is stored as (x, t, y, ...): a
// tile's rows are then a stride apart that is not its width, the 2-D store that Halide 21 turns
// into tilestored (stored (x, y, t), a tile was one dense run of 256 floats, which it does not).
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

// Rows per parallel task of the copy of an AMX projection's result (ProjectionStage::
// amx_result).
constexpr int kAmxCopyRowsPerTask = 64;

// Tile rows (of 64 bytes) per parallel task of the AMX attention's copies of keys and values.
constexpr int kAmxPackingRowsPerTask = 1024;

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
    Var oo("oo"), oi("oi"), nb("nb"), ni("ni"), task("task");
    result.compute_root()
        .split(o, oo, oi, kAmxTaskOutputs, TailStrategy::GuardWithIf)
        .split(n, nb, ni, kAmxTaskRows, TailStrategy::GuardWithIf)
        .vectorize(oi, vec, TailStrategy::GuardWithIf)
        .reorder(oi, ni, oo, nb)
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
    schedule_amx_product(p.amx_out, p.amx_tiles, p.r_amx, LoopLevel(result, task));
}

}  // namespace

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
    // calls that take it: the same loops over the same tasks, the sum from acc_direct.
    const auto and_direct = [&](Stage s) {
        if (p.acc_direct.defined()) s.specialize(p.direct);
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
        } else if (stage_float_blocks) {
            // Each tile column reads 64 bytes of every 256-byte row of its panel's block, a
            // stride that cold weights come from memory at slowly; the copy reads the block
            // front to back once per task, and the tiles read the copy from L2.
            Func staged = p.weights.in(tile_sums);
            staged.compute_at(p.acc, xo).vectorize(staged.args()[0], vec,
                                                   TailStrategy::GuardWithIf);
        }
        tile_sums.compute_at(p.acc, oc)
            .bound_extent(p.o, tile_o)
            .bound_extent(p.n, tile_l)
            .vectorize(p.o, vec)
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

void schedule_decode_attention_cpu(DecodeAttentionStage &a, const Target &target,
                                   const CpuScheduleKnobs &requested, const Type &cache_element,
                                   const Expr &unrotated) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const int vec = vector_width(target);
    const Var &j = a.j, &r = a.r, &c = a.c, &d = a.d, &hk = a.hk, &b = a.b, &u = a.u, &s = a.s;

    // Without rotary positions, a branch without the rotation: in the generic branch the
    // rotation's partner reads were per-lane loads, about 2 us of a GPT-2 step's 141 on the
    // calling thread (perf, Zen 4); the gap before the split loop went from 3.0-3.4 to 1.2-1.5
    // us (attngen_parallel_timeline gpt2-decode).
    a.q_rows.compute_root().vectorize(d, vec, TailStrategy::GuardWithIf);
    a.q_rows.specialize(unrotated);

    // A task reads its split of one key/value head's cache once for every query row of the
    // group: the memory traffic a decoding step cannot avoid.
    Var task("task");
    a.split_out.compute_root()
        .reorder(c, r, s, hk, b)
        .fuse(s, hk, task)
        .fuse(task, b, task)
        .parallel(task)
        .vectorize(c, vec, TailStrategy::GuardWithIf);
    const LoopLevel at(a.split_out, task);
    // A score tile spans one block of the cache's keys (kCacheKeyBlock positions), or as much
    // of it as the registers hold, so that it reads one contiguous run of memory: a tile of two
    // blocks read two runs 16 KiB apart (float32, 128-wide heads). decode/long-decode, 2
    // threads, Zen 5, scripts/ab_runs.py, 3 rounds, 2 vectors of 16 keys against 4: float32
    // 7.72 -> 7.05 ms (1.10x), bfloat16 4.73 -> 4.13 ms (1.13x); llama3-8b-decode level.
    // Where a whole block's tile of kDecodeTileRows rows does not fit (AVX2, SSE), a float32
    // cache gives up rows before keys: a step of a block is 32 floats, two cache lines, and a
    // tile of half the block read one line of each pair in a pass 128 bytes apart, the other in
    // a second pass, each a stream of half the lines from memory. With the whole block in tiles
    // of 2 rows, each pass reads every line in turn (the second row tile from L1).
    // scripts/ab_runs.py, AVX2 variant, 2 threads, Zen 3, 4 vectors x 2 rows against 2 x 4:
    // decode/long-decode 1.16x and 1.17x (two runs of 3 and 4 rounds, 6 of 7 rounds at 1.09x
    // or more), llama3-8b-decode-b8 1.07x, llama3-8b-decode 1.02x, gpt2-decode 1.06x (one-row
    // tiles of 4 vectors). A 16-bit cache's step is one line, which both passes read, and
    // halving the rows doubled the widening of each key vector instead: decode_bf16/long-decode
    // 0.96x and 0.94x (two runs of 4 rounds), so those keep the rows. Not measured on aarch64
    // (qemu's timings mean nothing), whose tiles stay as they were.
    int score_rows = std::min(knobs.score_rows, kDecodeTileRows);
    int score_vectors = std::max(1, kCacheKeyBlock / vec);
    if (target.arch == Target::X86 && cache_element.bits() == 32) {
        while (score_rows > 2 && !tile_fits(score_vectors, score_rows, target)) score_rows /= 2;
    }
    while (score_vectors > 1 && !tile_fits(score_vectors, score_rows, target)) score_vectors /= 2;
    // One query row (a step of multi-head attention without grouped heads) gets tiles of one
    // row: the tiles of several rows computed the last row again in the others, 4x the score's
    // and 2x the values' multiply-adds at gpt2-decode. Its accumulators (two on AVX-512) do not
    // hold the step back: one-row tiles of two blocks (4 vectors, 4 chains of FMAs) took 1.02x
    // the time at decode/gpt2-decode and 1.06-1.14x over 1025-1300 keys, whose splits they round
    // up (scripts/ab_runs.py, 3 rounds, AVX-512, 2 threads, Zen 4; bench/RESULTS.md).
    const Expr one_row = a.rows == 1;
    schedule_register_tile_at(a.score, at, j, r, a.r_dot, score_vectors, score_rows, vec,
                              {{one_row, score_vectors, 1}});
    a.logit.compute_at(at).vectorize(j, vec);
    for (Func f : {a.max_lanes, a.sum_lanes}) {
        f.compute_at(at).vectorize(u, vec);
        f.update().vectorize(u, vec);
    }
    a.split_max.compute_at(at);
    a.split_sum.compute_at(at);
    a.probs.compute_at(at).vectorize(a.k, vec);
    // The values likewise, in tiles of 2 rows: as wide as the registers hold, up to
    // kDecodeWideValueTile features for heads wider than kDecodeNarrowValueTile and up to
    // kDecodeNarrowValueTile for the others. A tile rounds the value head up to whole tiles:
    // one width for every head size gave up one shape or the other. decode/<shape>, AVX-512
    // variant, medians of 2 interleaved rounds, 2 threads, Zen 4, 8 vectors against 4:
    // gpt2-decode (64 wide: half of every 128-wide tile computed and discarded) 0.94 against
    // 0.39 ms; long-decode (128 wide, one pass over each value row instead of two) 14.6
    // against 16.5 ms.
    const auto value_vectors = [&](int features) {
        int vectors = std::max(1, features / vec);
        while (vectors > 1 && !tile_fits(vectors, 2, target)) vectors /= 2;
        return vectors;
    };
    const int narrow = value_vectors(kDecodeNarrowValueTile);
    const int wide = value_vectors(kDecodeWideValueTile);
    // A tile's columns past the head read the padding of the cache's last panel (layout.h,
    // kCacheValuePanel), so every tile loads whole vectors, whatever the head size. (With the
    // columns clamped to the head, every load of a tile that might pass it had been a gather:
    // gpt2-decode's bfloat16 step, 64-wide heads, took 0.252 ms against 0.120 with a
    // specialization for heads of exactly 64, one run, Zen 5.)
    const Expr wider = a.dv > kDecodeNarrowValueTile;
    std::vector<TileShape> shapes;
    if (wide != narrow) shapes = {{one_row && wider, wide, 1}, {wider, wide, 2}};
    shapes.push_back({one_row, narrow, 1});
    schedule_register_tile_at(a.split_acc, at, c, r, a.r_keys, narrow, 2, vec, shapes);

    // The merge, per key/value head and batch row; in parallel only for many splits. Each
    // parallel loop of a step wakes the other threads and waits for them, and with few splits
    // that costs more than the merge. With the small stages of a step on one thread (this
    // merge, the rotations, the angle tables, the sums of split reductions, the rows appended
    // to the cache), a GPT-2 step ran 9 parallel loops instead of 17: decode/gpt2-decode
    // 1.02x faster in float32, 1.08x in bfloat16 (scripts/ab_runs.py, 5 rounds, 2 threads,
    // Zen 5); the other decode shapes level.
    Var hb("hb");
    a.rows_out.compute_root().fuse(hk, b, hb).vectorize(c, vec, TailStrategy::GuardWithIf);
    a.rows_out.specialize(a.num_splits > kDecodeSerialMergeSplits).parallel(hb);
    for (Func f : {a.total_max, a.total_sum, a.split_weight}) f.compute_at(a.rows_out, hb);
    a.merged.compute_at(a.rows_out, hb).vectorize(c, vec, TailStrategy::GuardWithIf);
    a.merged.update().vectorize(c, vec, TailStrategy::GuardWithIf);
}

void schedule_cache_key_rows_cpu(Func rows, Func rotated, const Expr &positions, const Expr &items,
                                 const Expr &features, const Expr &unrotated, const Target &target,
                                 const Expr &key_feature_stride) {
    const std::vector<Var> a = rows.args();  // (l, d, hk, b)
    const int vec = vector_width(target);
    Var hb("hb");
    const Expr heads_and_items =
        rows.output_buffer().dim(2).extent() * rows.output_buffer().dim(3).extent();
    // One task for as few rows as a decoding step appends: waking the threads costs more. A task
    // size, not a specialization as for the values: each specialization here would copy the
    // tiles' own two.
    const Expr many_rows = positions * items > kSplitReductionMaxRows;
    rows.fuse(a[2], a[3], hb)
        .parallel(hb, select(many_rows, 1, heads_and_items), TailStrategy::GuardWithIf);
    // Tiles of vec x vec transposed from the rotated keys (schedule_transpose), which are
    // computed along their dense features. Vectorized along the positions instead, every lane
    // of the rotation read its key a row of features apart: a llama3-8b-prefill's keys (512
    // positions of 8 heads of 128) took 2.9 ms, 1.9 ms in tiles (attngen_parallel_timeline,
    // Intel Xeon, 2 threads). The rest is the rotation's own gathers, which read both the half
    // and the interleaved partner (the rotary layout is not specialized on; no rotation is).
    // A step's few positions are not a vector: its tiles store along the features, positions
    // apart (for one position dense). Halide stages the tile at the same loop (xo) in every
    // specialization, so they keep the tiles' loops. A GPT-2 step's 768 keys: 8.1 us stored
    // along the positions, 6.7 us along the features; perf put the append outside its
    // projections at 0.13 of the query projection's time before the tiles, 0.11 with them.
    Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
    Stage few = rows.specialize(positions < vec);
    few.split(a[0], xo, xi, vec, TailStrategy::GuardWithIf)
        .split(a[1], yo, yi, vec, TailStrategy::GuardWithIf)
        .reorder(yi, xi, xo, yo)
        .vectorize(yi);
    // A step's keys (features dense) without rotary positions get a branch of their own: in
    // the tile's generic branch LLVM hoisted the rotation's per-lane partner indices above the
    // test of the mode, and a GPT-2 step's 48 tiles took 4.3 us of a 141 us step, 0.5 us in
    // their own branch (attngen_parallel_timeline gpt2-decode, Zen 4). With the query rows'
    // branch (schedule_decode_attention_cpu), scripts/paired_ab.py, 2 threads, Zen 4, old/new:
    // decode/gpt2-decode 1.053x (new faster in 13 of 15 pairs), bfloat16 1.051x (11 of 12);
    // llama3-8b-decode, its prefill and long-decode (rotated) level.
    few.specialize(key_feature_stride == 1).specialize(unrotated);
    schedule_transpose(rows, rotated, a[0], a[1], features, vec, TailStrategy::GuardWithIf,
                       unrotated);
}

void schedule_cache_value_rows_cpu(Func rows, const Expr &positions, const Expr &items,
                                   const Target &target) {
    const std::vector<Var> a = rows.args();  // (c, l, hk, b)
    Var hb("hb");
    rows.fuse(a[2], a[3], hb).vectorize(a[0], vector_width(target), TailStrategy::GuardWithIf);
    rows.specialize(positions * items > kSplitReductionMaxRows).parallel(hb);
}

void schedule_rope_angles_cpu(Func angles, const Target &target, const RopeInputs &rope) {
    const std::vector<Var> a = angles.args();
    Var lb("lb");
    angles.compute_root()
        .fuse(a[1], a[2], lb)
        .vectorize(a[0], vector_width(target), TailStrategy::GuardWithIf)
        .specialize(rope.mode == 0);
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

void schedule_attention_cpu(AttentionStage &a, const Target &target,
                            const CpuScheduleKnobs &requested, bool weights_output) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const int vec = vector_width(target);
    const Var &j = a.j, &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u;

    schedule_key_value_packing(a.packed, vec);

    // The softmax stages are computed per query block inside the loop of the Func that
    // consumes them, so only query_block x kv_len scores are live per block: memory grows
    // linearly with sequence length.
    Func softmax_root = weights_output ? a.probs : a.out;
    const Expr rows = min(knobs.query_block, a.q_len);
    Var block =
        split_query_blocks(softmax_root, i, h, b, knobs.query_block, rows, a.packed.head_elements);
    if (weights_output) {
        a.probs.compute_root().vectorize(j, vec, TailStrategy::GuardWithIf);
    } else {
        a.probs.compute_at(softmax_root, block).vectorize(j, vec, TailStrategy::GuardWithIf);
    }

    // Score register tile: score_vectors vectors of keys by score_rows queries, with the dot
    // product over d outside it, each tile accumulated in registers. (Accumulated in the query
    // block's buffer, both tiles of this path were a load, an FMA and a store per step; in
    // registers, their tasks fell from 3.6% to 2.5% (scores, softmax) and 1.6% to 0.7%
    // (probs x values) of the samples of an MHA forward at the tutorial shape, perf.)
    schedule_query_tile(a.packed, LoopLevel(softmax_root, block), vec);
    schedule_register_tile_at(a.packed.score, LoopLevel(softmax_root, block), j, i, a.packed.r_dot,
                              knobs.score_vectors, knobs.score_rows, vec);

    // Row reductions: kReductionLanes partial results per row, whole vectors.
    for (Func f : {a.max_lanes, a.sum_lanes}) {
        f.compute_at(softmax_root, block).vectorize(u, vec);
        f.update(0).vectorize(u, vec);
        f.update(1).unscheduled();  // the tail: fewer than kReductionLanes keys per row
    }
    a.row_max.compute_at(softmax_root, block);
    a.row_sum.compute_at(softmax_root, block);
    // exp_score reads the mask inputs, so its tail must be exact.
    a.exp_score.compute_at(softmax_root, block).vectorize(j, vec, TailStrategy::GuardWithIf);

    // probs x values register tile: out_vectors vectors of features by out_rows queries, with
    // the sum over keys outside it.
    if (weights_output) {
        block = split_query_blocks(a.out, i, h, b, knobs.query_block, rows, a.packed.head_elements);
    }
    a.out.compute_root().vectorize(c, vec, TailStrategy::GuardWithIf);
    const std::vector<Expr> in_place = values_in_place(a.packed, knobs, target);
    schedule_register_tile_at(a.out_acc, LoopLevel(a.out, block), c, i, a.r_keys, knobs.out_vectors,
                              knobs.out_rows, vec, {}, in_place);
    align_value_tiles(a.packed, a.out_acc.in(), c);
}

namespace {

// The AMX kernel's operands and products (AmxAttention): a query block's queries in bfloat16
// once per block, the keys and values copied into tile rows once per call, and each product
// a tile register per tile of its output, copied to memory per key block.
void schedule_amx_attention(FlashAttentionStage &a, const LoopLevel &block,
                            const LoopLevel &key_block_step) {
    AmxAttention &m = a.amx;
    m.queries.compute_at(block).vectorize(m.f, kAmxBlock, TailStrategy::GuardWithIf);
    const Expr &unrotated = a.packed.sources_unrotated;
    if (unrotated.defined()) m.queries.specialize(m.whole_query_blocks && unrotated);
    m.queries.specialize(m.whole_query_blocks);
    // Rows in groups of kAmxRowGroup from an aligned first row, so that the divisions that find
    // a row's tile, head and item run once per group. Per row, with the keys read in place
    // (stages_flash_amx.cpp), they cost what skipping k_transposed saved: mha_forward_bf16
    // bert-512-b8 1.02x, bert-512 0.96x, against 1.10x and 1.05x per group (scripts/ab_runs.py,
    // 3 rounds, Intel Xeon with AMX, 2 threads; gpt2-causal, long-causal 1.05x, tutorial level).
    Var group("group"), in_group("in_group");
    for (Func rows : {m.keys, m.values}) {
        rows.compute_root()
            .bound(m.e, 0, 2)
            .bound(m.x, 0, kAmxTile)
            .reorder(m.x, m.e, m.row)
            .vectorize(m.x)
            .unroll(m.e)
            .align_bounds(m.row, kAmxRowGroup)
            .split(m.row, group, in_group, kAmxRowGroup, TailStrategy::RoundUp)
            .parallel(group, kAmxPackingRowsPerTask / kAmxRowGroup, TailStrategy::GuardWithIf);
    }
    if (unrotated.defined()) m.keys.specialize(unrotated);
    m.values.specialize(m.whole_value_tiles);
    schedule_amx_product(m.score, m.score_tiles, m.r_score, key_block_step);
    schedule_amx_product(m.out, m.out_tiles, m.r_out, key_block_step);
    // One key block of one query block per step.
    m.out.bound_extent(a.kb, 1).bound_extent(a.qb, 1);
}

}  // namespace

void schedule_flash_attention_cpu(FlashAttentionStage &a, const Target &target,
                                  const CpuScheduleKnobs &requested) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const int vec = vector_width(target);
    const Var &j = a.j, &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u, &jj = a.jj, &ii = a.ii;

    schedule_key_value_packing(a.packed, vec);

    // One parallel task per query block (of every head and batch), or per few where they are
    // small; the running state of a block's queries lives for the block, and everything of one
    // key block for one step of it.
    Var block =
        split_query_blocks(a.out, i, h, b, a.query_block, a.query_block, a.packed.head_elements);
    a.out.compute_root().vectorize(c, vec, TailStrategy::GuardWithIf);
    a.state.compute_at(a.out, block).vectorize(c, vec, TailStrategy::RoundUp);
    a.state.update().reorder(c, ii, a.r_blocks).vectorize(c, vec, TailStrategy::RoundUp);
    const LoopLevel key_block_step(a.state, a.r_blocks);
    const LoopLevel block_level(a.out, block);
    const bool amx = a.amx.score_tiles.defined();
    if (!amx) schedule_query_tile(a.packed, block_level, vec);

    // Score register tile: score_vectors vectors of keys by score_rows queries, with the dot
    // product over d outside it.
    // The block's logits are the tile's own output: the scale and the mask are applied to the
    // accumulators in registers, with no copy of the raw scores to store and read back (it was
    // a pass over the block of its own: sdpa 1.01-1.03x at bert-512, gpt2-causal, long-causal
    // and long-single, 3 alternating rounds on a Zen 4).
    // Without a boolean or additive mask, a specialization drops their loads (they were
    // emulated gathers, because the key index is clamped for the last block). With a mask, the
    // clamp carries likely() (stages.cpp) so that loop partitioning may drop it from the other
    // blocks; the benchmarks measure only the unmasked and causal cases.
    const Expr unmasked = !a.mask.has_additive && !a.mask.has_bool_mask;
    if (amx) {
        schedule_amx_attention(a, block_level, key_block_step);
        a.block_logits.compute_at(key_block_step).vectorize(jj, vec);
        a.block_logits.specialize(unmasked);
    } else {
        schedule_register_tile_into(a.packed.score, a.block_logits, key_block_step, j, i, jj, i,
                                    TileReduction(a.packed.r_dot, a.packed.paired, target),
                                    knobs.score_vectors, knobs.score_rows, vec, {}, {unmasked},
                                    TileCopy::Unrolled);
    }
    for (Func f : {a.max_lanes, a.sum_lanes}) {
        f.compute_at(key_block_step).vectorize(u, vec);
        f.update().vectorize(u, vec);
    }
    // The max over the partial lanes as one vector reduction, not a chain of 16 dependent
    // scalar maxima per query: sdpa 0.98x the time at bert-512 and gpt2-causal (4 alternating
    // rounds). The sum stays a scalar chain: its order of additions is fixed for every target.
    a.block_max.compute_at(key_block_step);
    a.block_max.update().atomic().vectorize(a.r_lanes);
    a.block_sum.compute_at(key_block_step);
    a.block_probs.compute_at(key_block_step).vectorize(jj, vec);

    // probs x values register tile: out_vectors vectors of features by out_rows queries, with
    // the sum over the block's keys outside it. Where the values are read in place
    // (cpu_value_tile), a specialization drops `values`' select from the tile's loop.
    std::vector<Func> per_key_block = {a.block_logits, a.max_lanes, a.block_max,
                                       a.block_probs,  a.sum_lanes, a.block_sum};
    if (amx) {
        per_key_block.insert(per_key_block.end(), {a.amx.score, a.amx.out});
    } else {
        const std::vector<Expr> in_place = values_in_place(a.packed, knobs, target);
        schedule_register_tile_at(a.block_out, key_block_step, c, ii,
                                  TileReduction(a.r_block_keys, a.packed.paired, target),
                                  knobs.out_vectors, knobs.out_rows, vec, {}, in_place,
                                  TileCopy::Unrolled);
        align_value_tiles(a.packed, a.block_out.in(), c);
        per_key_block.push_back(a.block_out.in());
        // One key block of one query block per step: a constant-size tile that LLVM can keep
        // in registers.
        a.block_out.bound_extent(a.kb, 1).bound_extent(a.qb, 1);
    }
    if (a.probs_operand.defined()) {
        a.probs_operand.compute_at(key_block_step).vectorize(jj, vec);
        per_key_block.push_back(a.probs_operand);
    }

    // The buffers of one key block are allocated once per query block, not once per key block:
    // their sizes are run-time values, so each was a malloc and a free per step (perf: 8% of an
    // sdpa call at bert-512 in glibc's allocator).
    for (Func f : per_key_block) f.hoist_storage(block_level);
}

}  // namespace attngen
