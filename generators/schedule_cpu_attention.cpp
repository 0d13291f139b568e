// CPU schedules of attention (schedule_cpu.h): the packing of keys and values, the attention that
// also returns the weights, and the flash kernel, in register tiles or AMX tiles.

#include <algorithm>
#include <string>
#include <vector>

#include "layout.h"
#include "schedule_cpu.h"
#include "schedule_cpu_tiles.h"

namespace attngen {

using namespace Halide;

namespace {

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

// A packing task takes several heads where each is small, up to about this many elements:
// the tutorial shape's 256 heads of 20 keys made loops of 256 tasks of 1280 elements each.
// scripts/ab_runs.py, AVX-512, Zen 4, 3 rounds: mha_forward/tutorial 1.04x,
// mha_forward_bf16/tutorial 1.01x, bert-128 and tutorial-cross level (2 and 1 heads a task).
constexpr int kPackingTaskElements = 16384;
constexpr int kPackingMaxHeadsPerTask = 16;

// The rows of the weights' score tile for calls of few queries (schedule_attention_cpu).
constexpr int kFewQueriesTileRows = 12;
// The same with scores in vdpbf16ps pairs: 12 rows by 2 vectors fit 32 registers by
// tile_fits' count, but LLVM kept one of the 24 accumulators on the stack
// (kernel_objects.bf16_register_tiles_stay_in_registers), as it did the projections' 4 x 6.
constexpr int kFewQueriesPairedTileRows = 10;

// Keys transposed, into panels (jl, d, jp, h, b) where the attention asked for them
// (PackedScore::k_panels) or to (j, d, h, b), and values copied to panels of a tile's features
// (PackedScore::v_panels) or to (c, j, h, b), at root, one task per few heads
// (kPackingTaskElements). Bfloat16 pairs (PackedScore::paired) are made from two rows each,
// contiguous along the keys (or the value features), interleaved: a vector of keys (or
// features) per row of the pair, the two stored as one interleaved vector. The keys' two rows
// are the halves of a row of transposed words (PackedScore::k_words), where the pairs are the
// keys' only reader (keys_read_only_as_pairs: not on AMX, whose rotated keys read
// k_transposed). (Vectorized over (e, j) together, each vector was a gather: its lanes read two
// rows, and the features' clamp was per lane. attngen_parallel_timeline bert-512 bf16,
// AVX512-BF16 variant, Zen 4: key pairs 107 -> 33 us, value pairs 156 -> 40 us of a 9.7 ms
// call.)
void schedule_key_value_packing(const PackedScore &p, int vec, bool keys_read_only_as_pairs) {
    Func k_packed = p.k_packed, v_packed = p.v_packed;
    const std::vector<Var> v = v_packed.args();
    Var hb("hb"), task("task");
    const bool panels = p.k_panels.defined();
    Func keys = panels ? p.k_panels : p.k_transposed;
    const std::vector<Var> k = keys.args();  // (jl, d, jp, h, b) or (j, d, h, b)
    const Expr heads_per_task =
        clamp(kPackingTaskElements / max(p.head_elements, 1), 1, kPackingMaxHeadsPerTask);
    if (p.paired && keys_read_only_as_pairs) {
        // The keys' words (PackedScore::k_words) transposed a head at a time in the pairs'
        // task, while they are in cache, and the pairs split from them: one loop where there
        // were two, and 32-bit elements transposed where there were 16-bit ones, each inserted
        // into its vector on its own. attngen_parallel_timeline bert-512 bf16, AVX512-BF16
        // variant, Zen 4: the bfloat16 transpose 104-121 us and the pairs 38-57 -> 78-117 us;
        // scripts/paired_ab.py --bf16, 60 pairs, old/new: bert-128 1.010x (41 of 60), bert-512
        // 1.005x, gpt2-causal and long-causal level. The loop waits on its loads of the
        // projected keys (perf). Vectorized in both dimensions, the tile's transpose went
        // through the stack as before (LLVM), and measured level.
        Func word_rows = p.k_word_rows;
        const std::vector<Var> w = word_rows.args();  // (j, p, h, b)
        word_rows.compute_at(k_packed, hb);
        Expr whole_words = p.q_even_features;
        if (p.sources_unrotated.defined()) whole_words = whole_words && p.sources_unrotated;
        schedule_transpose(word_rows, p.k_words, w[0], w[1], (p.dk + 1) / 2, vec,
                           TailStrategy::RoundUp, whole_words);
    } else {
        keys.compute_root()
            .fuse(k[k.size() - 2], k.back(), hb)
            .parallel(hb, heads_per_task, TailStrategy::GuardWithIf);
        if (panels) keys.bound(k[0], 0, kKeyPanel);
        // k_source reads every key past kv_len as the last key (clamped), so a whole last tile
        // of a head's keys reads nothing outside k, and it is computed whole: guarded, the
        // tutorial's heads of 20 keys took their last 4 one by one, in a loop of scalar loads
        // and masked stores. attngen_parallel_timeline tutorial 300 bf16, AVX512-BF16 variant,
        // Zen 4, two runs: the keys' transpose 173 -> 136 and 154 us of a 3.2 ms call; the
        // float32 forward's packing loop level (146-159 us).
        schedule_transpose(keys, p.k_source, k[0], k[1], p.dk, vec, TailStrategy::RoundUp,
                           p.sources_unrotated);
    }
    // Pairs of keys may come with float32 values (PackedScore::float_values): those are
    // packed as float32 products' values are.
    const bool paired_values = p.paired && !p.float_values;
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
    } else if (!paired_values) {
        v_packed.compute_root()
            .fuse(v[2], v[3], hb)
            .parallel(hb, heads_per_task, TailStrategy::GuardWithIf)
            .vectorize(v[0], vec);
    }
    if (!p.paired) return;
    std::vector<Func> all_pairs = {k_packed};
    if (paired_values) all_pairs.push_back(v_packed);
    for (Func pairs : all_pairs) {
        const std::vector<Var> a = pairs.args();  // (e, j or c, p, h, b)
        Var outer("outer"), inner("inner");
        pairs.compute_root()
            .fuse(a[3], a[4], hb)
            .split(hb, task, hb, heads_per_task, TailStrategy::GuardWithIf)
            .parallel(task)
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

// Per head, keys and values beyond this many bytes are "long": query blocks of long_query_block
// then amortize streaming them from L3 (L2 is 1-2 MiB per core on the CPUs attngen targets).
// (query_block, 16 or 32, suits bert-512, whose 256 KiB of keys and values per head stay in L2;
// at long-single, 8 MiB per head, 16 took 1979 ms against about 480 ms with 128.)
constexpr int64_t kLongKeyValueBytes = 512 * 1024;

// Tile rows (of 64 bytes) per parallel task of the AMX attention's copies of keys and values.
constexpr int kAmxPackingRowsPerTask = 1024;

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
    Var group("group"), in_group("in_group"), task("task");
    m.values.compute_root()
        .bound(m.e, 0, 2)
        .bound(m.x, 0, kAmxTile)
        .reorder(m.x, m.e, m.row)
        .vectorize(m.x)
        .unroll(m.e)
        .align_bounds(m.row, kAmxRowGroup)
        .split(m.row, group, in_group, kAmxRowGroup, TailStrategy::RoundUp)
        .parallel(group, kAmxPackingRowsPerTask / kAmxRowGroup, TailStrategy::GuardWithIf);
    // The keys likewise, their rows bounded from 0 so that bounds inference finds one group
    // (row / kAmxRowGroup) per group: its words (AmxAttention::key_words), 16 x 16, are staged
    // on the stack a key's 16 words at a time and read back at a stride of 16 words, a tile row
    // at a time. attngen_parallel_timeline bert-512 bf16, Intel Xeon with AMX: the keys' copy
    // 136-139 -> 56-57 us (each row had been 32 gathered 16-bit elements, about 140
    // instructions; now about 45); scripts/paired_ab.py --bf16, 6 pairs, old/new: gpt2-causal
    // 1.055x, bert-512-b8 1.038x, llama3-8b-prefill 1.031x, bert-128 1.028x, bert-512 1.010x.
    m.keys.compute_root()
        .bound(m.e, 0, 2)
        .bound(m.x, 0, kAmxTile)
        .bound(m.row, 0, m.key_rows)
        .reorder(m.x, m.e, m.row)
        .vectorize(m.x)
        .unroll(m.e)
        .split(m.row, group, in_group, kAmxRowGroup, TailStrategy::RoundUp)
        .split(group, task, group, kAmxPackingRowsPerTask / kAmxRowGroup, TailStrategy::GuardWithIf)
        .parallel(task);
    m.key_words.compute_at(m.keys, group)
        .bound(m.p, 0, kAmxRowGroup)
        .bound(m.x, 0, kAmxTile)
        .vectorize(m.p);
    m.key_words.specialize(m.whole_query_blocks).unroll(m.x);
    if (unrotated.defined()) m.keys.specialize(unrotated);
    m.values.specialize(m.whole_value_tiles);
    schedule_amx_product(m.score, m.score_tiles, m.r_score, key_block_step);
    schedule_amx_product(m.out, m.out_tiles, m.r_out, key_block_step);
    // One key block of one query block per step.
    m.out.bound_extent(a.kb, 1).bound_extent(a.qb, 1);
}

}  // namespace

Expr flash_query_block(const CpuScheduleKnobs &requested, const Target &target, const Expr &kv_len,
                       const Expr &dk, const Expr &dv, const Expr &causal) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const Expr kv_bytes = cast<int64_t>(kv_len) * (dk + dv) * int(sizeof(float));
    // A causal call computes, in the key block that holds its query block's diagonal, up to a
    // query block's height of masked keys per query. There long blocks cost more than their
    // streaming saves: at long-causal (sdpa, 2 alternating rounds against 128 rows), 32 rows
    // took 0.95x the time, 16 and 64 rows 0.97x (Zen 4); 64 rows against 32 again 1.011x the
    // time (bench/cpu_experiments/sdpa_knobs_ab.sh, 8 rounds, Zen 5). So a causal call keeps the
    // short query block.
    const int long_causal_query_block = std::min(knobs.long_query_block, knobs.query_block);
    return select(kv_bytes <= Expr(kLongKeyValueBytes), knobs.query_block, causal != 0,
                  long_causal_query_block, knobs.long_query_block);
}

int cpu_value_tile(const CpuScheduleKnobs &requested, const Target &target) {
    return resolve_cpu_knobs(requested, target).out_vectors * vector_width(target);
}

void schedule_attention_cpu(AttentionStage &a, const Target &target,
                            const CpuScheduleKnobs &requested, bool weights_output) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const int vec = vector_width(target);
    const Var &j = a.j, &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u;

    schedule_key_value_packing(a.packed, vec, true);

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
    // A call of a few more queries than a tile's rows takes them in one taller tile where the
    // registers hold it: the tutorial shape's 10 queries in tiles of 8 computed 16 rows.
    // attngen_parallel_timeline tutorial, AVX-512, Zen 4, alternated: the weights' loop 291 ->
    // 263, 216 -> 192, 255 -> 237 us; scripts/paired_ab.py, 60 pairs: mha_forward_bf16/tutorial
    // 1.018x (45 of 60), mha_forward/tutorial level (0.999x, a 5 ms call).
    std::vector<TileShape> score_shapes;
    const int few_rows = a.packed.paired ? kFewQueriesPairedTileRows : kFewQueriesTileRows;
    if (few_rows > knobs.score_rows && tile_fits(knobs.score_vectors, few_rows, target)) {
        score_shapes.push_back(
            {a.q_len > knobs.score_rows && a.q_len <= few_rows, knobs.score_vectors, few_rows});
    }
    // Both tiles of this path unrolled from their first term (TileCopy): with it in a loop,
    // each tile's accumulators were stored to a stack buffer and loaded from it before the
    // steps' loop (objdump of the AVX-512 kernels). attngen_parallel_timeline tutorial,
    // alternated, last two of three rounds: the weights' loop 195-206 -> 166-170 us (float32),
    // 142 -> 134-139 (bfloat16), the probs x values loop 82-90 -> 66-71 and 62 -> 52-53;
    // scripts/paired_ab.py, 10 and 20 pairs, old/new: mha_forward/tutorial 0.978x and 1.007x,
    // tutorial-cross 0.997x and 1.016x; mha_forward_bf16/ 1.035x and 1.020x, 1.007x and 1.016x.
    schedule_query_tile(a.packed, LoopLevel(softmax_root, block), vec);
    schedule_register_tile_at(
        a.packed.score, LoopLevel(softmax_root, block), j, i,
        TileReduction(a.packed.r_dot, a.packed.paired, target, a.packed.r_dot_first),
        knobs.score_vectors, knobs.score_rows, vec, score_shapes);

    // Row reductions: kReductionLanes partial results per row, whole vectors; the tail (fewer
    // than kReductionLanes keys per row) in one vector of as many lanes.
    for (Func f : {a.max_lanes, a.sum_lanes}) {
        f.compute_at(softmax_root, block).vectorize(u, vec);
        f.update(0).vectorize(u, vec);
        f.update(1).vectorize(a.r_lanes_tail.x, vec, TailStrategy::GuardWithIf);
    }
    a.row_max.compute_at(softmax_root, block);
    a.row_sum.compute_at(softmax_root, block);
    // exp_score reads the mask inputs, so its tail must be exact.
    a.exp_score.compute_at(softmax_root, block).vectorize(j, vec, TailStrategy::GuardWithIf);
    // Without a boolean or additive mask, as in the flash kernel (schedule_flash_attention_cpu),
    // a specialization drops their loads: read at keys clamped to kv_len, those of a row's last
    // vector of keys were gathers, lane by lane (15% of the weights' loop at the tutorial shape,
    // 20 keys a row, perf). With the tails above vectorized too, scripts/paired_ab.py, 60 pairs
    // in 4 sessions, AVX-512, Zen 4, old/new: mha_forward/ tutorial 1.009x (50 of 60),
    // tutorial-cross 1.017x (55 of 60); mha_forward_bf16/ tutorial 1.022x (52 of 60),
    // tutorial-cross 1.025x (55 of 60).
    const Expr unmasked = a.mask.unmasked();
    for (Stage s : {Stage(a.exp_score), a.max_lanes.update(0), a.max_lanes.update(1)}) {
        s.specialize(unmasked);
    }

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

// Rows of the AMX max's lanes per step of its loop over groups of keys
// (schedule_flash_attention_cpu). A divisor of the AMX tile's rows, so that a step's rows,
// rounded up, stay within the tile whose scores they read.
constexpr int kAmxMaxInterleavedRows = 4;
static_assert(kAmxTile % kAmxMaxInterleavedRows == 0);

void schedule_flash_attention_cpu(FlashAttentionStage &a, const Target &target,
                                  const CpuScheduleKnobs &requested) {
    const CpuScheduleKnobs knobs = resolve_cpu_knobs(requested, target);
    const int vec = vector_width(target);
    const Var &j = a.j, &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u, &jj = a.jj, &ii = a.ii;

    const bool amx = a.amx.score_tiles.defined();
    schedule_key_value_packing(a.packed, vec, !amx);

    // One parallel task per query block (of every head and batch), or per few where they are
    // small; the running state of a block's queries lives for the block, and everything of one
    // key block for one step of it.
    Var block =
        split_query_blocks(a.out, i, h, b, a.query_block, a.query_block, a.packed.head_elements);
    a.out.compute_root().vectorize(c, vec, TailStrategy::GuardWithIf);
    a.state.compute_at(a.out, block).vectorize(c, vec, TailStrategy::RoundUp);
    // AMX computes each key block's Funcs per tile of rows (kAmxTile queries), not for the
    // whole query block: the long shapes' blocks of 128 queries x 768 keys kept 384 KiB per
    // float32 buffer in L2, where the softmax's passes read them; a tile's rows keep 48 KiB.
    // With the logits inlined into their two readers and the rounded probabilities stored in
    // the exp's loop (stages_flash.cpp), scripts/paired_ab.py, 4 pairs in 2 sessions, Intel
    // Xeon with AMX, old/new: mha_forward_bf16/ long-single 1.078x, bert-512 1.062x,
    // long-causal 1.041x, bert-512-b8 1.030x, gpt2-causal 1.020x, bert-128 level. Two tiles of
    // rows per step, their products with the tiles of rows innermost (each key tile loaded
    // once per two): long-single 1.039x, bert-512-b8 0.970x, the others level; and the float32
    // kernels in groups of 32 rows: long-single 0.995x.
    Var row_group("row_group"), group_row("group_row");
    Stage update = a.state.update();
    if (amx) {
        update.split(ii, row_group, group_row, kAmxTile, TailStrategy::GuardWithIf)
            .reorder(c, group_row, row_group, a.r_blocks);
    } else {
        update.reorder(c, ii, a.r_blocks);
    }
    update.vectorize(c, vec, TailStrategy::RoundUp).specialize(a.single_key_block);
    const LoopLevel key_block_step =
        amx ? LoopLevel(a.state, row_group) : LoopLevel(a.state, a.r_blocks);
    const LoopLevel block_level(a.out, block);
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
    const Expr unmasked = a.mask.unmasked();
    if (amx) {
        // The logits are inlined: the tiles' copy of the scores is read twice, by the block's
        // maximum and its exp, each applying the scale and the mask itself, instead of a pass
        // that stores the logits and two that load them (that pass had 14% of the samples of
        // mha_forward_bf16/long-single, perf, Intel Xeon with AMX).
        schedule_amx_attention(a, block_level, key_block_step);
    } else {
        schedule_register_tile_into(
            a.packed.score, a.block_logits, key_block_step, j, i, jj, i,
            TileReduction(a.packed.r_dot, a.packed.paired, target, a.packed.r_dot_first),
            knobs.score_vectors, knobs.score_rows, vec, {}, {unmasked});
    }
    // On AMX the sums' lanes are the last group's running sums in block_probs, inlined.
    for (Func f : {a.max_lanes, a.sum_lanes}) {
        if (!f.has_update_definition()) continue;
        f.compute_at(key_block_step).vectorize(u, vec);
        f.update().vectorize(u, vec);
    }
    // The max over the partial lanes as one vector reduction, not a chain of 16 dependent
    // scalar maxima per query: sdpa 0.98x the time at bert-512 and gpt2-causal (4 alternating
    // rounds). The sum stays a scalar chain: its order of additions is fixed for every target.
    a.block_max.compute_at(key_block_step);
    a.block_max.update().atomic().vectorize(a.r_lanes);
    a.block_sum.compute_at(key_block_step);
    a.block_probs.compute_at(key_block_step);
    if (amx) {
        // Each row's groups in order, innermost: its sums stay in a register.
        a.block_probs.update(0).vectorize(u, vec);
        a.block_probs.update(1).reorder(u, a.r_prob_groups.x, ii).vectorize(u, vec);
    } else {
        a.block_probs.vectorize(jj, vec);
    }

    // probs x values register tile: out_vectors vectors of features by out_rows queries, with
    // the sum over the block's keys outside it. Where the values are read in place
    // (cpu_value_tile), a specialization drops `values`' select from the tile's loop.
    std::vector<Func> per_key_block = {a.max_lanes, a.block_max, a.block_probs, a.block_sum};
    if (amx) {
        // Each row's running max per lane is one vector register. With one row per step of
        // the groups' loop, every vmaxps waited for the one before it, a chain of 4 cycles per
        // 16 keys, behind a multiply and a max of its own (perf: 8% of
        // mha_forward_bf16/long-single's attention task, Intel Xeon with AMX); 4 rows per step
        // are 4 independent chains. scripts/paired_ab.py --bf16, 6 pairs in 2 sessions, same
        // host, old/new: long-single 1.045x, llama3-8b-prefill 1.079x (6 of 6 each), bert-512
        // 1.012x, the others level (0.995-1.008x); 8 rows a step against 4: level
        // (0.982-1.027x). The same for the other kernels' max and sum lanes, by
        // bench/cpu_experiments/sdpa_knobs_ab.sh (4 rows a step on AVX-512, 2 on AVX2, whose
        // query blocks are multiples of 6): AVX-512 float32 level (0.986-1.010x), AVX2 float32
        // 0.78-0.81x; not kept there.
        Var row_step("row_step"), row_lane("row_lane");
        a.max_lanes.update()
            .split(ii, row_step, row_lane, kAmxMaxInterleavedRows, TailStrategy::RoundUp)
            .reorder(u, row_lane, a.r_lane_groups.x, row_step)
            .unroll(row_lane);
        // The inlined logits' readers without the mask's loads where there is no mask, as
        // block_logits was on AMX; specialized after their vectorization, which they inherit.
        a.max_lanes.update().specialize(unmasked);
        a.block_probs.update(1).specialize(unmasked);
        per_key_block.insert(per_key_block.end(), {a.amx.score, a.amx.out});
    } else {
        per_key_block.insert(per_key_block.end(), {a.sum_lanes, a.block_logits});
        const std::vector<Expr> in_place = values_in_place(a.packed, knobs, target);
        schedule_register_tile_at(
            a.block_out, key_block_step, c, ii,
            TileReduction(a.r_block_keys, a.packed.paired, target, a.r_block_keys_first),
            knobs.out_vectors, knobs.out_rows, vec, {}, in_place);
        align_value_tiles(a.packed, a.block_out.in(), c);
        per_key_block.push_back(a.block_out.in());
        // One key block of one query block per step: a constant-size tile that LLVM can keep
        // in registers.
        a.block_out.bound_extent(a.kb, 1).bound_extent(a.qb, 1);
    }

    // The buffers of one key block are allocated once per query block, not once per key block:
    // their sizes are run-time values, so each was a malloc and a free per step (perf: 8% of an
    // sdpa call at bert-512 in glibc's allocator).
    for (Func f : per_key_block) f.hoist_storage(block_level);
    // A whole key block's room for the keys, whatever the query block visits: under a causal
    // mask each query block trims its last key block to its own diagonal, and sized to that,
    // every task allocated a different size, which the thread's cache of blocks (exact
    // capacities, block_cache.cpp) missed: glibc's free and malloc_consolidate took 2% of
    // sdpa/gpt2-causal's samples (perf). One vector more: Halide realizes a vectorized loop's
    // region a vector past its required one where the loop's last vector shifts inwards. Not
    // on AMX, whose tiles' reads of these buffers no host of the suite has checked against the
    // bound (a bound too small is a run-time error, not a wrong answer).
    // The logits are the score tile's output, which rounds the block up to whole tiles: a head
    // of one block is a multiple of kReductionLanes keys only, not always of a tile of 3 or 4
    // vectors (4 x 2 tiles, which the tuner may pick, overran the bound by up to 32 keys at heads
    // of 1 to 100 keys, a run-time error: tests/stages, FlashAttention). Where the vector past
    // the block covers the rounding (tiles of 1 or 2 vectors, the tuned ones), the bound is as
    // it was, and so are the buffers of the kernels built with them.
    if (!amx) {
        const int tile_keys = knobs.score_vectors * vec;
        const Expr whole_tiles = ceil_div(a.key_block, tile_keys) * tile_keys;
        a.block_logits.bound_storage(jj, max(whole_tiles, a.key_block + vec));
        a.block_probs.bound_storage(jj, a.key_block + vec);
    }
}

}  // namespace attngen
