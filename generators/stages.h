// The algorithm of every attention stage, written once. Generators compose these and hand the
// resulting Funcs to a schedule (schedule_cpu.h); nothing here depends on a target.
//
// Halide's dimension 0 is innermost: a row-major [B, L, D] tensor is the Func (d, l, b).
#ifndef ATTNGEN_GENERATORS_STAGES_H
#define ATTNGEN_GENERATORS_STAGES_H

#include <functional>
#include <string>
#include <vector>

#include "Halide.h"
#include "layout.h"

namespace attngen {

// result(o, n) = bias(o) + sum_f x(f, n) * w_t(o, f) over n = l + b * len, the rows of every
// batch in one sequence: register tiles of rows then cross batch boundaries, so a batch of 10
// rows costs 10 rows, not a 12-row tile (tutorial shape). The input features f are split into
// `groups` groups of `group_size` (f = g * group_size + d) so the output projection can read the
// per-head attention output directly, without a head-merge copy.
struct ProjectionStage {
    Halide::Func acc;  // acc(o, n): the reduction, initialised to the bias
    // x rounded to the weights' precision, undefined with float32 weights (which multiply x as
    // it is): operand(d, g, n) as float with float16 weights and a GPU's bfloat16 weights; with
    // a CPU's bfloat16 weights (in pairs, below) operand(f, n) as bfloat16 over the flattened
    // features f = g * group_size + d, 0 for the one past an odd count, or its values as float32
    // (define_projection's float_operand).
    Halide::Func operand;
    // operand is a view of a SharedOperand's Func (define_projection's shared_operand), which
    // its own schedule computes: a schedule leaves the view inline.
    bool operand_shared = false;
    // Defined when the bfloat16 operand is written group by group, an update over (d, g) of
    // operand(g * group_size + d, n), over a pure definition that writes nothing (undef); a
    // second update writes the 0 past an odd count.
    Halide::RDom r_operand;
    // Bfloat16 weights for CPUs are stored in pairs of consecutive input features (kWeightPairs
    // and weights_in_pairs in layout.h), and the reduction runs over r.x, the feature within a
    // pair, and r.y, the pair, so that a schedule can reduce each pair in one vdpbf16ps lane.
    // Otherwise r.x is the feature d within a group and r.y the group.
    bool paired = false;
    Halide::Func result;   // result(o, n), float32 unless store_result_as stored it narrower
    Halide::Func weights;  // w_t as define_projection was given it, for a schedule to stage
    Halide::Var o{"o"}, n{"n"};
    Halide::RDom r;
    Halide::Expr rows;          // rows of all batches
    Halide::Expr in_features;   // the reduction's extent: group_size * groups
    Halide::Expr groups;        // of the input's features (heads, or 1)
    Halide::Expr out_features;  // the bias's extent (the weights may be padded past it)
    // With a FewRowsPath: for calls of at most few_rows rows, result is few_rows_sum,
    // bias(o) + the sum over u of split_acc(o, n, u), the products of features d = u (mod
    // FewRowsPath::split) within each group; a GPU block's threads then share one output's
    // reduction (matrix-vector products of decoding).
    Halide::Func split_acc, few_rows_sum;
    Halide::RDom r_split;  // split_acc's reduction: (feature step within a group, group)
    Halide::Var u{"u"};
    Halide::Expr few_rows;  // undefined without the path
    // With a DirectPath: for calls where `direct` holds, result is acc_direct, the same
    // reduction as acc, which a CPU schedule keeps in one register tile per row tile for the
    // whole reduction (no buffer of partial sums to copy to the result).
    Halide::Func acc_direct;
    Halide::Expr direct;  // undefined without the path
    // With bfloat16 weights in pairs and float_operand: the weights widened to float32 as
    // (o, e, pair), o innermost, which the products read. Inline, each weight is widened where
    // a register tile reads it; a schedule may stage it (Func::in), so that the tiles load
    // float32 as a float32 projection's do.
    Halide::Func weights_f32;
    // With float16 weights on a CPU (not in pairs): the weights widened to float32 as (o, f),
    // which the products read. Inline, each weight vector is widened where a register tile reads
    // it, one instruction with F16C; a schedule may stage it (Func::in), so that the tiles load
    // float32 as a float32 projection's do.
    Halide::Func weights_widened;
    // With a StagedPath: for calls of more than its min_outputs outputs (rows x out_features),
    // result is staged_acc, bias(o) + the sum over chunks kb of staged_part(o, n, kb), the
    // products of input features kb * chunk + r_chunk. staged_x(f, n) and staged_w(o, f) are
    // the operands over flat features f, zero past the last, so that a GPU schedule can copy a
    // chunk of each into shared memory and sum it without a guard.
    Halide::Func staged_x, staged_w, staged_part, staged_acc;
    Halide::RDom r_chunk, r_chunks;
    int staged_chunk = 0;  // StagedPath::chunk, r_chunk's extent
    Halide::Var f{"f"}, kb{"kb"};
    Halide::Expr staged;  // undefined without the path
    // With an AmxPath: result is bias(o) + amx_out(o % kAmxTile, n, o / kAmxTile) +
    // amx_tail(o, n). amx_tiles(xi, n, t), a tile of kAmxTile outputs t * kAmxTile + xi by
    // kAmxTile rows, sums whole blocks of kAmxBlock input features (r_amx: feature in block,
    // block) in the shape Halide 21's AMX lowering matches: the tile initialised to 0, both
    // operands loads from buffers, amx_operand the rows clamped (the operand itself where its
    // update merges several groups into bfloat16 rows), the weights read in place
    // (AmxPath::stored, panels one tile wide: tile t is panel t). amx_out is the tile's copy to
    // memory; amx_tail the features past the last whole block (r_amx_tail), added only where
    // amx_has_tail holds, so that a schedule specialized on it computes no amx_tail for input
    // features that are a multiple of kAmxBlock.
    Halide::Func amx_operand, amx_tiles, amx_out, amx_tail;
    Halide::RDom r_amx, r_amx_tail;
    Halide::Expr amx_has_tail;
    // With AmxPath::min_rows: result is amx_result (bias + amx_out + amx_tail) where amx_rows,
    // the other paths' sum elsewhere.
    Halide::Func amx_result;
    Halide::Expr amx_rows;
    Halide::Var xi{"xi"}, t{"t"};
};

// x(d, g, n) is read at rows clamp(n, 0, rows - 1) so that a schedule may compute whole
// register tiles past the last row without reading outside the input. The weights are stored as
// `storage`, float32, bfloat16 or float16: the products then take x rounded to that type
// (round_operand) and the weights, both exact in float32, and accumulate in float32. Bfloat16
// weights for CPUs come in pairs: w_t(2 o + f % 2, f / 2) is the weight of output o and input f.
// w_t holds `storage` itself, or for the 16-bit formats their bit patterns as uint16 (some GPU
// targets: layout.h, half_weights_as_bits).
// float_operand (bfloat16 weights): x rounded to bfloat16 is stored as float32, for targets
// without a bfloat16 dot product, whose register tiles then broadcast it as it is instead of
// widening every element at every step.
// The schedule's choice of a second algorithm for few rows (ProjectionStage::few_rows_sum):
// split 0 for none. Weights in pairs (a CPU's bfloat16) keep the one algorithm.
struct FewRowsPath {
    int split = 0;
    int rows = 0;
};
// The schedule's choice of a second copy of the reduction (ProjectionStage::acc_direct) for
// calls of more than min_rows rows over at most max_in_features input features: 0 for none.
struct DirectPath {
    int min_rows = 0;
    int max_in_features = 0;
};
// The schedule's choice of a third algorithm for calls of more than min_outputs outputs
// (ProjectionStage::staged_acc), reducing `chunk` input features per step: chunk 0 for none.
// Weights in pairs (a CPU's bfloat16) keep the one algorithm.
struct StagedPath {
    int chunk = 0;
    int64_t min_outputs = 0;
};
// The schedule's choice of Intel AMX's tile products (tdpbf16ps) for bfloat16 weights in pairs:
// `stored`, the weights' 3-D buffer (pair element, output in panel, pair row + pair_rows *
// panel; layout.h), whose panels are one tile wide, or undefined for none. With min_rows 0 the
// one algorithm; otherwise taken by calls of at least min_rows rows (ProjectionStage::
// amx_result), the others keeping the projection's other paths.
struct AmxPath {
    Halide::Func stored;
    Halide::Expr pair_rows;
    int min_rows = 0;
};
// AMX's tiles: 16 rows of 16 float32 sums, over kAmxBlock (layout.h) bfloat16 features.
constexpr int kAmxTile = 16;
static_assert(kPairPanelOutputs == kAmxTile, "AmxPath reads a panel of pairs as one tile");
// A projection's operand read from a Func that other projections share (InputOperands):
// rounded(f, first_row + m) is row m's flat input feature f, rounded as the projection's own
// operand would be. Undefined for an operand of the projection's own.
struct SharedOperand {
    Halide::Func rounded;
    Halide::Expr first_row;
};
ProjectionStage define_projection(const std::string &name, const Halide::Func &x,
                                  const Halide::Expr &group_size, const Halide::Expr &groups,
                                  const Halide::Expr &rows, const Halide::Expr &out_features,
                                  const Halide::Func &w_t, const Halide::Func &bias,
                                  const Halide::Type &storage,
                                  const FewRowsPath &few_rows_path = {},
                                  const DirectPath &direct_path = {}, bool float_operand = false,
                                  const StagedPath &staged_path = {}, const AmxPath &amx = {},
                                  const SharedOperand &shared_operand = {});

// The three input projections' operands (query, key and value: sources 0, 1 and 2) in one Func,
// for 16-bit weights on a CPU (define_projection's operand, whose rounding this repeats). A
// self-attention call passes one tensor as all three, and a cross-attention call often one as
// key and value: a source that is the one before it (key_is_query, value_is_key) rounds no rows
// of its own, and its projection reads that source's rows. So a tensor is read and rounded once
// however many projections take it. rounded(f, m) holds the sources' rows one after another:
// source s's row m at first_row[s] + m, written by update s over its row_counts[s] rows (`rows`;
// 0 where it repeats a source). The flags are taken only where the shapes agree, so a flag set
// wrongly cannot read past a source's rows. scripts/paired_ab.py, Zen 4, old/new:
// mha_forward_bf16/ tutorial-cross 1.025x, bert-512-b8 1.022x, bert-128 and bert-512 1.009x.
// row_tile: each source's rows rounded up to a multiple of it, the last row repeated, for AMX's
// tiles, which read whole tiles of rows where they are (kAmxTile).
struct InputOperands {
    Halide::Func rounded;
    std::vector<Halide::RDom> rows;
    std::vector<Halide::Expr> row_counts;
    std::vector<Halide::Expr> first_row;
    SharedOperand operand(int source) const { return {rounded, first_row.at(source)}; }
};
InputOperands define_input_operands(const std::vector<Halide::Func> &inputs,
                                    const std::vector<Halide::Expr> &in_features,
                                    const std::vector<Halide::Expr> &rows,
                                    const Halide::Type &storage, bool paired, bool float_operand,
                                    const Halide::Expr &key_is_query,
                                    const Halide::Expr &value_is_key, int row_tile = 1);

// The projection's result stored in `type` (Func p.result becomes the rounding of the sums):
// for a result that every reader rounds to that type before it multiplies.
void store_result_as(ProjectionStage &p, const Halide::Type &type);

// round_operand in integer arithmetic, for kernels that take their weights as bits
// (storage_bits_as_float): the same values, with no 16-bit float type in the kernel.
Halide::Expr round_operand_bits(const Halide::Expr &x, const Halide::Type &type);

// Weights stored in panels of panel_columns columns (layout.h, weight_panel_columns), as a
// buffer (row * panel_columns + column % panel_columns, column / panel_columns), seen as
// (column, row), the w_t that define_projection takes.
Halide::Func weight_panel_view(const Halide::Func &stored, int panel_columns);
// The same seen through the fused kernels' 3-D buffer (pair element, output in panel, row +
// stored_rows * panel) of weight_panel_outputs(pairs) outputs a panel.
Halide::Func weight_panel_view(const Halide::Func &stored, const Halide::Expr &stored_rows,
                               bool pairs);

// A 16-bit float's bits (uint16: bfloat16 or IEEE float16 as `storage` says) as the float32 of
// the same value, in integer arithmetic, for GPU kernels that cannot hold the format as Halide's
// type, or that keep it as bits (layout.h: half_weights_as_bits, half_cache_as_bits). With
// float16_instructions (CUDA: layout.h, float16_bits_by_instruction), float16 bits are
// reinterpreted as Halide's float16 and widened by the hardware instead.
Halide::Expr storage_bits_as_float(const Halide::Expr &bits, const Halide::Type &storage,
                                   bool float16_instructions = false);

// x as the bits (uint16) of `storage`, bfloat16 or float16, rounded to nearest even as Halide's
// cast rounds: a float16 beyond its range is infinite (the runtime refuses it before a KV cache
// takes it). For GPU kernels that keep the format as bits (layout.h, half_cache_as_bits).
// float16_instructions as for storage_bits_as_float: the hardware's rounding, the same results.
Halide::Expr float_to_storage_bits(const Halide::Expr &x, const Halide::Type &storage,
                                   bool float16_instructions = false);

// x rounded to nearest (even) in `type` (bfloat16 or float16) and widened back to float32.
// Float16 saturates at +-65504, its largest finite value, so that an activation beyond its range
// stays finite (README, "Precision").
Halide::Expr round_operand(const Halide::Expr &x, const Halide::Type &type);

// A probability p, finite and in [0, 1], rounded to `products` for a product's operand: as that
// type, or with as_float widened back to float32 (the operand of a float32 kernel). Bfloat16 is
// rounded to nearest with ties down, in integer arithmetic: an add and a shift per vector where
// Halide 21 emulates the cast's round to nearest even in five operations (its x86 backend leaves
// vcvtneps2bf16 disabled). Only exact ties round differently, and never by more than half a
// unit in the last place, the bound that the error analysis assumes (README, "Precision").
Halide::Expr round_probability(const Halide::Expr &p, const Halide::Type &products, bool as_float);

// A batched input x(d, l, b) of `len` rows per batch as rows x(d, 0, n): one group of all
// features, rows of all batches in one sequence.
Halide::Func as_rows(const Halide::Func &x, const Halide::Expr &len);

// The output projection's operand: the attention's per-head output out(d, l, h, b) read as
// merged(d, h, n), row n = l + b * len. The head merge is the reduction's index order, not a
// copy. With `row_places` (CPU kernels), each row's (l, b) is read from a table, `places`, that
// the caller computes once per call (compute_root); otherwise it is divided where it is read.
struct MergedHeads {
    Halide::Func merged;
    Halide::Func places;  // defined with row_places only
};
MergedHeads merge_heads(const Halide::Func &attention_out, const Halide::Expr &len,
                        const Halide::Expr &batch, bool row_places);

// Head split as an index remap: heads(d, l, h, b) = projected(h * head_dim + d, l + b * len),
// in float32 (a projection may store its result narrower: store_result_as).
Halide::Func split_heads(const std::string &name, const Halide::Func &projected,
                         const Halide::Expr &head_dim, const Halide::Expr &len);

// Rotary positions (RoPE), applied to projected query and key heads before the scores.
struct RopeInputs {
    Halide::Expr mode;  // 0 none, 1 half (pairs k, k + rotary_dim/2), 2 interleaved (2k, 2k+1)
    Halide::Expr rotary_dim;  // even, at most head_dim: features past it are not rotated
    Halide::Func inv_freq;    // (k) -> theta^(-2k / rotary_dim), double (the runtime's table)
};

// The cos and sin of the rotary angles, (k, l, b), of position(l, b) * inv_freq(k),
// k < rotary_dim / 2. The angle is formed and reduced to [-pi, pi] in double, so positions past
// 2^16 keep float accuracy, and its cos and sin come from double polynomials: no math library
// calls, which Halide's Mullapudi2016 autoscheduler cannot cost (an internal error).
struct RopeAngles {
    Halide::Func cos, sin;
};
RopeAngles define_rope_angles(const std::string &name, const RopeInputs &rope,
                              const Halide::Func &position);

// heads(d, l, h, b) rotated by angles (define_rope_angles); unchanged where mode is 0.
Halide::Func apply_rope(const std::string &name, const Halide::Func &heads, const RopeInputs &rope,
                        const RopeAngles &angles);

// Inputs describing the mask; see attngen_mask. Absent parts are fed by the runtime as
// broadcast buffers and switched off by the has_* flags.
struct MaskInputs {
    Halide::Func kv_lengths;  // (b) -> int32
    Halide::Func bool_mask;   // (j, i, b) -> uint8, nonzero = masked
    Halide::Func additive;    // (j, i, h, b) -> float
    Halide::Expr causal;      // 0 none, 1 top-left, 2 bottom-right
    // (b) -> the keys a bottom-right causal mask ends at for item b, where items differ (the
    // items of a KV cache); undefined: kv_len for every item. Only the per-key mask reads it:
    // the flash path's block skipping keeps kv_len, which visits a superset of the blocks.
    Halide::Func causal_end;
    Halide::Expr has_bool_mask;
    Halide::Expr has_additive;

    // True at run time when the call has neither a boolean nor an additive mask: a schedule's
    // specialization on it drops their loads.
    Halide::Expr unmasked() const { return !has_additive && !has_bool_mask; }
};

// Query i sees keys j <= i + causal_key_offset: 0 for a top-left causal mask, kv_len - q_len
// for a bottom-right one, kv_len (every key) without one. The one place the causal modes are
// told apart.
Halide::Expr causal_key_offset(const MaskInputs &mask, const Halide::Expr &q_len,
                               const Halide::Expr &kv_len);

// Mask inputs with neither a boolean nor an additive mask: keys past kv_lengths(b) and, with
// `causal`, past the diagonal are masked. causal_end stays undefined (kv_len).
MaskInputs key_lengths_mask(const Halide::Func &kv_lengths, const Halide::Expr &causal);

// Keys transposed and values copied so that schedules can round tiles up past the last key or
// feature, and the scores q . k over them: the first stage of both attention algorithms. Keys
// and values have heads / group heads (grouped-query attention): query head h reads key/value
// head h / group, and each key/value head is packed once, not once per query head.
// value_tile > 0 (float32 operands) is the features of a schedule's probs x values register
// tile: `values` reads the values where they are (a short head of whole tiles) or from
// v_panels, and v_packed is not computed.
//
// With bfloat16 products (`products`), q, k and v are rounded to bfloat16 and the products
// accumulate in float32, as a handle of that precision asks (attngen_precision). With
// float_operand (targets without a bfloat16 dot product) they are rounded where they are packed
// and held as float32 (PackedScore::rounded), and the float32 path multiplies them, its values
// always from v_panels. Otherwise the operands come in pairs along the reduction, the pair
// innermost, as the projections' bfloat16 weights do (ProjectionStage::paired), so that a
// schedule can reduce each pair in one vdpbf16ps lane: k_packed is (e, j, p, hk, b), feature
// 2 p + e of key j; v_packed is (e, c, p, hk, b), feature c of key 2 p + e; q_operand is
// (e, p, i, h, b), feature 2 p + e of query i in bfloat16, 0 past dk; and r_dot runs over
// (e, p) from the second pair, the first pair (r_dot_first over e) an update of its own ahead of
// it, so that a register tile's accumulators start from a product (TileReduction::first_pair).
// With float_values, only the keys and queries come in pairs: the values stay float32 as given
// (v_packed, v_panels and `values` as for float32 products), for a product whose other operand
// is float32 (define_attention's probabilities, which are its weights output).
struct PackedScore {
    // The keys, (d, j, hk, b): a Func of unclamped j that reads k at j clamped to kv_len - 1,
    // which the transposing copy stages (schedule_transpose); paired, in bfloat16
    Halide::Func k_source;
    // (j, d, hk, b), readable past kv_len; undefined with k_panels. Paired, only AMX's rotated
    // keys read it (the pairs come from k_word_rows).
    Halide::Func k_transposed;
    // key_panels: the keys in panels of kKeyPanel, (jl, d, jp, hk, b) = feature d of key
    // jp * kKeyPanel + jl, so that a score tile reads one contiguous run per panel. As rows of
    // k_transposed, each of a tile's dk steps read a row kv_len * 4 bytes from the last (64 KiB
    // at long-single): a new page every step, every row on one set of L1, the tile's keys
    // loaded again for every tile of rows (AVX2 sdpa at long-single 1.28x, gpt2-causal 1.27x).
    // Only where a tile's keys start at a multiple of kKeyPanel (the CPU flash kernel's key
    // blocks): elsewhere, as in the materialized path's tiles at the weights' buffer's min,
    // Halide cannot prove a vector lies in one panel and gathers it.
    Halide::Func k_panels;
    // Paired: each key's features two by two as 32-bit words, (p, j, hk, b) = the bits of
    // features 2 p (low half) and 2 p + 1 (high half) of key j, and those words transposed,
    // (j, p, hk, b), from which k_packed takes its pairs. A pair is then one word moved by the
    // transposing copy, as float32 keys are: transposed as bfloat16 (k_transposed), each element
    // was inserted into its vector on its own (vpinsrw, vpblendw; perf).
    Halide::Func k_words, k_word_rows;
    Halide::Func k_packed;  // (j, d, hk, b): a view of k_panels, or k_transposed; paired:
                            // its bfloat16 pairs
    Halide::Func v_packed;  // (c, j, hk, b), readable past dv and kv_len; or pairs
    // What the probs x values products read, as v_packed: v_packed itself, or (value_tile,
    // below) a choice at run time between v_panels and the values as given, read in place
    // (v_panels alone where rounded).
    // Read in place, keys past kv_len are clamped to the last but keys below 0 are not: every
    // reader asks for keys j >= 0.
    Halide::Func values;
    // With value_tile: the values in panels of value_tile features, (cl, j, cp, hk, b), feature
    // cp * value_tile + cl of key j, readable past dv and kv_len; `values` reads them where it
    // does not read in place.
    Halide::Func v_panels;
    Halide::Expr values_in_place;  // defined with value_tile: true when `values` reads in place
    int value_tile = 0;            // the value_tile it was defined for
    Halide::Func q_operand;        // (d, i, h, b), the queries at rows clamped to q_len; paired:
                                   // (e, p, i, h, b) in bfloat16 (above)
    Halide::Expr q_even_features;  // paired: dk is even (q_operand reads no clamped feature)
    Halide::Func q_rows;           // paired: (d, i, h, b), the queries by unclamped row, which
                                   // q_operand reads
    Halide::Func score;            // (j, i, h, b): q . k, reduction over r_dot
    Halide::RDom r_dot;            // over dk after the first term; paired: (e, p) from p = 1
    Halide::RDom r_dot_first;      // paired: over e of the first pair; undefined otherwise
    Halide::Expr dk;               // the keys' head size
    Halide::Expr group;            // query heads per key/value head
    Halide::Expr head_elements;    // of one key/value head's keys or values, whichever more
    bool paired = false;
    // Bfloat16 products without pairs (define_packed_score's float_operand): the queries, keys
    // and values are rounded to bfloat16 where they are packed and held as float32, and the
    // float32 path multiplies them. The products are the pairs' own, exact in float32.
    bool rounded = false;
    // Pairs of keys and queries with float32 values (define_packed_score's float_values):
    // v_packed, v_panels and `values` are then float32 products' own.
    bool float_values = false;
    // Defined when the queries and the keys k_source reads are rotations left inline
    // (apply_rope), which the CPU schedules compute where they pack them (q_operand, and
    // k_transposed, k_panels or k_word_rows; AMX's keys, which read k_transposed only where
    // keys rotate): true at run time when nothing rotates. Those stages specialize on it, and
    // are then copies of the projected heads.
    Halide::Expr sources_unrotated;
};
PackedScore define_packed_score(const Halide::Func &q, const Halide::Func &k, const Halide::Func &v,
                                const Halide::Expr &dk, const Halide::Expr &dv,
                                const Halide::Expr &q_len, const Halide::Expr &kv_len,
                                const Halide::Expr &group,
                                const Halide::Type &products = Halide::Float(32),
                                bool key_panels = false, int value_tile = 0,
                                bool float_operand = false, bool float_values = false);

// The logits score * scale + additive mask, and which of them are masked (causal, key lengths,
// boolean mask, or an additive -inf), as Funcs of (j, i, h, b). Keys past kv_len are masked.
struct MaskedLogits {
    Halide::Func logit;         // score * scale + additive mask, masked or not
    Halide::Func masked;        // bool
    Halide::Func masked_logit;  // the logit, or masked_value where masked
    Halide::Expr masked_value;  // the lowest finite float (see stages.cpp)
};
MaskedLogits define_masked_logits(const Halide::Func &score, const Halide::Expr &scale,
                                  const MaskInputs &mask, const Halide::Expr &q_len,
                                  const Halide::Expr &kv_len);

// exp(x) for x <= 0: exactly 0 from about -87.68 down (-inf too), subnormal between that and
// -87.34, as float exp is. With `products` a 16-bit type (the results are rounded to it before
// they are multiplied), a shorter polynomial of a coarser error that the rounding dwarfs
// (stages.cpp).
Halide::Expr exp_nonpositive(const Halide::Expr &x,
                             const Halide::Type &products = Halide::Float(32));
// exp_nonpositive's floor: its argument is clamped to it first, where 2^n is exactly +0.
constexpr float kExpFloor = -88.0f;
// exp_nonpositive of an argument already at least kExpFloor (and at most a rounding above 0),
// without the clamp: for a caller that folds the floor into a max of its own.
Halide::Expr exp_from_floor(const Halide::Expr &xc,
                            const Halide::Type &products = Halide::Float(32));

// Two 16-bit values' bits as one 32-bit word, `low` in its low half, and half e (0: the low
// one) of such a word as `type`: the bfloat16 keys' pairs are transposed as words, one element
// where there were two (PackedScore::k_words, AmxAttention::key_words).
Halide::Expr pair_word(const Halide::Expr &low, const Halide::Expr &high);
Halide::Expr word_half(const Halide::Expr &word, const Halide::Expr &e, const Halide::Type &type);

// Scaled score, masked softmax and weights x values for projected heads
// q(d, i, h, b), k(d, j, hk, b), v(c, j, hk, b), query head h reading key/value head h / group.
struct AttentionStage {
    PackedScore packed;      // packed keys and values, and the scores
    Halide::Func max_lanes;  // (u, i, h, b): per-lane running max of masked logits
    Halide::Func row_max;    // (i, h, b)
    Halide::Func exp_score;  // (j, i, h, b): exp(logit - max), 0 where masked
    Halide::Func sum_lanes;  // (u, i, h, b)
    Halide::Func row_sum;    // (i, h, b)
    Halide::Func inv_sum;    // (i, h, b): 1 / sum, or 0 for a fully masked row
    Halide::Func probs;      // (j, i, h, b): softmax probabilities (the weights output)
    Halide::Func out_acc;    // (c, i, h, b): sum_j probs * v
    Halide::Func out;        // (c, i, h, b)
    Halide::Var j{"j"}, i{"i"}, c{"c"}, d{"d"}, h{"h"}, b{"b"}, u{"u"};
    Halide::RDom r_keys;        // over kv_len
    Halide::RDom r_lanes_full;  // whole groups of kReductionLanes keys
    Halide::RDom r_lanes_tail;  // the remaining keys
    Halide::RDom r_lanes;       // over the partial lanes
    Halide::Expr dk, dv, q_len, kv_len;
    MaskInputs mask;
};

// products: Float(32), or BFloat(16) for scores from queries and keys in pairs (a target with a
// bfloat16 dot product); the probabilities, being the weights output, and the values they
// multiply stay float32 either way.
AttentionStage define_attention(const Halide::Func &q, const Halide::Func &k, const Halide::Func &v,
                                const Halide::Expr &dk, const Halide::Expr &dv,
                                const Halide::Expr &q_len, const Halide::Expr &kv_len,
                                const Halide::Expr &group, const Halide::Expr &scale,
                                const MaskInputs &mask, int value_tile = 0,
                                const Halide::Type &products = Halide::Float(32));

// AmxAttention's keys and values rows come in groups of this many, each within one tile's run
// (a run's pair rows are a multiple of it): a schedule that splits the rows by it finds each
// group's tile, head and item once.
constexpr int kAmxRowGroup = 16;

// What AmxAttention's rows run over: key/value heads per item, and items (the batch). Each
// row's item is clamped to the items: Halide bounds the item, which the row decodes by dividing
// by a run-time tile count, by the row's magnitude alone where it cannot prove that count
// positive (a point); the projections that the rows read were then computed over about
// kv_len^2 / 16 rows.
struct AmxHeads {
    Halide::Expr kv_heads, items;
};

// The flash kernel's two products in Intel AMX tiles (define_flash_attention's amx_heads;
// stages_flash_amx.cpp), in the shapes Halide 21's AMX lowering matches (see ProjectionStage's
// amx_tiles): tiles initialised to 0, both operands plain loads, the right-hand one a 3-D
// (pair element e, column x in its tile, pair row) buffer whose rows run over every tile of every
// head, so that a tile's index is (pair row within the tile's run + the run's first row).
// - queries (f, i, h, b): bfloat16, 0 past dk and to the next multiple of kAmxBlock features.
// - keys (e, x, row): row = p + feature_pairs * (t + key_tiles * (hk + kv_heads * b)) holds
//   features 2 p + e of key t * kAmxTile + x of key/value head hk, 0 past dk; feature_pairs is
//   dk rounded up to kAmxBlock, halved, and key_tiles the key blocks' keys over kAmxTile.
// - values (e, x, row): row = p + key_pairs * (t + value_tiles * (hk + kv_heads * b)) holds
//   feature t * kAmxTile + x of key 2 p + e; key_pairs is the key blocks' keys, halved, and
//   value_tiles dv over kAmxTile, rounded up.
// - score_tiles (x, i, t, h, b): q . k of key t * kAmxTile + x, over r_score (feature in
//   block, block); score is its copy to memory, which PackedScore::score then reads.
// - out_tiles (x, ii, t, kb, qb, h, b): probs_operand x values of feature t * kAmxTile + x over
//   the key block's keys in blocks of kAmxBlock (r_out), up to the last visible one; out is its
//   copy to memory, which block_out reads.
struct AmxAttention {
    Halide::Func queries, keys, values, score_tiles, score, out_tiles, out;
    // The unrotated keys' pairs as 32-bit words, (p, x, g): pair p of group g of kAmxRowGroup
    // rows for key x of its tile, which the keys' copy transposes (stages_flash_amx.cpp).
    Halide::Func key_words;
    Halide::Expr key_rows;  // the rows of keys: rows 0 to key_rows - 1 are read
    Halide::RDom r_score, r_out;
    // dk a multiple of kAmxBlock, dv of kAmxTile: the queries' or the values' copy reads whole
    // vectors unclamped, in a schedule's specialization on it.
    Halide::Expr whole_query_blocks, whole_value_tiles;
    Halide::Var x{"x"}, t{"t"}, e{"e"}, row{"row"}, f{"f"}, p{"p"}, g{"g"};
};

// Attention without the weights output, as FlashAttention computes it: keys in blocks of
// key_block, each block's softmax taken against its own maximum, and the blocks combined by an
// online (running max, running sum) rescaling. Queries are grouped in blocks of query_block so
// that the keys a causal mask hides from a whole query block are skipped: whole key blocks, and
// the tail of the block that holds the diagonal.
// Nothing of size q_len x kv_len exists; a schedule keeps one query block x key block in cache.
struct FlashAttentionStage {
    PackedScore packed;  // packed keys and values, and the scores
    // (jj, kb, i, h, b): the masked logit; masked_value exactly where masked (see
    // stages_flash.cpp)
    Halide::Func block_logits;
    // The per-block Funcs below take the query as row ii of query block qb, so that their
    // reductions can stop at the query block's last visible key (a loop bound, not a mask).
    Halide::Func max_lanes;    // (u, kb, ii, qb, h, b): partial maxima of a key block
    Halide::Func block_max;    // (kb, ii, qb, h, b)
    Halide::Func block_probs;  // (jj, kb, ii, qb, h, b): exp(logit - max), 0 if masked; AMX: below
    Halide::Func sum_lanes;    // (u, kb, ii, qb, h, b)
    Halide::Func block_sum;    // (kb, ii, qb, h, b)
    Halide::Func block_out;    // (c, kb, ii, qb, h, b): block_probs x values
    // Paired (bfloat16 products, PackedScore): block_probs in bfloat16, the operand of
    // block_out, whose reduction r_block_keys then runs over (e, p), key 2 p + e of the block,
    // from the second pair, the first pair an update of its own over r_block_keys_first (e),
    // as score's first pair is (PackedScore).
    // Rounded (PackedScore::rounded): block_probs rounded to bfloat16, held as float32.
    // The sums of the softmax keep the unrounded probabilities, as FlashAttention's do.
    Halide::Func probs_operand;
    // Rounded or paired (AMX aside, below): block_probs is the tuple {probability, its
    // rounding}, and probs_operand reads the rounding, to be inlined: the exp's loop stores both.
    // AMX: block_probs is (u, g, kb, ii, qb, h, b) -> {lane u's sum over groups 0 to g - 1, the
    // rounded probability of key kReductionLanes (g - 1) + u}, an update over r_prob_groups
    // (define_amx_probs_and_sums); sum_lanes reads the last group's sums.
    Halide::RDom r_prob_groups;
    Halide::Func state;  // (c, ii, qb, h, b) -> {acc, running max, running sum}
    // The keys fit one block (kv_len <= the key_block knob, as at every named shape but the
    // long ones): state's update takes the block's values as they are, where a schedule
    // specializes it on this condition.
    Halide::Expr single_key_block;
    AmxAttention amx;  // defined (amx.score_tiles) where the products run in AMX tiles
    Halide::Func out;  // (c, i, h, b)
    Halide::Var j{"j"}, i{"i"}, c{"c"}, d{"d"}, h{"h"}, b{"b"}, u{"u"}, kb{"kb"}, jj{"jj"};
    Halide::Var ii{"ii"}, qb{"qb"};
    Halide::RDom r_block_keys;            // over the keys of a block after the first, or pairs
    Halide::RDom r_block_keys_first;      // paired: over e of the first pair
    Halide::RDom r_lane_groups;           // over the groups of kReductionLanes keys of a block
    Halide::RDom r_lanes;                 // over the partial lanes
    Halide::RDom r_blocks;                // over the key blocks a query block sees
    Halide::Expr query_block, key_block;  // the sizes in use: the knobs, or less for small calls
    MaskInputs mask;
};

// Where a call's keys take several flash key blocks, the blocks are whole multiples of this many
// keys: every CPU score tile's width divides it (at most 4 AVX-512 vectors), and kAmxBlock.
constexpr int kKeyBlockGrain = 64;

// The block sizes are the schedule's choice (schedule_cpu.h: flash_query_block): query_block
// may depend on the call (a positive Expr), key_block must be a multiple of kReductionLanes.
// Both shrink to the problem where it is smaller (key blocks to equal shares of the keys, in
// whole kKeyBlockGrains), unless fixed_blocks: a GPU block's threads and shared memory take the
// constant sizes. value_tile: as define_packed_score's (the CPU's schedule_cpu.h:
// cpu_value_tile), for float32 products without fixed_blocks. float_operand: as
// define_packed_score's, with the probabilities rounded likewise (probs_operand).
// amx_heads, its kv_heads defined for bfloat16 products in pairs (not float_operand), takes the
// two products in AMX tiles (AmxAttention) over that many key/value heads of its items items;
// key_block is then a multiple of kAmxBlock, and the blocks shrink to multiples of it.
// sources_unrotated: as PackedScore's, which it becomes. out_type: the type out stores, float32 or
// the type a consumer rounds it to anyway.
FlashAttentionStage define_flash_attention(
    const Halide::Func &q, const Halide::Func &k, const Halide::Func &v, const Halide::Expr &dk,
    const Halide::Expr &dv, const Halide::Expr &q_len, const Halide::Expr &kv_len,
    const Halide::Expr &group, const Halide::Expr &scale, const MaskInputs &mask,
    const Halide::Expr &query_block, int key_block, bool fixed_blocks = false,
    const Halide::Type &products = Halide::Float(32), int value_tile = 0,
    bool float_operand = false, const AmxHeads &amx_heads = {},
    const Halide::Expr &sources_unrotated = Halide::Expr(),
    const Halide::Type &out_type = Halide::Float(32));

// The two halves of AmxAttention (stages_flash_amx.cpp), for define_flash_attention: the score
// (a.packed.score is replaced) and then, once a.probs_operand exists, a.block_out.
void define_amx_score(FlashAttentionStage &a, const Halide::Func &q, const Halide::Expr &dk,
                      const Halide::Expr &q_len, const AmxHeads &heads,
                      const Halide::Expr &key_tiles);
// Between them, the block's probabilities and sums: a.block_probs, a.probs_operand and
// a.sum_lanes from `prob`, the probability of key jj of the block.
void define_amx_probs_and_sums(FlashAttentionStage &a, const Halide::Expr &prob,
                               const Halide::Type &products, const Halide::Expr &last_key_in_block);
void define_amx_block_out(FlashAttentionStage &a, const Halide::Func &v, const Halide::Expr &dv,
                          const Halide::Expr &kv_len, const AmxHeads &heads,
                          const Halide::Expr &key_pairs, const Halide::Expr &last_key_in_block);

// Attention of a few queries over a KV cache, as decoding runs it (stages_decode.cpp): the
// queries that share a key/value head are the rows of one problem, the cached keys are split
// into blocks of at most split_keys computed apart (in parallel, when there are too few heads and
// items to feed the cores), and the blocks' results merged by their log-sum-exp (FlashDecoding).
struct DecodeInputs {
    Halide::Func q;        // (d, i, h, b): the projected, rotated queries
    Halide::Func k_cache;  // (j, d, hk, item): keys, positions innermost
    // (c, j, hk, item), read for every c >= 0 (register tiles round the head up); features
    // past dv may hold anything finite: their columns are computed and discarded.
    Halide::Func v_cache;
    Halide::Func items;    // (b) -> the cache item of batch row b
    Halide::Func lengths;  // (b) -> the positions that item holds, n_b
    Halide::Expr dk, dv, q_len, group, scale;
    Halide::Expr causal;     // 0 none, 2 bottom-right: query i sees positions <= n_b - q_len + i
    Halide::Expr key_limit;  // the largest n_b of the call: keys past it are never read
    Halide::Expr max_len;    // positions the cache holds per item
    Halide::Expr max_items;  // items the cache holds (the runtime checks items(b) < max_items)
};

// A KV cache's buffers in their stored layout (layout.h: keys in blocks of kCacheKeyBlock
// positions, values in panels of kCacheValuePanel features) as DecodeInputs reads them: keys
// (j, d, hk, item) and values (c, j, hk, item), each element through `widen` (float32 from the
// cache's format). Every value feature from 0 reads inside the cache: past the head, the last
// panel's padding, then the last panel again (value_panels is the buffer's panel count), so
// that a vector of a tile's features lies in one panel and Halide loads it whole.
struct CacheViews {
    Halide::Func keys, values;
};
CacheViews define_cache_views(const Halide::Func &key_blocks, const Halide::Func &value_panels,
                              const Halide::Expr &panels,
                              const std::function<Halide::Expr(const Halide::Expr &)> &widen);

struct DecodeAttentionStage {
    Halide::Func q_rows;     // (d, r, hk, b): query i = r / group of head hk * group + r % group
    Halide::Func score;      // (j, r, hk, b): q . k, reduction over r_dot
    Halide::Func logit;      // (j, r, hk, b): scaled, the lowest float where masked
    Halide::Func max_lanes;  // (u, s, r, hk, b)
    Halide::Func split_max;  // (s, r, hk, b)
    Halide::Func probs;      // (k, s, r, hk, b): key k of split s, exp(logit - the split's max)
    Halide::Func sum_lanes;  // (u, s, r, hk, b)
    Halide::Func split_sum;  // (s, r, hk, b)
    Halide::Func split_acc;  // (c, s, r, hk, b): probs x values over the split's keys
    Halide::Func split_out;  // (c, s, r, hk, b): outputs for c < dv, then max and sum
    Halide::Func total_max, split_weight, total_sum;  // the merge, (r, hk, b) and (s, r, hk, b)
    Halide::Func merged;                              // (c, r, hk, b)
    Halide::Func rows_out;                            // (c, r, hk, b)
    Halide::Func out;                                 // (c, i, h, b)
    Halide::Var j{"j"}, k{"k"}, r{"r"}, c{"c"}, d{"d"}, hk{"hk"}, b{"b"}, u{"u"}, s{"s"}, i{"i"},
        h{"h"};
    Halide::RDom r_dot, r_lane_groups, r_lanes, r_keys, r_splits;
    Halide::Expr split_keys, num_splits, rows;
    Halide::Expr dv;  // the value head size: a schedule may specialize its tiles on it
};

// How long a split is. ShrinkToCall: at most split_keys, the call's keys (up to its longest
// item) shared evenly among as few splits as that allows, in multiples of kReductionLanes, the
// last split shorter where they do not divide (a step over 20 cached keys is one split of 32,
// over 1025 five of 208, over 4097 sixteen of 256 and one of 1). Fixed: split_keys always,
// for schedules that keep a split's keys in buffers of a constant size (GPU shared memory); the
// keys past a short call's last are masked.
enum class DecodeSplit { ShrinkToCall, Fixed };

// split_keys must be a multiple of kReductionLanes.
DecodeAttentionStage define_decode_attention(const DecodeInputs &in, int split_keys,
                                             DecodeSplit split_kind);

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_STAGES_H
