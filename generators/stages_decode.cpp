// define_decode_attention (declared and described in stages.h).
#include <cmath>
#include <limits>
#include <string>

#include "layout.h"
#include "stages.h"

namespace attngen {

using namespace Halide;

CacheViews define_cache_views(const Func &key_blocks, const Func &value_panels, const Expr &panels,
                              const std::function<Expr(const Expr &)> &widen) {
    Var j("j"), kd("kd"), khk("khk"), kitem("kitem");
    CacheViews v{Func("cached_keys"), Func("cached_values")};
    v.keys(j, kd, khk, kitem) =
        widen(key_blocks(j % kCacheKeyBlock, kd, j / kCacheKeyBlock, khk, kitem));
    v.values(kd, j, khk, kitem) = widen(value_panels(
        kd % kCacheValuePanel, j, clamp(kd / kCacheValuePanel, 0, panels - 1), khk, kitem));
    return v;
}

DecodeAttentionStage define_decode_attention(const DecodeInputs &in, int split_keys,
                                             DecodeSplit split_kind) {
    if (split_keys <= 0 || split_keys % kReductionLanes != 0) {
        throw CompileError("decode attention needs split_keys a positive multiple of " +
                           std::to_string(kReductionLanes) + "; got " + std::to_string(split_keys));
    }
    DecodeAttentionStage a;
    const Var &j = a.j, &k = a.k, &r = a.r, &c = a.c, &hk = a.hk, &b = a.b, &u = a.u, &s = a.s;
    const Var &i = a.i, &h = a.h, &d = a.d;
    const Expr &group = in.group;

    const Expr rounded_keys =
        (in.key_limit + (kReductionLanes - 1)) / kReductionLanes * kReductionLanes;
    // ShrinkToCall shares the call's keys out evenly among as many splits as split_keys-key
    // splits would need. Splits of split_keys each left a last split of a few keys that cost
    // a whole one (its reads clamped, its keys masked): a GPT-2 step over 1025 keys computed
    // 5 x 256. Evenly (5 x 208), attngen_mha_decode alone at the gpt2-decode shape (its
    // kernels from the generator, timed interleaved on attngen's pool, 2 threads, Zen 4), old /
    // new: 1025 keys 1.44x, 1100 1.33x, 1300 1.33x, 2049 1.14x; 1024 keys and the llama3 shape
    // at 4096, 4097, 4500 and 32769 keys level (the same splits, or one short one in 17).
    // A split of an odd number of 16-key groups starts its odd-numbered splits half way into a
    // block of the cache's keys (kCacheKeyBlock), whose score tiles then read two runs: splits
    // rounded to whole blocks instead (5 x 224 at 1025 keys) took 1.13x the time at 1025 keys,
    // 1.12x at 2049, 1.08x at 600, and the same at 1100 and 1300.
    const Expr even_splits = max((rounded_keys + (split_keys - 1)) / split_keys, 1);
    const Expr even_split = (rounded_keys + even_splits - 1) / even_splits;
    const Expr split =
        split_kind == DecodeSplit::Fixed
            ? Expr(split_keys)
            : max((even_split + (kReductionLanes - 1)) / kReductionLanes * kReductionLanes,
                  kReductionLanes);
    a.split_keys = split;
    a.num_splits = (in.key_limit + split - 1) / split;
    a.rows = group * in.q_len;
    a.dv = in.dv;

    // Row r of key/value head hk is query i = r / group of query head hk * group + r % group:
    // the queries that share a key/value head are rows of one problem, so each cached key and
    // value is read once per step, not once per query head.
    // Rows past the last are read at the last: register tiles may round the rows up.
    const Expr row = min(r, a.rows - 1);
    a.q_rows = Func("decode_q_rows");
    a.q_rows(d, r, hk, b) = in.q(d, row / group, hk * group + row % group, b);

    // Keys past the cache (the last split's tail) read its last position, masked below.
    const Expr key = min(likely(j), in.max_len - 1);
    // Clamped so that Halide can bound the read; the runtime refuses items out of range.
    const Expr item = clamp(in.items(b), 0, in.max_items - 1);
    a.r_dot = RDom(1, in.dk - 1, "decode_r_dot");
    a.score = Func("decode_score");
    a.score(j, r, hk, b) = a.q_rows(0, r, hk, b) * in.k_cache(key, 0, hk, item);
    a.score(j, r, hk, b) += a.q_rows(a.r_dot, r, hk, b) * in.k_cache(key, a.r_dot, hk, item);

    // Query i sees the keys its item holds, and with a causal mask those up to its own
    // position n_b - q_len + i. As in the flash path, a visible logit stays above the lowest
    // float, so a split maximum of the lowest float means "nothing visible in this split".
    const Expr n = in.lengths(b);
    MaskInputs causal_only;
    causal_only.causal = in.causal;
    const Expr visible = j < n && j <= r / group + causal_key_offset(causal_only, in.q_len, n);
    const Expr lowest = Expr(std::numeric_limits<float>::lowest());
    const Expr above_lowest = Expr(std::nextafter(std::numeric_limits<float>::lowest(), 0.0f));
    a.logit = Func("decode_logit");
    a.logit(j, r, hk, b) =
        select(visible, max(a.score(j, r, hk, b) * in.scale, above_lowest), lowest);

    // Each split's softmax against its own maximum, with kReductionLanes partial results (a
    // fixed order of additions for every target).
    a.r_lane_groups = RDom(0, split / kReductionLanes, "decode_r_lane_groups");
    a.r_lanes = RDom(0, kReductionLanes, "decode_r_lanes");
    const Expr lane_key = s * split + a.r_lane_groups * kReductionLanes + u;
    a.max_lanes = Func("decode_max_lanes");
    a.max_lanes(u, s, r, hk, b) = lowest;
    a.max_lanes(u, s, r, hk, b) = max(a.max_lanes(u, s, r, hk, b), a.logit(lane_key, r, hk, b));
    a.split_max = Func("decode_split_max");
    a.split_max(s, r, hk, b) = lowest;
    a.split_max(s, r, hk, b) = max(a.split_max(s, r, hk, b), a.max_lanes(a.r_lanes, s, r, hk, b));

    // Indexed by the key's place k in its split s: indexed by position j, the split's maximum
    // was split_max(j / split), one integer division per lane of every vector of probabilities.
    const Expr this_max = a.split_max(s, r, hk, b);
    a.probs = Func("decode_probs");
    a.probs(k, s, r, hk, b) = select(this_max == lowest, 0.0f,
                                     exp_nonpositive(a.logit(s * split + k, r, hk, b) - this_max));
    a.sum_lanes = Func("decode_sum_lanes");
    a.sum_lanes(u, s, r, hk, b) = 0.0f;
    a.sum_lanes(u, s, r, hk, b) += a.probs(a.r_lane_groups * kReductionLanes + u, s, r, hk, b);
    a.split_sum = Func("decode_split_sum");
    a.split_sum(s, r, hk, b) = 0.0f;
    a.split_sum(s, r, hk, b) += a.sum_lanes(a.r_lanes, s, r, hk, b);

    a.r_keys = RDom(0, split, "decode_r_keys");
    const Expr split_key = s * split + a.r_keys;
    a.split_acc = Func("decode_split_acc");
    a.split_acc(c, s, r, hk, b) = 0.0f;
    // Not clamped to the head (DecodeInputs::v_cache): a clamp of a tile's features made each
    // vector a gather, where the head is not a multiple of the tile.
    a.split_acc(c, s, r, hk, b) +=
        a.probs(a.r_keys, s, r, hk, b) * in.v_cache(c, min(split_key, in.max_len - 1), hk, item);
    // A split's result: its dv outputs, then its maximum and its sum as two more columns. The
    // merge reads all three after every split's task has run, and a Func computed inside the
    // task could not be read there.
    const Expr dv = in.dv;
    a.split_out = Func("decode_split_out");
    a.split_out(c, s, r, hk, b) = select(c < dv, a.split_acc(min(c, dv - 1), s, r, hk, b), c == dv,
                                         a.split_max(s, r, hk, b), a.split_sum(s, r, hk, b));
    const auto split_max_of = [&](const Expr &split) { return a.split_out(dv, split, r, hk, b); };
    const auto split_sum_of = [&](const Expr &split) {
        return a.split_out(dv + 1, split, r, hk, b);
    };

    // The splits merged by their log-sum-exp (FlashDecoding): each split's sum and output
    // scaled by exp(its max - the overall max). A row with nothing visible has sum 0 and
    // output 0.
    a.r_splits = RDom(0, a.num_splits, "decode_r_splits");
    a.total_max = Func("decode_total_max");
    a.total_max(r, hk, b) = lowest;
    a.total_max(r, hk, b) = max(a.total_max(r, hk, b), split_max_of(a.r_splits));
    a.split_weight = Func("decode_split_weight");
    const Expr m = split_max_of(s);
    a.split_weight(s, r, hk, b) =
        select(m == lowest, 0.0f, exp_nonpositive(m - a.total_max(r, hk, b)));
    a.total_sum = Func("decode_total_sum");
    a.total_sum(r, hk, b) = 0.0f;
    a.total_sum(r, hk, b) += split_sum_of(a.r_splits) * a.split_weight(a.r_splits, r, hk, b);
    a.merged = Func("decode_merged");
    a.merged(c, r, hk, b) = 0.0f;
    a.merged(c, r, hk, b) +=
        a.split_out(min(c, dv - 1), a.r_splits, r, hk, b) * a.split_weight(a.r_splits, r, hk, b);
    const Expr sum = a.total_sum(r, hk, b);
    a.rows_out = Func("decode_rows_out");
    a.rows_out(c, r, hk, b) = a.merged(c, r, hk, b) * select(sum > 0.0f, 1.0f / sum, 0.0f);

    a.out = Func("attention_out");
    a.out(c, i, h, b) = a.rows_out(c, h % group + group * i, h / group, b);
    return a;
}

}  // namespace attngen
