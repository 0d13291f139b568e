// CPU schedules of decoding (schedule_cpu.h): the split-KV attention, the rows an append writes
// into the KV cache, and the rotary angle tables.

#include <algorithm>
#include <vector>

#include "layout.h"
#include "schedule_cpu.h"
#include "schedule_cpu_tiles.h"

namespace attngen {

using namespace Halide;

namespace {

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

// At most this many splits per row, the decode kernel merges them on one thread.
constexpr int kDecodeSerialMergeSplits = 8;

}  // namespace

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
                              {{one_row, score_vectors, 1}}, {}, TileCopy::Loops);
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
    schedule_register_tile_at(a.split_acc, at, c, r, a.r_keys, narrow, 2, vec, shapes, {},
                              TileCopy::Loops);

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

}  // namespace attngen
