// schedule_decode_attention_gpu (declared and described in schedule_gpu.h): the split-KV decode
// kernel and the merge of its splits.
#include "schedule_gpu.h"

namespace attngen {

using namespace Halide;

namespace {

// Keys per unrolled step of a thread's probs x values: independent reads in flight.
constexpr int kDecodeKeyUnroll = 4;
// The merge's value features per block (a warp), and its groups of splits, summed side by side.
constexpr int kMergeThreads = 32;
constexpr int kMergeGroups = 8;

// A wrapper of partial that consumer reads, stored at `at`: the schedule computes partial per
// thread inside it, in registers, so that each result is stored once. Computed in shared memory,
// every step of a reduction loaded and stored it.
Func stored_once(Func partial, Func consumer, const LoopLevel &at) {
    Func stored = partial.in(consumer);
    stored.compute_at(at);
    return stored;
}

// The same, read by every consumer of partial.
Func stored_once(Func partial, const LoopLevel &at) {
    Func stored = partial.in();
    stored.compute_at(at);
    return stored;
}

// The split's softmax, common to both kernels: its maximum and sum in kReductionLanes lanes a
// row, a thread per lane and row.
void schedule_split_softmax(DecodeAttentionStage &a, const LoopLevel &block) {
    const Var &r = a.r, &s = a.s, &u = a.u;
    for (Func lanes : {a.max_lanes, a.sum_lanes}) {
        lanes.compute_at(block)
            .bound_extent(s, 1)
            .bound_extent(r, kGpuDecodeRows)
            .gpu_threads(u, r);
        lanes.update().gpu_threads(u, r);
    }
    for (Func row : {a.split_max, a.split_sum}) {
        row.compute_at(block).bound_extent(s, 1).bound_extent(r, kGpuDecodeRows).gpu_threads(r);
        row.update().gpu_threads(r);
    }
}

// gpu_decode_rows_per_thread 1: a warp per row.
// A split-KV decode thread's value features, so that a warp's kGpuDecodeKeyThreads threads span
// every column of a head of kMaxDecodeValueHead (CUDA's largest; the split's two statistics too) in
// one pass, wider heads in more.
constexpr int kMaxDecodeValueHead = 128;
constexpr int kDecodeValueTile =
    (kMaxDecodeValueHead + 2 + kGpuDecodeKeyThreads - 1) / kGpuDecodeKeyThreads;
// Every split, a multiple of kGpuDecodeKeyThreads keys, is then whole unrolled steps.
static_assert(kGpuDecodeKeyThreads % kDecodeKeyUnroll == 0);

void schedule_split_warp_per_row(DecodeAttentionStage &a, int split_keys) {
    const Var &j = a.j, &r = a.r, &c = a.c, &hk = a.hk, &b = a.b, &s = a.s;
    // A block per (split, row block, key/value head and item). Its threads are kGpuDecodeKeyThreads
    // keys (or value features) by kGpuDecodeRows rows; a split's scores and probabilities sit in
    // shared memory, its statistics too. Each thread sums the products of kDecodeValueTile
    // neighbouring value features (and the split's two statistics, as two more columns) over
    // the split's keys in registers, kDecodeKeyUnroll keys per step. With one column per thread
    // and the head's columns in a serial loop around the threads, each pass one read per key,
    // this kernel took 166 us of a llama3-8b-decode step (ncu, H200), now 125; the steps ran
    // 1.09-1.16x faster at the llama3 and long-decode shapes (bench/RESULTS.md, 2026-11-28).
    // Unrolling the scores' feature loop as well made the kernel slower: by 8 2.4x; by 2 and 4,
    // with rows of 4, long-decode's 194 us became 311 and 449 (ncu, H200, 2026-12-04).
    Var ro("ro"), ri("ri"), co("co"), cx("cx"), ci("ci"), ct("ct"), hb("hb");
    a.split_out.compute_root()
        .split(r, ro, ri, kGpuDecodeRows, kGpuExact)
        .split(c, co, cx, kGpuDecodeKeyThreads * kDecodeValueTile, kGpuExact)
        .split(cx, ci, ct, kDecodeValueTile)
        .reorder(ct, ci, ri, co, s, ro, hk, b)
        .fuse(hk, b, hb)
        .gpu_blocks(s, ro, hb)
        .gpu_threads(ci, ri)
        .unroll(ct);
    const LoopLevel block(a.split_out, s);
    // Every per-block buffer covers the block's one split and its kGpuDecodeRows rows: constant
    // sizes, as shared memory needs. Rows past the call's last read the last query (clamped in
    // the algorithm) and are never written out.
    Var jo("jo"), ji("ji");
    a.score.compute_at(block)
        .bound_extent(j, split_keys)
        .bound_extent(r, kGpuDecodeRows)
        .split(j, jo, ji, kGpuDecodeKeyThreads)
        .reorder(jo, ji, r)
        .gpu_threads(ji, r)
        .unroll(jo);
    a.probs.compute_at(block)
        .bound_extent(a.k, split_keys)
        .bound_extent(s, 1)
        .bound_extent(r, kGpuDecodeRows)
        .split(a.k, jo, ji, kGpuDecodeKeyThreads)
        .reorder(jo, ji, r, s)
        .gpu_threads(ji, r);
    // The dot products run along head_dim in each thread, its keys' sums side by side (jo
    // unrolled inside the feature loop: independent reads); the keys of one position block are
    // contiguous, so a warp's 32 keys are one coalesced read per feature.
    a.score.update()
        .split(j, jo, ji, kGpuDecodeKeyThreads)
        .reorder(jo, a.r_dot, ji, r)
        .gpu_threads(ji, r)
        .unroll(jo);
    schedule_split_softmax(a, block);
    RVar rko("rko"), rki("rki");
    a.split_acc.compute_at(a.split_out, ci).bound_extent(c, kDecodeValueTile).unroll(c);
    a.split_acc.update()
        .split(a.r_keys, rko, rki, kDecodeKeyUnroll)
        .reorder(c, rki, rko)
        .unroll(c)
        .unroll(rki);
}

// gpu_decode_rows_per_thread kGpuDecodeRows: every row of the block per thread.
// A value thread's features: one load of a key's values, 16 bytes (8 from a 16-bit cache); a
// panel of the cache holds whole vectors of them.
constexpr int kDecodeValueVector = 4;
// Value threads split a split's keys into one group per warp, summed at the end.
constexpr int kDecodeKeyGroups = kGpuDecodeRows;
// Features per unrolled step of a score thread: independent reads in flight.
constexpr int kDecodeFeatureUnroll = 4;
// The value features that one pass of the value threads covers: the groups' sums are computed
// and added a chunk at a time, so that their shared memory stays that of one chunk whatever the
// head size.
constexpr int kDecodeValueChunk = kGpuDecodeKeyThreads * kDecodeValueVector;
// Every split (a multiple of kGpuDecodeKeyThreads) is then whole unrolled steps of each group.
static_assert(kGpuDecodeKeyThreads % (kDecodeKeyGroups * kDecodeKeyUnroll) == 0);

void schedule_split_rows_per_thread(DecodeAttentionStage &a, int split_keys) {
    const Var &j = a.j, &r = a.r, &c = a.c, &hk = a.hk, &b = a.b, &s = a.s;
    // A block per (split, row block, key/value head and item). Each cached key and value of the
    // split is read once per block: a score thread takes one key for every row of the block (the
    // rows' queries in shared memory, one 16-byte load per feature), a value thread
    // kDecodeValueVector features of every row over one group of the split's keys (a 16-byte
    // load of values and one of the rows' probabilities per key), its sums in registers. With a
    // warp per row, each reading every key and value of the split, 74% of long-decode's stalls
    // were waits on loads (ncu, H200, 2026-12-04, blocks of 8 rows then, its L1 hit rate 93%:
    // the warps' copies of one another's loads). Checked through PoCL; not yet timed on a GPU,
    // so not the default. Its shared memory (one allocation, by the lowered statement): 16
    // bytes per query feature and per value feature (the rows' queries and outputs) and 10 KiB
    // more (the split's scores, probabilities and statistics, one chunk of the key groups'
    // sums): 14 KiB at CUDA's largest heads (128), 26 KiB at heads of 512. With the groups'
    // sums of the whole head at once it was 52 KiB there, past the 48 KiB of local memory of
    // many OpenCL devices.
    Var ro("ro"), ri("ri"), co("co"), ci("ci"), hb("hb");
    a.split_out.compute_root()
        .split(r, ro, ri, kGpuDecodeRows, kGpuExact)
        .split(c, co, ci, kGpuDecodeKeyThreads, kGpuExact)
        .reorder(co, ci, ri, s, ro, hk, b)
        .fuse(hk, b, hb)
        .gpu_blocks(s, ro, hb)
        .gpu_threads(ci, ri);
    const LoopLevel block(a.split_out, s);

    // The rows' queries, rows innermost: one feature of every row is one wide load.
    Var dq("dq"), dt("dt");
    Func queries = stored_once(a.q_rows, a.score, block);
    queries.bound_extent(r, kGpuDecodeRows)
        .reorder_storage(r, a.d)
        .split(a.d, dq, dt, kGpuDecodeKeyThreads, TailStrategy::GuardWithIf)
        .reorder(dq, dt, r, hk, b)
        .gpu_threads(dt, r);

    // Scores: one key per thread and pass of the block's threads over the split, every row's dot
    // product in registers.
    Var jo("jo"), jx("jx"), jy("jy"), ji("ji");
    Func scores = stored_once(a.score, block);
    scores.bound_extent(j, split_keys)
        .bound_extent(r, kGpuDecodeRows)
        .split(j, jo, jx, kGpuDecodeKeyThreads * kGpuDecodeRows, TailStrategy::GuardWithIf)
        .split(jx, jy, ji, kGpuDecodeKeyThreads)
        .reorder(r, jo, ji, jy, hk, b)
        .gpu_threads(ji, jy)
        .unroll(r)
        .unroll(jo);
    a.score.compute_at(scores, jo).reorder(r, j).vectorize(r);
    RVar fo("fo"), fi("fi");
    a.score.update()
        .split(a.r_dot, fo, fi, kDecodeFeatureUnroll, TailStrategy::GuardWithIf)
        .reorder(r, j, fi, fo)
        .vectorize(r)
        .unroll(fi);

    schedule_split_softmax(a, block);
    // Rows innermost: one key's probabilities for every row are one wide load.
    Var ko("ko"), ki("ki");
    a.probs.compute_at(block)
        .bound_extent(a.k, split_keys)
        .bound_extent(s, 1)
        .bound_extent(r, kGpuDecodeRows)
        .reorder_storage(r, a.k, s)
        .split(a.k, ko, ki, kGpuDecodeKeyThreads)
        .reorder(ko, ki, r, s)
        .gpu_threads(ki, r);

    // Values: each warp sums one group of the split's keys (rfactor), a thread
    // kDecodeValueVector features of every row; the groups' sums are added in shared memory,
    // one chunk of kDecodeValueChunk features at a time (a loop of split_acc's additions).
    RVar kgo("kgo"), kgi("kgi"), kuo("kuo"), kui("kui");
    Var kg("key_group"), cg("cg"), cx("cx"), cq("cq"), cv("cv"), chunk("value_chunk");
    Func key_groups = a.split_acc.update()
                          .split(a.r_keys, kgo, kgi, split_keys / kDecodeKeyGroups)
                          .rfactor(kgo, kg);
    Func group_sums = stored_once(key_groups, a.split_acc, LoopLevel(a.split_acc, chunk));
    group_sums.bound_extent(s, 1)
        .bound_extent(r, kGpuDecodeRows)
        .bound_storage(c, kDecodeValueChunk)
        .split(c, cg, cx, kDecodeValueChunk, TailStrategy::RoundUp)
        .split(cx, cq, cv, kDecodeValueVector)
        .reorder(cv, r, cg, cq, kg, s, hk, b)
        .gpu_threads(cq, kg)
        .vectorize(cv)
        .unroll(r);
    key_groups.compute_at(group_sums, cg).reorder(c, r).vectorize(c).unroll(r);
    key_groups.update()
        .split(kgi, kuo, kui, kDecodeKeyUnroll)
        .reorder(c, r, kui, kuo, s)
        .vectorize(c)
        .unroll(r)
        .unroll(kui);
    Var cso("cso"), csi("csi");
    a.split_acc.compute_at(block)
        .bound_extent(s, 1)
        .bound_extent(r, kGpuDecodeRows)
        .split(c, cso, csi, kGpuDecodeKeyThreads, TailStrategy::GuardWithIf)
        .reorder(cso, csi, r, s)
        .gpu_threads(csi, r);
    Var cx_in_chunk("cx_in_chunk");
    a.split_acc.update()
        .split(c, chunk, cx_in_chunk, kDecodeValueChunk, TailStrategy::GuardWithIf)
        .split(cx_in_chunk, cso, csi, kGpuDecodeKeyThreads, TailStrategy::GuardWithIf)
        .reorder(cso, csi, r, chunk, s)
        .gpu_threads(csi, r);
}

// The merge: a block per kMergeThreads value features, row and (key/value head, item). Its
// threads share the row's splits: the overall maximum and sum in kMergeThreads lanes, the
// weighted outputs in kMergeGroups groups of splits, each group's sums added up at the end.
// One thread per feature summing every split of its row, 32 blocks of 32 threads at
// long-decode (256 splits), took 98 us of a step whose split kernel took 302 (ncu, H200,
// 2026-12-04); llama3-8b-decode 26 of 62.
void schedule_merge(DecodeAttentionStage &a) {
    const Var &r = a.r, &c = a.c, &hk = a.hk, &b = a.b;
    Var mo("mo"), mi("mi"), mb("mb"), lane("merge_lane"), group("merge_group");
    a.rows_out.compute_root()
        .split(c, mo, mi, kMergeThreads, kGpuExact)
        .reorder(mi, mo, r, hk, b)
        .fuse(hk, b, mb)
        .gpu_blocks(mo, r, mb)
        .gpu_threads(mi);
    // Each thread's partial result in registers, stored to shared memory once (a wrapper):
    // computed in shared memory, every step loaded and stored it.
    const auto per_thread = [&](Func partial, Func consumer) {
        Func stored = stored_once(partial, consumer, LoopLevel(a.rows_out, mo));
        partial.compute_at(stored, stored.args()[0]);
        return stored;
    };
    RVar so("so"), si("si");
    for (Func total : {a.total_max, a.total_sum}) {
        Func lanes = total.update()
                         .split(a.r_splits, so, si, kMergeThreads, TailStrategy::GuardWithIf)
                         .rfactor(si, lane);
        per_thread(lanes, total).gpu_threads(lane);
        total.compute_at(a.rows_out, mo);
    }
    RVar go("go"), gi("gi"), goo("goo"), goi("goi");
    Func split_groups = a.merged.update()
                            .split(a.r_splits, go, gi, kMergeGroups, TailStrategy::GuardWithIf)
                            .rfactor(gi, group);
    per_thread(split_groups, a.merged)
        .bound_extent(c, kMergeThreads)
        .reorder(c, group)
        .gpu_threads(c, group);
    // Splits kDecodeKeyUnroll at a time: independent reads in flight.
    split_groups.update()
        .split(go, goo, goi, kDecodeKeyUnroll, TailStrategy::GuardWithIf)
        .unroll(goi);
    a.merged.compute_at(a.rows_out, mi);
}

}  // namespace

// Keys per split: 128 make 32 blocks per key/value head at a cache of 4096; 96 for gpt2-decode's
// 12 heads at 1024 (48 with splits of 256, on 132 SMs). On an H200, splits of 256 then 128
// alternated, two passes (bench/RESULTS.md, 2026-12-04): gpt2-decode 0.291 -> 0.227 ms,
// llama3-8b-decode 0.439 -> 0.368, long-decode (32768 keys) 0.630 -> 0.672 while its merge
// summed each row's splits in one thread; with schedule_merge's, 128 beat 256 there too (split
// kernel 273 against 303 us, merge 10 against 8).
void schedule_decode_attention_gpu(DecodeAttentionStage &a, const GpuScheduleKnobs &knobs) {
    const GpuScheduleKnobs k = resolve_gpu_knobs(knobs);
    schedule_elementwise_gpu(a.q_rows);
    if (k.gpu_decode_rows_per_thread == 1) {
        schedule_split_warp_per_row(a, k.gpu_decode_split_keys);
    } else {
        schedule_split_rows_per_thread(a, k.gpu_decode_split_keys);
    }
    schedule_merge(a);
}

bool decode_needs_device_cache_layout(const GpuScheduleKnobs &knobs) {
    return resolve_gpu_knobs(knobs).gpu_decode_rows_per_thread != 1;
}

}  // namespace attngen
