// define_amx_score, define_amx_probs_and_sums and define_amx_block_out (declared and described in
// stages.h: AmxAttention).
#include "stages.h"

namespace attngen {

using namespace Halide;

namespace {

// The coordinates of tile row `row` (AmxAttention's keys and values): rows run over (pair,
// tile, key/value head, item), pair innermost, `pair_rows` pairs per tile and `tiles` tiles
// per head. The item is clamped for Halide's bounds (AmxHeads); a row's own is in range.
struct TileRun {
    Expr pair, tile, head, item;
};
TileRun tile_run(const Expr &row, const Expr &pair_rows, const Expr &tiles, const AmxHeads &heads) {
    const Expr group = row / kAmxRowGroup, group_rows = pair_rows / kAmxRowGroup;
    const Expr run = group / group_rows, head_run = run / tiles;
    return {(group % group_rows) * kAmxRowGroup + row % kAmxRowGroup, run % tiles,
            head_run % heads.kv_heads, clamp(head_run / heads.kv_heads, 0, heads.items - 1)};
}

// The first row of the run of tile t of query head h's key/value head in item b.
Expr run_start(const Expr &t, const Expr &h, const Expr &b, const Expr &pair_rows,
               const Expr &tiles, const Expr &group, const Expr &kv_heads) {
    return pair_rows * (t + tiles * (h / group + kv_heads * b));
}

}  // namespace

void define_amx_score(FlashAttentionStage &a, const Func &q, const Expr &dk, const Expr &q_len,
                      const AmxHeads &heads, const Expr &key_tiles) {
    AmxAttention &m = a.amx;
    const Var &x = m.x, &t = m.t, &e = m.e, &f = m.f;
    Var i("i"), j("j"), h("h"), b("b");
    const Type bf16 = BFloat(16);
    const Expr zero = cast(bf16, 0.0f);
    const Expr blocks = (dk + (kAmxBlock - 1)) / kAmxBlock;
    const Expr pair_rows = blocks * (kAmxBlock / 2);
    // A head of whole blocks reads its features as they are, so that a specialization on
    // m.whole_query_blocks loads them as vectors (clamped, each vector was 32 scalar loads).
    m.whole_query_blocks = dk % kAmxBlock == 0;
    const Expr row = clamp(i, 0, q_len - 1);
    m.queries = Func("amx_queries");
    m.queries(f, i, h, b) = cast(bf16, select(m.whole_query_blocks, q(f, row, h, b),
                                              select(f < dk, q(min(f, dk - 1), row, h, b), 0.0f)));
    // Unrotated keys are read where the projection left them (a copy into k_transposed first
    // took 5% of the bfloat16 forward at bert-512-b8, perf), as 32-bit words, features 2 p and
    // 2 p + 1 of a key, 0 past dk. A tile row holds one pair of 16 keys, so a group of
    // kAmxRowGroup rows is a 16 x 16 transpose of words: key_words (p, x, g) holds group g's,
    // pair p of the group's first for key x of its tile, which the schedule stages whole and
    // the keys read back transposed (schedule_amx_attention: a row had been 32 elements
    // gathered 16 bits at a time). Rotated keys still come from k_transposed, which reads each
    // rotation's operands as vectors along the features and leaves a tile's keys contiguous.
    // Both in bfloat16 already: pairs' keys are rounded in k_source (define_packed_score).
    const Var &p = m.p, &g = m.g;
    const TileRun group_run = tile_run(g * kAmxRowGroup, pair_rows, key_tiles, heads);
    const auto feature_at = [&](const Expr &f) {
        const auto read = [&](const Expr &at) {
            return cast(bf16, a.packed.k_source(at, group_run.tile * kAmxTile + x, group_run.head,
                                                group_run.item));
        };
        return select(m.whole_query_blocks, read(f), select(f < dk, read(min(f, dk - 1)), zero));
    };
    const Expr first_feature = 2 * (group_run.pair + p);
    m.key_words = Func("amx_key_words");
    m.key_words(p, x, g) = pair_word(feature_at(first_feature), feature_at(first_feature + 1));
    Expr half = word_half(m.key_words(m.row % kAmxRowGroup, x, m.row / kAmxRowGroup), e, bf16);
    const Expr &unrotated = a.packed.sources_unrotated;
    if (unrotated.defined()) {
        const TileRun run = tile_run(m.row, pair_rows, key_tiles, heads);
        const Expr feature = 2 * run.pair + e;
        const Expr rotated = a.packed.k_transposed(run.tile * kAmxTile + x, min(feature, dk - 1),
                                                   run.head, run.item);
        half = select(unrotated, half, select(feature < dk, cast(bf16, rotated), zero));
    }
    m.keys = Func("amx_keys");
    m.keys(e, x, m.row) = half;
    m.key_rows = pair_rows * key_tiles * heads.kv_heads * heads.items;
    m.r_score = RDom(0, kAmxBlock, 0, blocks, "r_amx_score");
    const RVar &in_block = m.r_score.x;
    const Expr f_r = m.r_score.y * kAmxBlock + in_block;
    m.score_tiles = Func("amx_score_tiles");
    m.score_tiles(x, i, t, h, b) = 0.0f;
    m.score_tiles(x, i, t, h, b) +=
        cast<float>(m.queries(f_r, i, h, b)) *
        cast<float>(m.keys(
            in_block % 2, x,
            f_r / 2 + run_start(t, h, b, pair_rows, key_tiles, a.packed.group, heads.kv_heads)));
    m.score = Func("amx_score");
    m.score(x, i, t, h, b) = m.score_tiles(x, i, t, h, b);
    a.packed.score = Func("score");
    a.packed.score(j, i, h, b) = m.score(j % kAmxTile, i, j / kAmxTile, h, b);
}

void define_amx_probs_and_sums(FlashAttentionStage &a, const Expr &prob, const Type &products,
                               const Expr &last_key_in_block) {
    const Var &u = a.u, &jj = a.jj, &kb = a.kb, &ii = a.ii, &qb = a.qb, &h = a.h, &b = a.b;
    const Var &g = a.amx.g;
    // block_probs (u, g, kb, ii, qb, h, b) is the tuple {lane u's sum over groups 0 to g - 1,
    // the probability of key kReductionLanes (g - 1) + u rounded to the products}, the sums'
    // start (0) at g = 0. One loop over the keys computes each exp once, stores its rounding for
    // the tiles and adds it to its lane's sum, which LLVM keeps in a register (it forwards each
    // group's stored sum to the next). The sums had a pass of their own over a float32 copy of
    // the probabilities that the exp's loop stored too. The lanes add in that pass's order (from
    // 0, group by group), so the sums are the same bit for bit. Halide 21 does not fuse the two
    // loops as they were: compute_with refuses a pure Var (the probabilities' keys) beside the
    // sums' reduction variable. The start sits at g = 0 and group g at g + 1 so that the update
    // reads the previous group's sum with no select: with a select at group 0, LLVM reloaded the
    // sum from memory every group (a chain through the store; long-single 1.006x). As it is,
    // scripts/paired_ab.py --bf16, 6 pairs in 2 sessions, Intel Xeon with AMX, old/new
    // (bench/RESULTS.md, session 87): gpt2-causal 1.077x, long-causal 1.075x, long-single
    // 1.073x, bert-512 1.007x, bert-512-b8 0.999x, bert-128 0.976x.
    // Every group up to the end of the kAmxBlock keys that hold the last visible key: the tiles
    // read them whole; the keys past the last visible one have probability 0 and add nothing.
    const int groups_per_block = kAmxBlock / kReductionLanes;
    a.r_prob_groups = RDom(0, a.key_block / kReductionLanes, "r_prob_groups");
    const RVar &group = a.r_prob_groups.x;
    a.r_prob_groups.where(group / groups_per_block * kAmxBlock <= last_key_in_block);
    const Expr p = substitute(jj.name(), group * kReductionLanes + u, prob);
    a.block_probs(u, g, kb, ii, qb, h, b) = {undef<float>(), undef(products)};
    a.block_probs(u, 0, kb, ii, qb, h, b) = {0.0f, undef(products)};
    a.block_probs(u, group + 1, kb, ii, qb, h, b) = {
        a.block_probs(u, group, kb, ii, qb, h, b)[0] + p, round_probability(p, products, false)};
    a.probs_operand = Func("probs_operand");
    a.probs_operand(jj, kb, ii, qb, h, b) =
        a.block_probs(jj % kReductionLanes, jj / kReductionLanes + 1, kb, ii, qb, h, b)[1];
    const Expr last_group =
        min(a.key_block / kReductionLanes, (last_key_in_block / kAmxBlock + 1) * groups_per_block);
    a.sum_lanes = Func("sum_lanes");
    a.sum_lanes(u, kb, ii, qb, h, b) = a.block_probs(u, last_group, kb, ii, qb, h, b)[0];
}

void define_amx_block_out(FlashAttentionStage &a, const Func &v, const Expr &dv, const Expr &kv_len,
                          const AmxHeads &heads, const Expr &key_pairs,
                          const Expr &last_key_in_block) {
    AmxAttention &m = a.amx;
    const Var &x = m.x, &t = m.t, &e = m.e, &row = m.row;
    const Var &c = a.c, &kb = a.kb, &ii = a.ii, &qb = a.qb, &h = a.h, &b = a.b;
    const Expr value_tiles = (dv + (kAmxTile - 1)) / kAmxTile;
    const TileRun run = tile_run(row, key_pairs, value_tiles, heads);
    // As the queries (m.whole_value_tiles): whole tiles read their features unclamped.
    m.whole_value_tiles = dv % kAmxTile == 0;
    const Expr feature = run.tile * kAmxTile + x, key = min(2 * run.pair + e, kv_len - 1);
    m.values = Func("amx_values");
    m.values(e, x, row) =
        cast(BFloat(16), select(m.whole_value_tiles, v(feature, key, run.head, run.item),
                                v(min(feature, dv - 1), key, run.head, run.item)));
    // Whole blocks of kAmxBlock keys up to the one that holds the last visible key: the keys
    // past it in that block have probability 0.
    m.r_out = RDom(0, kAmxBlock, 0, a.key_block / kAmxBlock, "r_amx_out");
    m.r_out.where(m.r_out.y * kAmxBlock <= last_key_in_block);
    const RVar &in_block = m.r_out.x;
    const Expr block_key = m.r_out.y * kAmxBlock + in_block;
    m.out_tiles = Func("amx_out_tiles");
    m.out_tiles(x, ii, t, kb, qb, h, b) = 0.0f;
    m.out_tiles(x, ii, t, kb, qb, h, b) +=
        cast<float>(a.probs_operand(block_key, kb, ii, qb, h, b)) *
        cast<float>(m.values(
            in_block % 2, x,
            block_key / 2 + kb * (a.key_block / 2) +
                run_start(t, h, b, key_pairs, value_tiles, a.packed.group, heads.kv_heads)));
    m.out = Func("amx_out");
    m.out(x, ii, t, kb, qb, h, b) = m.out_tiles(x, ii, t, kb, qb, h, b);
    a.block_out(c, kb, ii, qb, h, b) = m.out(c % kAmxTile, ii, c / kAmxTile, kb, qb, h, b);
}

}  // namespace attngen
