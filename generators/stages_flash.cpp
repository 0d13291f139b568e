// define_flash_attention (declared and described in stages.h).
#include <cmath>
#include <limits>
#include <string>

#include "layout.h"
#include "stages.h"

namespace attngen {

using namespace Halide;

FlashAttentionStage define_flash_attention(const Func &q, const Func &k, const Func &v,
                                           const Expr &dk, const Expr &dv, const Expr &q_len,
                                           const Expr &kv_len, const Expr &group, const Expr &scale,
                                           const MaskInputs &mask, const Expr &query_block,
                                           int key_block, bool fixed_blocks, const Type &products,
                                           int value_tile, bool float_operand,
                                           const AmxHeads &amx_heads, const Expr &sources_unrotated,
                                           const Type &out_type) {
    const bool amx = amx_heads.kv_heads.defined();
    // AMX's products reduce whole blocks of kAmxBlock keys.
    const int key_multiple = amx ? kAmxBlock : kReductionLanes;
    if (key_block <= 0 || key_block % key_multiple != 0) {
        throw CompileError("flash attention needs key_block a positive multiple of " +
                           std::to_string(key_multiple) + "; got " + std::to_string(key_block));
    }
    if (amx && (products != BFloat(16) || float_operand || fixed_blocks)) {
        throw CompileError(
            "flash attention in AMX tiles takes bfloat16 products in pairs and "
            "blocks that shrink to the call");
    }
    FlashAttentionStage a;
    // Blocks shrink to the problem: a call with 10 queries and 20 keys computes a 10 x 32
    // block, not query_block x key_block (attngen_sdpa at the tutorial shape: 24 ms with whole
    // blocks, about 2 ms with these).
    const Expr qblock = fixed_blocks ? query_block : min(query_block, q_len);
    // Keys in blocks of at most key_block, as even as whole kKeyBlockGrains make them: 1024 keys
    // in blocks of at most 768 go as two of 512, not as 768 and 256 (the kernels alone, AVX-512,
    // Zen 5: causal 1024 keys 1.021x, unmasked 1.017x, 16 heads of 128 causal 1.020x; the long
    // shapes 1.002-1.015x). Rounded to a key_multiple only, blocks of 752 keys (16384 in 22)
    // left half of their last score tiles empty and lost 1-2%. A head of at most key_block keys
    // is one block, its length rounded up to key_multiple.
    const Expr key_blocks = (kv_len + (key_block - 1)) / key_block;
    const Expr even_share = (kv_len + (key_blocks - 1)) / key_blocks;
    const Expr one_block = (kv_len + (key_multiple - 1)) / key_multiple * key_multiple;
    const Expr kblock =
        fixed_blocks ? Expr(key_block)
                     : min(key_block, one_block,
                           (even_share + (kKeyBlockGrain - 1)) / kKeyBlockGrain * kKeyBlockGrain);
    a.query_block = qblock;
    a.mask = mask;
    a.key_block = kblock;
    const Var &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u;
    const Var &kb = a.kb, &jj = a.jj, &ii = a.ii, &qb = a.qb;

    // Key panels on the CPU, where a score tile's keys start at a multiple of kKeyPanel (key
    // blocks are multiples of it), for float32 operands only: bfloat16 pairs in panels measured
    // level (bench/RESULTS.md), so they keep the transposed rows.
    a.packed = define_packed_score(q, k, v, dk, dv, q_len, kv_len, group, products,
                                   !fixed_blocks && (products == Float(32) || float_operand),
                                   value_tile, float_operand);
    a.packed.sources_unrotated = sources_unrotated;
    const Expr num_blocks = (kv_len + (kblock - 1)) / kblock;
    if (amx) define_amx_score(a, q, dk, q_len, amx_heads, num_blocks * (kblock / kAmxTile));
    const MaskedLogits logits = define_masked_logits(a.packed.score, scale, mask, q_len, kv_len);
    const Expr lowest = logits.masked_value;
    const Expr key = kb * kblock + jj;
    // The block's logits, once: both passes below read them. A visible logit is kept above
    // masked_value, so that a block maximum of masked_value means "every key of this block is
    // masked for this query" and the probabilities need no mask bits of their own. (They had a
    // byte per key, written here and read in block_probs: a narrowing store and a load, compare
    // and select per vector of keys.) Only a visible logit of exactly the lowest float moves, to
    // the next float up: softmax still sees equal logits as equal.
    // likely() on the visible value (Halide's loop partitioning reads it in a select's values,
    // not in its condition) splits the score tile's loops into the tiles that some key or row
    // limit cuts and the steady state between them, which stores scale * score with no mask
    // test: without it every vector of logits took a broadcast, an add, a compare, a mask-or
    // and a blend for the causal and length limits (the AVX-512 epilogue), also where no limit
    // falls. Without a mask that reads memory the steady state is every tile but the last (and,
    // causal, the diagonal's); with one, the steady state keeps only the mask's own test.
    // scripts/paired_ab.py, Zen 5, old/new: mha_forward/long-single 1.028x and 1.024x (22 of 22
    // pairs), AVX2 1.019x, bfloat16 1.029x; bert-512, bert-128, gpt2-causal and long-causal level
    // (0.995-1.010x).
    const Expr above_lowest = Expr(std::nextafter(std::numeric_limits<float>::lowest(), 0.0f));
    a.block_logits = Func("block_logits");
    a.block_logits(jj, kb, i, h, b) = select(logits.masked(key, i, h, b), lowest,
                                             likely(max(logits.logit(key, i, h, b), above_lowest)));
    // A key block is visited only if some query of the query block qb may see some key in it:
    // its first key is within the causal limit of the block's last query. Halide skips the
    // block's producers with it, so a causal mask halves the work instead of masking it. (The
    // key lengths are left to the per-key mask: in this condition they skipped only the
    // consumer, not the producers, and a read of kv_lengths there broke code generation once
    // the block buffers were hoisted to the task.)
    const Expr row = qb * qblock + ii;
    const Expr last_row = min(qb * qblock + (qblock - 1), q_len - 1);
    // The causal limit enters as an offset inside one min, not as a select between per-mode
    // limits: Halide then proves the trimmed loops below need no condition inside them (with a
    // select of limits, each step kept an `if`, and LLVM spilled the probs x values
    // accumulators to the stack around it: 1.5x the time).
    const Expr last_key = min(last_row + causal_key_offset(mask, q_len, kv_len), kv_len - 1);
    a.r_blocks = RDom(0, num_blocks, "r_blocks");
    a.r_blocks.where(a.r_blocks * kblock <= last_key);
    // Within a visited block, the reductions below stop at the same limit: the block that
    // holds the diagonal is computed only up to the last key its query block may see, not
    // whole. Halide turns these conditions into loop bounds, and bounds inference shrinks the
    // block's logits and probabilities with them. Keys past the limit are masked for every
    // query of the block, so the results are the same. The limit is at least 1, so that the
    // trimmed loops are never empty to Halide: a visited block always holds a visible key, but
    // bounds inference cannot know that, and for an empty loop it placed the block's logits
    // before key 0, where they read the additive mask out of bounds (found by the fuzzer).
    const Expr last_key_in_block = max(last_key - kb * kblock, 1);

    // The softmax of one key block against its own maximum. Partial maxima and sums in
    // kReductionLanes lanes fix the order of the additions for every target.
    a.r_lane_groups = RDom(0, kblock / kReductionLanes, "r_lane_groups");
    a.r_lane_groups.where(a.r_lane_groups * kReductionLanes <= last_key_in_block);
    a.r_lanes = RDom(0, kReductionLanes, "r_lanes");
    const Expr lane_key = a.r_lane_groups * kReductionLanes + u;
    a.max_lanes = Func("max_lanes");
    a.max_lanes(u, kb, ii, qb, h, b) = lowest;
    a.max_lanes(u, kb, ii, qb, h, b) =
        max(a.max_lanes(u, kb, ii, qb, h, b), a.block_logits(lane_key, kb, row, h, b));
    a.block_max = Func("block_max");
    a.block_max(kb, ii, qb, h, b) = lowest;
    a.block_max(kb, ii, qb, h, b) =
        max(a.block_max(kb, ii, qb, h, b), a.max_lanes(a.r_lanes, kb, ii, qb, h, b));

    // A masked key's logit lies at least 2^104 below a block maximum that some visible key set,
    // so exp_nonpositive gives it 0. A block where every key is masked has maximum masked_value
    // and every logit masked_value: it is shifted by 0 instead, so that its logits stay far
    // below exp's underflow and give 0 too. (A select of 0 on the maximum around the exp, whose
    // own underflow is a select, made LLVM combine the two conditions in 16-bit lanes: 8 more
    // instructions per 8 keys in the AVX2 loop of block_probs, which was 13% of the attention
    // task at sdpa/bert-512.)
    const Expr block_max = a.block_max(kb, ii, qb, h, b);
    const Expr shift = select(block_max == lowest, 0.0f, block_max);
    // Probabilities rounded to the products' type (below) take an exp to match that type.
    const Type probs_rounded_to = a.packed.paired || a.packed.rounded ? products : Float(32);
    Expr prob;
    if (amx) {
        // AMX inlines the logits into this exp (schedule_flash_attention_cpu). max(logit,
        // above_lowest) - shift, clamped at kExpFloor, is max(logit - shift, floor) with one
        // floor per row, max(above_lowest - shift, kExpFloor): rounding is monotone, so both
        // maxima are the same numbers. Per 16 keys, an FMA (score * scale - shift) and a max
        // where there were a multiply, a max, a subtraction and a max, of about 17 vector
        // operations in a loop bound by them (perf: 31% of mha_forward_bf16/long-single, Intel
        // Xeon with AMX). A masked key takes the floor itself, whose exp is exactly 0 as
        // before. The floor is written as the select it comes to: floats next to above_lowest
        // are 2^104 apart, so above_lowest - shift is at least kExpFloor only where shift is
        // above_lowest. (Written as the max, Halide's simplifier turned it into above_lowest -
        // min(shift, above_lowest - kExpFloor), whose constant rounds to above_lowest: a floor
        // of 0 and every probability 1, which HalfPrecision.MasksAndHugeLogits caught.)
        const Expr floor = select(shift == above_lowest, 0.0f, kExpFloor);
        const Expr visible = max(logits.logit(key, row, h, b) - shift, floor);
        prob = exp_from_floor(select(logits.masked(key, row, h, b), kExpFloor, likely(visible)),
                              probs_rounded_to);
    } else {
        prob = exp_nonpositive(a.block_logits(jj, kb, row, h, b) - shift, probs_rounded_to);
    }
    a.block_probs = Func("block_probs");
    // The products' operand rounded in the exp's own loop, not in a pass over the stored
    // probabilities of its own (a load, the rounding and a narrowing store per vector: with
    // Halide's emulated cast, 3.6% of mha_forward_bf16/bert-512's attention task, perf).
    // Fused, with round_probability's two operations (scripts/paired_ab.py, 12 pairs, Zen 5,
    // old/new): mha_forward_bf16/ gpt2-causal 1.007x, long-causal 1.011x, long-single 1.015x,
    // bert-512 1.000x; a cheaper rounding alone, in its own pass, measured level (0.996-1.002x,
    // with Halide's own lowering of a rounding shift). The rounded copies of the variants
    // without vdpbf16ps (8 pairs each, AVX-512 and AVX2): level, 1.001-1.006x. AMX's tiles
    // load the rounding from the tuple's second buffer as from any other (its own pass had 9%
    // of the samples of mha_forward_bf16/long-single, perf, Intel Xeon with AMX).
    // On AMX the operand is block_probs' second element as well (define_amx_probs_and_sums).
    Expr summed;  // what sum_lanes adds, where the sums have a loop of their own
    if (amx) {
        define_amx_probs_and_sums(a, prob, products, last_key_in_block);
    } else if (a.packed.rounded || a.packed.paired) {
        a.block_probs(jj, kb, ii, qb, h, b) = {prob,
                                               round_probability(prob, products, a.packed.rounded)};
        summed = a.block_probs(lane_key, kb, ii, qb, h, b)[0];
        // The products' operand, rounded or in pairs, inlined into the products.
        a.probs_operand = Func("probs_operand");
        a.probs_operand(jj, kb, ii, qb, h, b) = a.block_probs(jj, kb, ii, qb, h, b)[1];
    } else {
        a.block_probs(jj, kb, ii, qb, h, b) = prob;
        summed = a.block_probs(lane_key, kb, ii, qb, h, b);
    }
    if (summed.defined()) {
        a.sum_lanes = Func("sum_lanes");
        a.sum_lanes(u, kb, ii, qb, h, b) = 0.0f;
        a.sum_lanes(u, kb, ii, qb, h, b) += summed;
    }
    a.block_sum = Func("block_sum");
    a.block_sum(kb, ii, qb, h, b) = 0.0f;
    a.block_sum(kb, ii, qb, h, b) += a.sum_lanes(a.r_lanes, kb, ii, qb, h, b);

    a.block_out = Func("block_out");
    if (amx) {
        define_amx_block_out(a, v, dv, kv_len, amx_heads, num_blocks * (kblock / 2),
                             last_key_in_block);
    } else if (a.packed.paired) {
        // Pairs of keys (kblock is even): the pair that holds the last visible key is the last.
        // The first pair is always visible (last_key_in_block is at least 1).
        a.r_block_keys_first = RDom(0, 2, "r_block_keys_first");
        a.r_block_keys = RDom(0, 2, 1, kblock / 2 - 1, "r_block_keys");
        a.r_block_keys.where(2 * a.r_block_keys.y <= last_key_in_block);
        const auto pair_product = [&](const Expr &e, const Expr &pair) {
            return cast<float>(a.probs_operand(2 * pair + e, kb, ii, qb, h, b)) *
                   cast<float>(a.packed.v_packed(e, c, kb * (kblock / 2) + pair, h / group, b));
        };
        a.block_out(c, kb, ii, qb, h, b) = 0.0f;
        a.block_out(c, kb, ii, qb, h, b) += pair_product(a.r_block_keys_first, 0);
        a.block_out(c, kb, ii, qb, h, b) += pair_product(a.r_block_keys.x, a.r_block_keys.y);
    } else {
        // Rounded apart from the sum, which adds them unrounded as the pairs' path does.
        const Func probs = a.packed.rounded ? a.probs_operand : a.block_probs;
        a.r_block_keys = RDom(1, kblock - 1, "r_block_keys");
        a.r_block_keys.where(a.r_block_keys <= last_key_in_block);
        a.block_out(c, kb, ii, qb, h, b) =
            probs(0, kb, ii, qb, h, b) * a.packed.values(c, kb * kblock, h / group, b);
        a.block_out(c, kb, ii, qb, h, b) +=
            probs(a.r_block_keys, kb, ii, qb, h, b) *
            a.packed.values(c, kb * kblock + a.r_block_keys, h / group, b);
    }

    // The online combination over the visited key blocks, per query block.
    a.state = Func("flash_state");
    a.state(c, ii, qb, h, b) = {0.0f, lowest, 0.0f};
    const Expr acc = a.state(c, ii, qb, h, b)[0];
    const Expr running_max = a.state(c, ii, qb, h, b)[1];
    const Expr running_sum = a.state(c, ii, qb, h, b)[2];
    const Expr this_max = a.block_max(a.r_blocks, ii, qb, h, b);
    const Expr new_max = max(running_max, this_max);
    // One of the two factors is exp(0) = 1, the other exp(-|running_max - this_max|): one exp,
    // not two. The state is vectorized over c, so this exp runs once per feature and key block
    // (perf: the update took 7% of attngen_sdpa at long-single with two exps).
    // A running max still at `lowest` (nothing seen yet) has acc and sum 0, so its factor does
    // not matter as long as it is finite.
    const Expr running_is_max = running_max >= this_max;
    const Expr gap_factor = exp_nonpositive(-abs(running_max - this_max));
    const Expr old_factor = select(running_is_max, 1.0f, gap_factor);
    const Expr this_factor = select(running_is_max, gap_factor, 1.0f);
    // With one key block, the update runs at most once, from the initial state: old_factor is 0
    // or multiplies zeros, this_factor is 1, and new_max this_max; so the state is the block's own
    // values, bit for bit, without the exp. A schedule that specializes the update on
    // single_key_block drops the general form (Halide takes the condition as true inside): its
    // exp per feature took 7% of the bfloat16 attention task at bert-128, 4.5% of the float32
    // one (perf, AVX-512, Zen 4).
    a.single_key_block = kv_len <= key_block;
    const Expr block_out = a.block_out(c, a.r_blocks, ii, qb, h, b);
    const Expr block_sum = a.block_sum(a.r_blocks, ii, qb, h, b);
    a.state(c, ii, qb, h, b) = {
        select(a.single_key_block, block_out, acc * old_factor + block_out * this_factor),
        select(a.single_key_block, this_max, new_max),
        select(a.single_key_block, block_sum, running_sum * old_factor + block_sum * this_factor)};

    // A fully masked row has sum 0 and output 0. Each feature divides by its own lane's sum.
    // The inverse taken once per row instead (a Func of the rows from feature 0's lane, computed
    // per query block, vectorized over the rows), because perf put 8% of the bfloat16 attention
    // task's samples at bert-128 around these vdivps: scripts/ab_runs.py, 3 rounds, Zen 4,
    // sdpa/tutorial 0.95x, gpt2-causal 0.97x, bert-128 0.97x, bert-512 1.00x; the division's
    // latency overlaps the stores, and the samples were the stores'.
    a.out = Func("attention_out");
    const Expr final_sum = a.state(c, i % qblock, i / qblock, h, b)[2];
    a.out(c, i, h, b) = cast(out_type, a.state(c, i % qblock, i / qblock, h, b)[0] *
                                           select(final_sum > 0.0f, 1.0f / final_sum, 0.0f));
    return a;
}

}  // namespace attngen
