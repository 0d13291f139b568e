#include "stages.h"

#include <limits>
#include <sstream>
#include <utility>

#include "layout.h"

namespace attngen {

using namespace Halide;

namespace {

// At most this many bytes of one head's values, the probs x values tiles read them in place
// (PackedScore::values_in_place); more are copied into panels. 32 KiB is the L1 data cache of
// the x86 cores attngen is measured on, and bert-128's heads (128 keys of 64 features): in
// place, their slices fill the sets they fall on without overflowing them.
constexpr int64_t kValuesInPlaceBytes = 32 * 1024;

std::string type_name(const Type &t) {
    std::ostringstream s;
    s << t;
    return s.str();
}

// ProjectionStage::amx_tiles and the rest of the AMX path, over p's bfloat16 operand.
void define_amx_sums(ProjectionStage &p, const AmxPath &amx, const std::string &name) {
    const Var &xi = p.xi, &n = p.n, &t = p.t;
    Var f("f"), m("m");
    if (p.operand_shared || (p.r_operand.defined() && p.operand.type() == BFloat(16))) {
        // Features of several groups (the output projection's heads) are merged into bfloat16
        // rows by the operand's own update, whose rows are clamped there: those rows are the
        // tiles' operand as they are. (Copied once more, the copy was 0.9% of
        // mha_forward_bf16/bert-512-b8's samples; without it, scripts/ab_runs.py, 5 rounds, 2
        // threads, Intel Xeon with AMX, old/new: bert-512 1.05x, bert-512-b8 1.03x, bert-128
        // 1.02x, tutorial 0.99x.) So are the input projections' shared rows (InputOperands,
        // which rounds each source's rows up to whole tiles for AMX).
        p.amx_operand = p.operand;
    } else {
        p.amx_operand = Func(name + "_amx_operand");
        // With float_operand the rounded operand is held as float32: bfloat16 again, exactly.
        p.amx_operand(f, m) = cast(BFloat(16), p.operand(f, clamp(m, 0, p.rows - 1)));
    }
    const Expr blocks = p.in_features / kAmxBlock;
    p.r_amx = RDom(0, kAmxBlock, 0, blocks, name + "_r_amx");
    const Expr feature = p.r_amx.y * kAmxBlock + p.r_amx.x;
    p.amx_tiles = Func(name + "_amx_tiles");
    p.amx_tiles(xi, n, t) = 0.0f;
    p.amx_tiles(xi, n, t) += cast<float>(p.amx_operand(feature, n)) *
                             cast<float>(amx.stored(p.r_amx.x % kWeightPairs, xi,
                                                    feature / kWeightPairs + t * amx.pair_rows));
    p.amx_out = Func(name + "_amx_out");
    p.amx_out(xi, n, t) = p.amx_tiles(xi, n, t);
    const Expr whole = blocks * kAmxBlock;
    p.r_amx_tail = RDom(whole, p.in_features - whole, name + "_r_amx_tail");
    p.amx_has_tail = whole < p.in_features;
    const Expr tail = p.r_amx_tail;
    p.amx_tail = Func(name + "_amx_tail");
    const Var &o = p.o;
    p.amx_tail(o, n) = 0.0f;
    p.amx_tail(o, n) +=
        cast<float>(p.operand(tail, clamp(n, 0, p.rows - 1))) *
        cast<float>(p.weights(kWeightPairs * o + tail % kWeightPairs, tail / kWeightPairs));
}

// x rounded as a projection's operand for weights of `storage` (define_projection): in integer
// arithmetic for weights as bits; in pairs (a CPU's bfloat16) the storage type itself, or with
// float_operand its value as float32; otherwise round_operand's float32.
Expr operand_value(const Expr &x, const Type &storage, bool paired, bool as_bits,
                   bool float_operand) {
    if (as_bits) return round_operand_bits(x, storage);
    if (!paired) return round_operand(x, storage);
    return float_operand ? cast<float>(cast(storage, x)) : cast(storage, x);
}

// Row m of a one-group input x(d, 0, m) as a paired projection's operand over flat features f:
// operand_value of each feature, and 0 past the last (the pairs' second half of an odd count).
// The projection's own operand and the shared one (define_input_operands) both take it, so
// that the two give the same bits.
Expr padded_operand_row(const Func &x, const Expr &f, const Expr &m, const Expr &in_features,
                        const Type &storage, bool paired, bool as_bits, bool float_operand) {
    const Expr value =
        operand_value(x(min(f, in_features - 1), 0, m), storage, paired, as_bits, float_operand);
    return select(f < in_features, value,
                  operand_value(0.0f, storage, paired, as_bits, float_operand));
}

}  // namespace

ProjectionStage define_projection(const std::string &name, const Func &x, const Expr &group_size,
                                  const Expr &groups, const Expr &rows, const Expr &out_features,
                                  const Func &w_t, const Func &bias, const Type &storage,
                                  const FewRowsPath &few_rows_path, const DirectPath &direct_path,
                                  bool float_operand, const StagedPath &staged_path,
                                  const AmxPath &amx, const SharedOperand &shared_operand) {
    ProjectionStage p;
    p.acc = Func(name + "_acc");
    p.result = Func(name);
    p.weights = w_t;
    p.rows = rows;
    p.in_features = group_size * groups;
    p.groups = groups;
    p.out_features = out_features;
    const Var &o = p.o, &n = p.n;
    const Expr row = clamp(n, 0, rows - 1);
    const bool as_bits = w_t.type() == UInt(16) && storage.bits() == 16;
    if (w_t.type() != storage && !as_bits) {
        throw CompileError(name + ": weights of type " + type_name(w_t.type()) + " for storage " +
                           type_name(storage));
    }
    const auto weight = [&](const Expr &o, const Expr &f) {
        const Expr w = w_t(o, f);
        return as_bits ? storage_bits_as_float(w, storage) : cast<float>(w);
    };
    if (shared_operand.rounded.defined() &&
        (as_bits || !Internal::is_const_one(groups) || storage == Float(32))) {
        throw CompileError(name + ": a shared operand is for a CPU's 16-bit weights over one " +
                           "group of input features");
    }
    p.operand_shared = shared_operand.rounded.defined();
    // Weights as bits take their operands rounded in integer arithmetic as well (layout.h,
    // half_weights_as_bits); otherwise in the storage type, which is what matches vdpbf16ps, or
    // with float_operand (no vdpbf16ps to match) that value held as float32.
    const auto rounded = [&](const Expr &v) {
        return operand_value(v, storage, true, as_bits, float_operand);
    };
    // The sum starts from the bias, not from 0: LLVM turned a register tile's zero
    // initialization into a call to memset (perf: 1-2% of a forward).
    p.acc(o, n) = bias(o);
    Expr product;
    // Only GPU kernels take weights as bits, and a GPU's bfloat16 always does (layout.h), so
    // as_bits stands for the GPU here: one feature per row, not the CPU's pairs.
    if (weights_in_pairs(storage == BFloat(16), as_bits)) {
        p.paired = true;
        p.r = RDom(0, kWeightPairs, 0, (p.in_features + 1) / kWeightPairs, name + "_r");
        Var f("f"), m("m");
        p.operand = Func(name + "_operand");
        // Flat features f = g * group_size + d, read without dividing f by the run-time group
        // size: that was a vector division and a gather per vector of features, and these
        // rounding passes took 8.6% of a bfloat16 forward at gpt2-causal (the input
        // projections') and 7% at bert-512-b8 (the output projection's, over heads; perf).
        // One group reads x(f, 0) directly. Several are written group by group, by an update
        // over (d, g), and the feature past an odd count (the last pair's second half) by an
        // update of its own; the pure definition writes nothing. (A pure definition of zeros
        // wrote the whole operand once more for one element per row: a memset, 1.6% of a
        // bfloat16 forward's samples at bert-512, though the forward measured level without
        // it.)
        if (p.operand_shared) {
            p.operand(f, m) = shared_operand.rounded(f, m + shared_operand.first_row);
        } else if (Internal::is_const_one(groups)) {
            p.operand(f, m) =
                padded_operand_row(x, f, m, p.in_features, storage, true, as_bits, float_operand);
        } else {
            p.operand(f, m) = undef(rounded(0.0f).type());
            p.r_operand = RDom(0, group_size, 0, groups, name + "_r_operand");
            p.operand(p.r_operand.y * group_size + p.r_operand.x, m) =
                rounded(x(p.r_operand.x, p.r_operand.y, clamp(m, 0, rows - 1)));
            // Extent 0 for an even count, so that rows stay in_features wide.
            const RDom pad(p.in_features, p.in_features % 2, name + "_pad");
            p.operand(pad, m) = rounded(0.0f);
        }
        if (float_operand) {
            Var e("e"), pair("pair");
            p.weights_f32 = Func(name + "_weights_f32");
            p.weights_f32(o, e, pair) = weight(2 * o + e, pair);
            product = p.operand(2 * p.r.y + p.r.x, row) * p.weights_f32(o, p.r.x, p.r.y);
        } else {
            product = cast<float>(p.operand(2 * p.r.y + p.r.x, row)) * weight(2 * o + p.r.x, p.r.y);
        }
    } else {
        p.r = RDom(0, group_size, 0, groups, name + "_r");
        Func operand = x;
        if (storage != Float(32)) {
            Var d("d"), g("g"), m("m");
            p.operand = Func(name + "_operand");
            if (p.operand_shared) {
                p.operand(d, g, m) = shared_operand.rounded(d, m + shared_operand.first_row);
            } else {
                p.operand(d, g, m) = operand_value(x(d, g, m), storage, false, as_bits, false);
            }
            operand = p.operand;
        }
        const Expr feature = p.r.y * group_size + p.r.x;
        if (storage == Float(16) && !as_bits) {
            Var f("f");
            p.weights_widened = Func(name + "_weights_widened");
            p.weights_widened(o, f) = weight(o, f);
            product = operand(p.r.x, p.r.y, row) * p.weights_widened(o, feature);
        } else {
            product = operand(p.r.x, p.r.y, row) * weight(o, feature);
        }
        if (few_rows_path.split > 0) {
            // Feature d = s * split + u of each group; the last s of a group may pass its end,
            // and reads there are clamped and their products dropped.
            const int split = few_rows_path.split;
            const Var &u = p.u;
            p.r_split = RDom(0, (group_size + split - 1) / split, 0, groups, name + "_rs");
            const RDom &rs = p.r_split;
            const Expr d = rs.x * split + u, in_group = min(d, group_size - 1);
            p.split_acc = Func(name + "_split_acc");
            p.split_acc(o, n, u) = 0.0f;
            p.split_acc(o, n, u) += select(
                d < group_size,
                operand(in_group, rs.y, row) * weight(o, rs.y * group_size + in_group), 0.0f);
            const RDom ru(0, split, name + "_ru");
            p.few_rows_sum = Func(name + "_few_rows");
            p.few_rows_sum(o, n) = bias(o);
            p.few_rows_sum(o, n) += p.split_acc(o, n, ru);
            p.few_rows = few_rows_path.rows;
        }
        if (staged_path.chunk > 0) {
            const int chunk = staged_path.chunk;
            p.staged_chunk = chunk;
            const Var &f = p.f, &kb = p.kb;
            const Expr last = min(f, p.in_features - 1);
            const Expr x_at = Internal::is_const_one(groups)
                                  ? operand(last, 0, row)
                                  : operand(last % group_size, last / group_size, row);
            p.staged_x = Func(name + "_staged_x");
            p.staged_x(f, n) = select(f < p.in_features, cast<float>(x_at), 0.0f);
            p.staged_w = Func(name + "_staged_w");
            p.staged_w(o, f) = select(f < p.in_features, weight(o, last), 0.0f);
            p.r_chunk = RDom(0, chunk, name + "_rc");
            p.r_chunks = RDom(0, (p.in_features + chunk - 1) / chunk, name + "_rb");
            const Expr feature = kb * chunk + p.r_chunk;
            p.staged_part = Func(name + "_staged_part");
            p.staged_part(o, n, kb) = 0.0f;
            p.staged_part(o, n, kb) += p.staged_x(feature, n) * p.staged_w(o, feature);
            p.staged_acc = Func(name + "_staged_acc");
            p.staged_acc(o, n) = bias(o);
            p.staged_acc(o, n) += p.staged_part(o, n, p.r_chunks);
            // Function::define eliminates common subexpressions: with `rows` (a product) in
            // both this condition and the few-rows one, result's value became a let of it, which
            // Halide's simplification of specializations cannot see through, so every branch
            // kept every path (and its buffers and threads). The product with its factors
            // swapped is a different expression to that pass, and the same to the simplifier.
            const auto *rows_product = rows.as<Internal::Mul>();
            const Expr rows_again = rows_product ? rows_product->b * rows_product->a : rows;
            p.staged = cast<int64_t>(rows_again) * out_features > Expr(staged_path.min_outputs);
        }
    }
    p.acc(o, n) += product;
    Expr sum = p.acc(o, n);
    if (direct_path.max_in_features > 0) {
        p.acc_direct = Func(name + "_acc_direct");
        p.acc_direct(o, n) = bias(o);
        p.acc_direct(o, n) += product;
        p.direct = rows > direct_path.min_rows && p.in_features <= direct_path.max_in_features;
        sum = select(p.direct, p.acc_direct(o, n), sum);
    }
    if (p.staged.defined()) sum = select(p.staged, p.staged_acc(o, n), sum);
    if (amx.stored.defined()) {
        const bool one_algorithm = amx.min_rows == 0;
        if (!p.paired || p.acc_direct.defined() || (one_algorithm && float_operand)) {
            throw CompileError(name + ": the AMX path takes bfloat16 pairs, and as the one " +
                               "algorithm their bfloat16 operand");
        }
        define_amx_sums(p, amx, name);
        const Expr amx_sum = bias(o) + p.amx_out(o % kAmxTile, n, o / kAmxTile) +
                             select(p.amx_has_tail, p.amx_tail(o, n), 0.0f);
        if (one_algorithm) {
            sum = amx_sum;
        } else {
            p.amx_result = Func(name + "_amx_result");
            p.amx_result(o, n) = amx_sum;
            p.amx_rows = rows >= amx.min_rows;
            sum = select(p.amx_rows, p.amx_result(o, n), sum);
        }
    }
    if (p.few_rows.defined()) {
        p.result(o, n) = select(rows <= p.few_rows, p.few_rows_sum(o, n), sum);
    } else {
        p.result(o, n) = sum;
    }
    // A let here means the swap above did not keep the conditions apart (rows a product of
    // more than two factors, say), or the AMX path's condition shares one with the value: every
    // kernel would hold every path again, silently.
    if ((p.staged.defined() || p.amx_rows.defined()) && p.result.value().as<Internal::Let>()) {
        throw CompileError(name + ": the projection's paths share a subexpression of " +
                           "their conditions (define_projection's StagedPath or AmxPath)");
    }
    return p;
}

InputOperands define_input_operands(const std::vector<Func> &inputs,
                                    const std::vector<Expr> &in_features,
                                    const std::vector<Expr> &rows, const Type &storage, bool paired,
                                    bool float_operand, const Expr &key_is_query,
                                    const Expr &value_is_key, int row_tile) {
    if (inputs.size() != 3 || in_features.size() != 3 || rows.size() != 3) {
        throw CompileError("define_input_operands takes a query, a key and a value");
    }
    InputOperands ops;
    ops.rounded = Func("input_operands");
    Var f("f"), m("m");
    const Type type = operand_value(0.0f, storage, paired, false, float_operand).type();
    ops.rounded(f, m) = undef(type);
    // Only where the shapes agree: a flag set for tensors of different shapes rounds them apart.
    const Expr same_key = key_is_query && rows[1] == rows[0] && in_features[1] == in_features[0];
    const Expr same_value = value_is_key && rows[2] == rows[1] && in_features[2] == in_features[1];
    // Each source's rows after the last source's that it does not repeat, in whole row tiles:
    // the rows past a source's last, to the tile's end, repeat its last.
    std::vector<Expr> tiled_rows;
    for (const Expr &r : rows) tiled_rows.push_back((r + (row_tile - 1)) / row_tile * row_tile);
    const Expr key_first = select(same_key, 0, tiled_rows[0]);
    const Expr value_first = select(same_value, key_first, key_first + tiled_rows[1]);
    ops.first_row = {0, key_first, value_first};
    ops.row_counts = {tiled_rows[0], select(same_key, 0, tiled_rows[1]),
                      select(same_value, 0, tiled_rows[2])};
    for (int source = 0; source < 3; ++source) {
        const RDom r(0, ops.row_counts[source], "input_operand_rows_" + std::to_string(source));
        const Expr row = row_tile > 1 ? min(r, rows[source] - 1) : Expr(r);
        ops.rounded(f, r + ops.first_row[source]) = padded_operand_row(
            inputs[source], f, row, in_features[source], storage, paired, false, float_operand);
        ops.rows.push_back(r);
    }
    return ops;
}

void store_result_as(ProjectionStage &p, const Type &type) {
    Func stored(p.result.name() + "_stored");
    stored(p.o, p.n) = cast(type, p.result(p.o, p.n));
    p.result = stored;
}

Func weight_panel_view(const Func &stored, const Expr &stored_rows, bool pairs) {
    const int elements = pairs ? kWeightPairs : 1, outputs = weight_panel_outputs(pairs);
    Var column("column"), row("row");
    Func view(stored.name() + "_columns");
    view(column, row) = stored(column % elements, (column / elements) % outputs,
                               row + stored_rows * (column / (elements * outputs)));
    return view;
}

Func weight_panel_view(const Func &stored, int panel_columns) {
    Var column("column"), row("row");
    Func view(stored.name() + "_columns");
    view(column, row) =
        stored(row * panel_columns + column % panel_columns, column / panel_columns);
    return view;
}

Expr storage_bits_as_float(const Expr &bits, const Type &storage, bool float16_instructions) {
    if (float16_instructions && storage == Float(16)) {
        return cast<float>(reinterpret(Float(16), bits));
    }
    const Expr u = cast<uint32_t>(bits);
    if (storage == BFloat(16)) return reinterpret<float>(u << 16);
    if (storage != Float(16)) throw CompileError("not a 16-bit storage: " + type_name(storage));
    const Expr sign = (u & 0x8000) << 16, exponent = (u >> 10) & 0x1f, mantissa = u & 0x3ff;
    // Normal numbers rebias the exponent (15 to 127); infinities and NaNs keep all ones.
    const Expr normal = sign | ((exponent + 112) << 23) | (mantissa << 13);
    const Expr special = sign | 0x7f800000 | (mantissa << 13);
    // Subnormals and zero: mantissa x 2^-24, exact in float32.
    const Expr tiny = cast<float>(mantissa) * (1.0f / 16777216.0f);
    return select(exponent == 0, select(sign != 0, -tiny, tiny),
                  reinterpret<float>(select(exponent == 31, special, normal)));
}

Expr round_operand_bits(const Expr &x, const Type &type) {
    constexpr float kLargestHalf = 65504.0f;
    const Expr v = type == Float(16) ? clamp(x, -kLargestHalf, kLargestHalf) : x;
    const Expr u = reinterpret<uint32_t>(v);
    // Round to nearest even at the format's last mantissa bit: bit 16 (bfloat16's 7 bits) or
    // bit 13 (float16's 10), carrying into the exponent as the format's own rounding does.
    const int dropped = type == BFloat(16) ? 16 : 13;
    const Expr half_ulp = Internal::make_const(UInt(32), (1u << (dropped - 1)) - 1);
    const Expr keep = Internal::make_const(UInt(32), ~((1u << dropped) - 1));
    Expr r = reinterpret<float>((u + half_ulp + ((u >> dropped) & 1)) & keep);
    if (type == Float(16)) {
        // Below float16's smallest normal, 2^-14, its step is 2^-24: round (to nearest even)
        // in units of it.
        constexpr float kStep = 1.0f / 16777216.0f;
        r = select(abs(v) < 1.0f / 16384.0f, round(v * (1.0f / kStep)) * kStep, r);
    }
    return select(is_nan(x), x, r);
}

Expr float_to_storage_bits(const Expr &x, const Type &storage, bool float16_instructions) {
    if (float16_instructions && storage == Float(16)) {
        return reinterpret(UInt(16), cast(Float(16), x));
    }
    const Expr u = reinterpret<uint32_t>(x);
    if (storage == BFloat(16)) {
        // Rounded at bit 16; a carry into the exponent is the format's own (up to infinity).
        const Expr rounded = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
        return cast<uint16_t>(select(is_nan(x), (u >> 16) | 0x40, rounded));
    }
    if (storage != Float(16)) throw CompileError("not a 16-bit storage: " + type_name(storage));
    const Expr sign = (u >> 16) & 0x8000, magnitude = abs(x);
    // Normal: rounded at bit 13, then rebiased (127 to 15). A carry to 2^16 gives exponent 31
    // and mantissa 0, infinity, as it should: 65520 and up round past 65504.
    const Expr r = (u + 0xfff + ((u >> 13) & 1)) & 0x7fffe000;
    const Expr normal = (((r >> 23) - 112) << 10) | ((r >> 13) & 0x3ff);
    // Below 2^-14 the step is 2^-24: the bits are the count of steps (1024 is the smallest
    // normal, whose bits are 1024 too).
    const Expr tiny = cast<uint32_t>(round(magnitude * 16777216.0f));
    const Expr infinity = Internal::make_const(UInt(32), 0x7c00);
    const Expr bits =
        select(is_nan(x), Internal::make_const(UInt(32), 0x7e00), magnitude < 1.0f / 16384.0f, tiny,
               magnitude >= 65520.0f, infinity, normal);
    return cast<uint16_t>(sign | bits);
}

Expr round_operand(const Expr &x, const Type &type) {
    if (type == Float(16)) {
        constexpr float kLargestHalf = 65504.0f;
        return cast<float>(cast(type, clamp(x, -kLargestHalf, kLargestHalf)));
    }
    return cast<float>(cast(type, x));
}

Expr round_probability(const Expr &p, const Type &products, bool as_float) {
    if (products != BFloat(16)) return as_float ? round_operand(p, products) : cast(products, p);
    // p <= 1: the carry never reaches the sign or overflows. Half a unit less one, not half a
    // unit: Halide takes (x + 0x8000) >> 16 for a rounding shift and lowers it in seven
    // overflow-safe operations.
    const Expr nearest = reinterpret<uint32_t>(p) + Internal::make_const(UInt(32), 0x7fff);
    if (as_float) return reinterpret<float>(nearest & Internal::make_const(UInt(32), 0xffff0000));
    return reinterpret(BFloat(16), cast<uint16_t>(nearest >> 16));
}

Func as_rows(const Func &x, const Expr &len) {
    Var d("d"), g("g"), n("n");
    Func rows(x.name() + "_rows");
    // Per row, not per product: the division leaves the reduction loop, and a register tile
    // divides once per row. Where the reduction is blocked (the AVX2 variant), every block
    // divides again (LLVM does not hoist an idiv, which may trap), and perf put 6% of the AVX2
    // output projection's samples on the idivs at bert-512. Read from a table of each row's
    // place computed once per call instead, the idivs were gone and the AVX2 forward measured
    // level (scripts/ab_runs.py, 3 rounds, Zen 4: bert-128, bert-512, gpt2-causal, tutorial
    // 1.00-1.01x): the divisions overlap the tile's FMAs. (Not so for the output projection's
    // heads on AVX-512, a reduction of 64 features per head: merge_heads.)
    rows(d, g, n) = x(d, n % len, n / len);
    return rows;
}

MergedHeads merge_heads(const Func &attention_out, const Expr &len, const Expr &batch,
                        bool row_places) {
    Var d("d"), g("g"), n("n");
    MergedHeads m{Func("merged_heads"), Func()};
    if (!row_places) {
        m.merged(d, g, n) = attention_out(d, n % len, g, n / len);
        return m;
    }
    // The projection's reduction runs over (d, g) with the heads outside: a register tile's
    // rows found their places again at every head, two idivs per row that LLVM does not hoist
    // (an idiv may trap). perf, bert-512, AVX-512: the output projection took 12% longer than
    // each input projection (attngen_parallel_timeline), 3.5% with the table. Paired calls,
    // Zen 4 (scripts/paired_ab.py, 15 pairs x 3 sessions): mha_forward/ bert-512 1.021x (15 of
    // 15), bert-128 1.015x, gpt2-causal 1.029x; again in the whole library, 12 x 3: bert-512
    // 1.025x, decode/llama3-8b-prefill 1.018x, gpt2-decode and bfloat16 (whose operand is a
    // rounded copy) level. The clamps bound the loaded places for Halide.
    m.places = Func("merged_row_places");
    m.places(n) = {n % len, n / len};
    const Expr l = clamp(m.places(n)[0], 0, len - 1), b = clamp(m.places(n)[1], 0, batch - 1);
    m.merged(d, g, n) = attention_out(d, l, g, b);
    return m;
}

Func split_heads(const std::string &name, const Func &projected, const Expr &head_dim,
                 const Expr &len) {
    Var d("d"), l("l"), h("h"), b("b");
    Func heads(name);
    heads(d, l, h, b) = cast<float>(projected(h * head_dim + d, l + b * len));
    return heads;
}

Expr causal_key_offset(const MaskInputs &mask, const Expr &q_len, const Expr &kv_len) {
    return select(mask.causal == 1, 0, mask.causal == 2, kv_len - q_len, kv_len);
}

MaskInputs key_lengths_mask(const Func &kv_lengths, const Expr &causal) {
    MaskInputs m;
    m.kv_lengths = kv_lengths;
    m.causal = causal;
    m.has_bool_mask = Internal::const_false();
    m.has_additive = Internal::const_false();
    Var j("j"), i("i"), h("h"), b("b");
    m.bool_mask = Func("no_bool_mask");
    m.bool_mask(j, i, b) = cast<uint8_t>(0);
    m.additive = Func("no_additive_mask");
    m.additive(j, i, h, b) = 0.0f;
    return m;
}

namespace {

// sin and cos of r in [-pi, pi] in double: Taylor series to degree 21 and 22, whose remainders
// are below 1e-11 there (pi^23 / 23!), far under float's resolution.
std::pair<Expr, Expr> sin_cos_reduced(const Expr &r) {
    const Expr r2 = r * r;
    Expr s = Expr(1.0), c = Expr(1.0);
    for (int n = 21; n >= 3; n -= 2)
        s = Expr(1.0) - r2 * Expr(1.0 / (n * (n - 1))) * s;  // Horner, odd
    for (int n = 22; n >= 2; n -= 2)
        c = Expr(1.0) - r2 * Expr(1.0 / (n * (n - 1))) * c;  // Horner, even
    return {r * s, c};
}

}  // namespace

RopeAngles define_rope_angles(const std::string &name, const RopeInputs &rope,
                              const Func &position) {
    Var k("k"), l("l"), b("b");
    // In double: at position 2^20 a float angle would be off by up to 0.03 rad. The nearest
    // multiple of 2 pi comes off by an integer conversion rather than a floor call.
    const double two_pi = 6.283185307179586;
    // Pairs past rotary_dim / 2 are not rotated (apply_rope); clamped so the table is read
    // only where it is defined.
    const Expr pair = clamp(k, 0, max(rope.rotary_dim / 2 - 1, 0));
    const Expr angle = cast<double>(position(l, b)) * rope.inv_freq(pair);
    const Expr turns = cast<int64_t>(angle * Expr(1.0 / two_pi) +
                                     select(angle >= Expr(0.0), Expr(0.5), Expr(-0.5)));
    const auto [s, c] = sin_cos_reduced(angle - cast<double>(turns) * Expr(two_pi));
    // Without rotary positions the table is ones and zeros: a schedule that specializes on
    // the mode computes it without the polynomials.
    const Expr off = rope.mode == 0;
    RopeAngles angles{Func(name + "_cos"), Func(name + "_sin")};
    angles.cos(k, l, b) = select(off, 1.0f, cast<float>(c));
    angles.sin(k, l, b) = select(off, 0.0f, cast<float>(s));
    return angles;
}

Func apply_rope(const std::string &name, const Func &heads, const RopeInputs &rope,
                const RopeAngles &angles) {
    Var d("d"), l("l"), h("h"), b("b");
    const Expr half = rope.rotary_dim / 2;
    const Expr interleaved = rope.mode == 2;
    // Whether d is the first member of its pair; the partner and the angle are read at every
    // candidate index and the value selected, so each index stays affine in d (no gathers on
    // the CPU).
    const Expr first = select(interleaved, d % 2 == 0, d < half);
    const Expr last = max(rope.rotary_dim - 1, 0);
    const auto at = [&](const Expr &index) { return heads(clamp(index, 0, last), l, h, b); };
    const Expr x = heads(d, l, h, b);
    const Expr xp = select(interleaved, select(first, at(d + 1), at(d - 1)),
                           select(first, at(d + half), at(d - half)));
    const Expr pair_of_half = select(first, d, d - half);  // d % half for d < rotary_dim
    const auto angle = [&](const Func &table) {
        return select(interleaved, table(d / 2, l, b),
                      table(clamp(pair_of_half, 0, max(half - 1, 0)), l, b));
    };
    const Expr c = angle(angles.cos), s = angle(angles.sin);
    const Expr rotated = select(first, x * c - xp * s, x * c + xp * s);
    Func out(name);
    out(d, l, h, b) = select(rope.mode != 0 && d < rope.rotary_dim, rotated, x);
    return out;
}

MaskedLogits define_masked_logits(const Func &score, const Expr &scale, const MaskInputs &mask,
                                  const Expr &q_len, const Expr &kv_len) {
    MaskedLogits m;
    Var j("j"), i("i"), h("h"), b("b");
    // Halide compiles float math with fast-math flags, under which LLVM may assume no infinity
    // ever appears: -inf in the data is detected by its bit pattern, and masked logits use the
    // lowest finite float instead of -inf.
    m.masked_value = Expr(std::numeric_limits<float>::lowest());
    const auto is_negative_infinity = [](const Expr &x) {
        return reinterpret(UInt(32), x) == cast<uint32_t>(Expr(0xff800000u));
    };
    Func &logit = m.logit;
    logit = Func("logit");
    m.masked = Func("masked");
    m.masked_logit = Func("masked_logit");
    // Mask inputs are read at a clamped query row and key: schedules compute whole register
    // tiles of rows past q_len and whole key blocks past kv_len, and those must not read
    // outside the mask buffers. Keys past kv_len are masked.
    // likely() lets loop partitioning drop the clamp from every key block but the last.
    const Expr row = clamp(i, 0, q_len - 1), key = min(likely(j), kv_len - 1);
    logit(j, i, h, b) =
        score(j, i, h, b) * scale + select(mask.has_additive, mask.additive(key, row, h, b), 0.0f);
    const Expr causal_end = mask.causal_end.defined() ? mask.causal_end(b) : kv_len;
    const Expr causal_limit = i + causal_key_offset(mask, q_len, causal_end);
    // -inf from the additive mask counts as masked, so a row of -inf yields zeros, not NaN.
    // The bits tested are the mask's as loaded: on the sum score * scale + additive, LLVM may
    // fold the test away, since fast-math lets it assume no arithmetic result is infinite (it
    // did once the flash path's logits went through a max).
    m.masked(j, i, h, b) =
        j > causal_limit || j >= min(mask.kv_lengths(b), kv_len) ||
        (mask.has_bool_mask && mask.bool_mask(key, row, b) != 0) ||
        (mask.has_additive && is_negative_infinity(mask.additive(key, row, h, b)));
    m.masked_logit(j, i, h, b) = select(m.masked(j, i, h, b), m.masked_value, logit(j, i, h, b));
    return m;
}

Expr exp_nonpositive(const Expr &x, const Type &products) {
    return exp_from_floor(max(x, kExpFloor), products);
}

Expr exp_from_floor(const Expr &xc, const Type &products) {
    // exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln 2 / 2, with exp(r) from a
    // polynomial (below: which one depends on the products' type and the target). n comes from
    // adding 1.5 * 2^23 + 127: the sum's low mantissa bits are then n + 127, which are both n (as
    // an integer) and, shifted into the exponent field, 2^n. That needs no rounding or float-to-int
    // instruction (Halide's fast_exp has a floor, split into two 256-bit rounds on AVX-512, and a
    // conversion with clamps): the AVX-512 loop of block_probs has 27 instructions per 16 keys
    // against 30. The integer detour also keeps the simplifier, and fast-math in LLVM, from folding
    // (t + c) - c to t. ln 2 is one float constant: split in two (Cephes' exact high part),
    // fast-math folded the parts back into one anyway. Relative error against float64 (tests/stages
    // checks these bounds on every 61st float): without FMA (the SSE4.1 and baseline variants) at
    // most 5.6e-7 for x in [-10, 0] and 4.1e-6 down to -87, the error of r = x - n * ln 2 growing
    // with n; where the target fuses multiply-adds (AVX2, AVX-512, 64-bit ARM), with the
    // polynomial below, 1.9e-7 and 3.9e-7.
    // Far below 0 the result must be exactly 0 (a key an additive mask of -1e9 pushes away gets
    // weight 0, as float64 gives), and every step must stay finite. x is clamped at -88
    // (kExpFloor), where n is -127: n + 127 is 0, so 2^n's bits are those of +0.0 and the product
    // is exactly 0, with no select. That holds from x = -126.5 / log2(e), about -87.68, down; above
    // it the results follow exp, into the subnormals below -87.34 (float exp's own underflow). The
    // clamp is needed anyway: unclamped, with a final select alone to discard what such an x made
    // (NaN at -inf), LLVM's fast-math was free to move the select into the product, and the C API
    // fuzzer found NaN outputs of attngen_mha_forward_cached for finite inputs within seconds
    // (session 71). A select on x < -87 after a clamp there (0 from -87 down) took a compare and an
    // and per vector more: without it, bench/RESULTS.md (session 75, Zen 4), the kernels alone,
    // sdpa/ bert-512 1.020x and long-single 1.055x on AVX2, 1.025x and 1.009x on AVX-512.
    // (The clamp is exp_nonpositive's; xc here is x clamped.)
    const float shifter = 12582912.0f + 127.0f;  // 1.5 * 2^23 + the exponent bias
    const Expr bits = reinterpret(Int(32), xc * 1.44269504f + shifter);
    const Expr n = cast<float>(bits - Expr(int32_t(0x4b40007f)));  // the bits of shifter
    const Expr r = xc - n * 0.693147181f;
    Expr poly;
    if (products.bits() == 16) {
        // Probabilities rounded to a 16-bit format before their products need less: a
        // degree-4 polynomial with 1 as its constant term (exp(0) stays exactly 1), fitted for
        // relative error on |r| <= ln 2 / 2 (weighted least squares iterated towards minimax
        // in float64, then rounded to float): four FMAs against Cephes' six operations. Its
        // relative error against float64 (tests/stages, every 61st float) is at most 3.2e-6
        // with FMA; without, 3.4e-6 on [-10, 0] and 6.9e-6 below, where r's own error grows.
        // That is under 1.5% of float16's unit roundoff (2^-11) and 0.2% of bfloat16's (2^-8),
        // and under the 8e-6 that the error bounds allow any exp (tests/test_util.h). The sums
        // that normalize the probabilities add the same values. scripts/ab_runs.py, 3 rounds,
        // 2 threads, Intel Xeon with AMX, old/new (bench/runs/bf16-exp-half-intel/):
        // mha_forward_bf16/ long-single 1.08x, gpt2-causal 1.06x, bert-512 1.05x, long-causal
        // and bert-128 1.03x, bert-512-b8 1.02x, tutorial 1.00x.
        poly = (((0.04151374f * r + 0.1678746f) * r + 0.50003016f) * r + 0.99996686f) * r + 1.0f;
    } else {
        // Where multiply-adds fuse (x86 with FMA, 64-bit ARM), a degree-5 polynomial in Horner's
        // form, fitted as the 16-bit one is (constant term 1): five FMAs where Cephes' form takes
        // eight operations. Every 61st float (tests/stages, AVX-512): 1.86e-7 on [-10, 0] and
        // 3.91e-7 below, about 3 units in the last place, where Cephes gives 1.2e-7 and 3.0e-7
        // (r's own error dominates below). A degree-6 fit (1.05e-7, 3.12e-7) took one FMA more
        // in a chain of dependent FMAs: on AVX2, whose vectors hold half as many keys, the exp
        // loop appears bound by that chain's latency more than by its throughput (a profile's
        // inference, bench/RESULTS.md session 75). Degree 5 against 6,
        // Zen 4 (bench/RESULTS.md, session 75), the kernels alone: sdpa/ long-single 1.021x,
        // gpt2-causal 1.012x, bert-512 1.009x on AVX2, 1.003-1.008x on AVX-512; whole forwards
        // (scripts/paired_ab.py) 0.99-1.03x. Unfused, Horner's last two roundings (r * p, then
        // + 1) cost 6.0e-7 near 0 (a float32 model of both), past the bound above, so other
        // targets keep Cephes' 1 + (r + r^2 P(r)), which adds r exactly first. (LLVM folds the
        // + 1 into the scaling by 2^n as one more FMA.)
        // (The library's AVX-512 targets name avx512_skylake, which implies FMA without
        // setting its flag.)
        const Expr fused = target_has_feature(Target::FMA) ||
                           target_has_feature(Target::AVX512_Skylake) ||
                           (target_arch_is(Target::ARM) && target_bits() == 64);
        const Expr horner =
            ((((8.29030666e-3f * r + 4.18979116e-2f) * r + 1.66676357e-1f) * r + 4.99991506e-1f) *
                 r +
             0.999999702f) *
                r +
            1.0f;
        const Expr r2 = r * r;
        const Expr cephes =
            ((((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                4.1665795894e-2f) *
                   r +
               1.6666665459e-1f) *
                  r +
              5.0000001201e-1f) *
                 r2 +
             r) +
            1.0f;
        poly = select(fused, horner, cephes);
    }
    const Expr two_to_n = reinterpret(Float(32), bits << 23);
    return poly * two_to_n;
}

Expr pair_word(const Expr &low, const Expr &high) {
    const auto bits = [](const Expr &v) { return cast<uint32_t>(reinterpret(UInt(16), v)); };
    return bits(low) | (bits(high) << 16);
}

Expr word_half(const Expr &word, const Expr &e, const Type &type) {
    return reinterpret(type, cast<uint16_t>(word >> cast<uint32_t>(16 * e)));
}

namespace {

// The float32 path's queries and score (define_packed_score). Dot products start from their
// first term, as every reduction into a register tile does (see define_projection): dk,
// kv_len and key blocks are at least 1.
template <typename Operand>
PackedScore finish_float_score(PackedScore &p, const Func &q, const Expr &q_len,
                               const Operand &operand) {
    Var i("i"), j("j"), d("d"), h("h"), b("b");
    const Expr row = clamp(i, 0, q_len - 1), kv_head = h / p.group;
    p.q_operand(d, i, h, b) = operand(q(d, row, h, b));
    p.r_dot = RDom(1, p.dk - 1, "r_dot");
    p.score(j, i, h, b) = p.q_operand(0, i, h, b) * p.k_packed(j, 0, kv_head, b);
    p.score(j, i, h, b) += p.q_operand(p.r_dot, i, h, b) * p.k_packed(j, p.r_dot, kv_head, b);
    return p;
}

}  // namespace

PackedScore define_packed_score(const Func &q, const Func &k, const Func &v, const Expr &dk,
                                const Expr &dv, const Expr &q_len, const Expr &kv_len,
                                const Expr &group, const Type &products, bool key_panels,
                                int value_tile, bool float_operand, bool float_values) {
    if (products != Float(32) && products != BFloat(16)) {
        throw CompileError("attention products in " + type_name(products) +
                           ": only float32 and bfloat16 are defined");
    }
    PackedScore p;
    p.dk = dk;
    p.group = group;
    p.head_elements = kv_len * max(dk, dv);
    p.paired = products == BFloat(16) && !float_operand;
    p.rounded = products == BFloat(16) && float_operand;
    // What the products take of a key, value or query: bfloat16 for pairs, float32 rounded to
    // bfloat16 for the rounded path, float32 as it is otherwise.
    const auto operand = [&](const Expr &x) {
        if (p.paired) return cast(products, x);
        return p.rounded ? round_operand(x, products) : x;
    };
    // The values' operand: as the keys', or float32 as given where the values stay float32.
    p.float_values = p.paired && float_values;
    const bool paired_values = p.paired && !float_values;
    const auto value_operand = [&](const Expr &x) {
        return p.paired ? cast<float>(x) : operand(x);
    };
    Var j("j"), i("i"), c("c"), d("d"), h("h"), b("b"), e("e"), pair("p");
    // Packing clamps the indices a schedule rounds up (whole vectors of features, register
    // tiles or key blocks past the last key), so no read leaves the inputs.
    const Expr key_row = clamp(j, 0, kv_len - 1);
    // The keys by unclamped key index: the transposing copy (schedule_transpose) stages a tile of
    // them and reads it back at a plain stride. (Staged from `k` itself, the tile was indexed by
    // the clamped key, and its every read-back vector a gather with index arithmetic.)
    // Pairs take the keys rounded to the products' type here, so that the transposing copy
    // stages and moves half the bytes (the rounding and the transposition commute), and keys
    // that are bfloat16 already (the forward's projections) are copied as they are: staged as
    // float32 and rounded back after the transpose, the copy spent its time in Halide's emulated
    // rounding (attngen_parallel_timeline bert-128 bf16, Zen 5: the copy 14.5-16.6 -> 11.5-11.9
    // us; scripts/paired_ab.py, 10 pairs: mha_forward_bf16/bert-128 1.004x, tutorial 1.007x).
    Func k_rows("k_rows");
    k_rows(d, j, h, b) = operand(k(d, key_row, h, b));
    p.k_source = k_rows;
    // Rows of keys, (j, d, h, b), for bfloat16 pairs and for keys not in panels.
    if (p.paired || !key_panels) {
        p.k_transposed = Func("k_transposed");
        p.k_transposed(j, d, h, b) = k_rows(d, j, h, b);
    }
    const Expr row = clamp(i, 0, q_len - 1);
    const Expr kv_head = h / group;
    p.score = Func("score");
    // The queries of a tile's rows, read at rows clamped to the last query, which the score
    // reads unclamped: a row's clamp is then computed once per row, not at every step.
    p.q_operand = Func("q_operand");
    if (p.paired) {
        // Pairs from the transposed words: the two halves of a row of words, each contiguous
        // along the keys, interleaved. The last pair of an odd dk repeats the last feature,
        // which meets the query's 0. An even dk (q_even_features) reads every word's high half
        // as it is, so that a specialization on it loads words as vectors, not half by half.
        p.q_even_features = dk % 2 == 0;
        const Expr high = select(p.q_even_features, 2 * pair + 1, min(2 * pair + 1, dk - 1));
        p.k_words = Func("k_words");
        p.k_words(pair, j, h, b) = pair_word(k_rows(2 * pair, j, h, b), k_rows(high, j, h, b));
        p.k_word_rows = Func("k_word_rows");
        p.k_word_rows(j, pair, h, b) = p.k_words(pair, j, h, b);
        p.k_packed = Func("k_pairs");
        p.k_packed(e, j, pair, h, b) = word_half(p.k_word_rows(j, pair, h, b), e, products);
        if (paired_values) {
            p.v_packed = Func("v_pairs");
            p.v_packed(e, c, pair, h, b) =
                cast(products, v(clamp(c, 0, dv - 1), clamp(2 * pair + e, 0, kv_len - 1), h, b));
            p.values = p.v_packed;
        }
        // An even dk reads the queries' features as they are, so that a specialization on it
        // loads them as vectors, not one by one.
        const Expr feature = 2 * pair + e;
        const Expr feature_read = select(p.q_even_features, feature, min(feature, dk - 1));
        // By unclamped row, as k_rows is by unclamped key: a schedule may stage a tile of them
        // and read it back transposed at a plain stride. Rounded before they are staged, as the
        // keys are (k_rows): the forward's queries are bfloat16 already, and staged as float32
        // they were rounded back to bfloat16 in the attention task, in Halide's emulated
        // conversion (4.8% of the task at mha_forward_bf16/bert-128, perf, Zen 5). The task at
        // bert-128 (attngen_parallel_timeline, 3 alternations): 102.6-103.6 -> 99.4-99.6 us.
        p.q_rows = Func("q_rows");
        p.q_rows(d, i, h, b) = operand(q(d, row, h, b));
        p.q_operand(e, pair, i, h, b) =
            select(feature < dk, p.q_rows(feature_read, i, h, b), cast(products, 0.0f));
        p.r_dot_first = RDom(0, 2, "r_dot_first");
        p.r_dot = RDom(0, 2, 1, (dk + 1) / 2 - 1, "r_dot");
        const auto pair_product = [&](const Expr &e, const Expr &pair) {
            return cast<float>(p.q_operand(e, pair, i, h, b)) *
                   cast<float>(p.k_packed(e, j, pair, kv_head, b));
        };
        p.score(j, i, h, b) = 0.0f;
        p.score(j, i, h, b) += pair_product(p.r_dot_first, 0);
        p.score(j, i, h, b) += pair_product(p.r_dot.x, p.r_dot.y);
        if (paired_values) return p;
    } else if (key_panels) {
        Var jl("jl"), jp("jp");
        p.k_panels = Func("k_panels");
        p.k_panels(jl, d, jp, h, b) = k_rows(d, jp * kKeyPanel + jl, h, b);
        p.k_packed = Func("k_packed");
        p.k_packed(j, d, h, b) = p.k_panels(j % kKeyPanel, d, j / kKeyPanel, h, b);
    } else {
        p.k_packed = p.k_transposed;
    }
    p.v_packed = Func("v_packed");
    p.v_packed(c, j, h, b) = value_operand(v(clamp(c, 0, dv - 1), key_row, h, b));
    p.values = p.v_packed;
    if (value_tile > 0) {
        // A register tile narrower than the head reads a slice of every value row, so its keys'
        // values lie one row stride apart: at 256 bytes (head size 64, AVX2's tiles of 16
        // features) a key block's slices fall on a quarter of L1's sets, which the block
        // overflows, evicting the probabilities the tile broadcasts. perf of the AVX2 variant at
        // sdpa/long-single: the probs x values loop at about 0.82 of the FMA peak against 0.99
        // for the scores' loop over key panels. Where a head's values exceed
        // kValuesInPlaceBytes, they are copied into panels of value_tile features instead,
        // (cl, j, cp, hk, b) = feature cp * value_tile + cl of key j, so that a tile reads one
        // contiguous run per panel. A head of one tile, or a short one, is read where it is.
        // In place, every tile's features lie within the head: the promise bounds the reads to
        // it without a clamp, whose per-lane min would make every vector load a gather. The
        // key index is the products' reduction variable; its clamp, five scalar instructions
        // per step of the tile (an AVX2 step has 12 FMAs), carries likely() so that loop
        // partitioning keeps it to the steps past the last key (the flash kernel's loop
        // reaches one key past a block's last where that is its first key). AVX2 variant,
        // scripts/ab_runs.py, 3 rounds, measured while those heads were still read in place:
        // sdpa/gpt2-causal 1.05x, long-single, bert-512 forward 1.02x; AVX-512 (16 FMAs per
        // step) level. The schedule specializes the tile on values_in_place, so that each
        // branch reads one side of the select; the feature index is still clamped where
        // values_in_place is false, so that an unsimplified select loads nothing past a head.
        // Halide skips the panels' loop and allocation when nothing reads them.
        p.value_tile = value_tile;
        Var cl("cl"), cp("cp");
        p.v_panels = Func("v_panels");
        p.v_panels(cl, j, cp, h, b) =
            value_operand(v(min(cp * value_tile + cl, dv - 1), key_row, h, b));
        p.values = Func("values");
        if (p.rounded) {
            // Rounded values are a copy: never read in place.
            p.values(c, j, h, b) = p.v_panels(c % value_tile, j, c / value_tile, h, b);
            return finish_float_score(p, q, q_len, operand);
        }
        // Only a short head is read in place, one tile wide or several. Longer heads are copied
        // into panels, which attngen allocates aligned to the cache line: a caller's rows need not
        // be (glibc's large blocks, a std::vector<float> of a head's size among them, start 16
        // bytes past a line), and then every vector the tile loads in place spans two lines.
        // One-tile heads had been read in place at any length: sdpa/ with them copied too
        // (scripts/ab_runs.py, 3 rounds, AVX-512, 2 threads, Intel Xeon with AMX, perf: the
        // in-place loop's unaligned loads and the FMAs waiting on them) long-single 1.13x,
        // long-causal 1.09x, bert-512 1.07x, bert-512-b8 1.07x, gpt2-causal 1.06x; tutorial,
        // tutorial-cross, bert-128 (short heads, still in place) level; decode/llama3-8b-prefill
        // (values from attngen's aligned cache) level. On a Zen 4 the copy had measured level with
        // reading in place (bench/RESULTS.md, 2026-11-26). A head of a projection of several heads
        // (rows a whole row of heads apart) was already copied when long: at long-causal (1024
        // features, rows 4 KiB apart) its tile's value loads were 35% of the attention's samples
        // in place, and mha_forward/long-causal took 1.16x the time.
        const Expr head_bytes = cast<int64_t>(kv_len) * dv * int(sizeof(float));
        p.values_in_place = dv % value_tile == 0 && head_bytes <= Expr(kValuesInPlaceBytes);
        const Expr feature =
            select(p.values_in_place, unsafe_promise_clamped(c, 0, dv - 1), clamp(c, 0, dv - 1));
        const Expr key_in_place = min(likely(j), kv_len - 1);
        p.values(c, j, h, b) =
            select(p.values_in_place, value_operand(v(feature, key_in_place, h, b)),
                   p.v_panels(c % value_tile, j, c / value_tile, h, b));
    }

    return p.paired ? p : finish_float_score(p, q, q_len, operand);
}

AttentionStage define_attention(const Func &q, const Func &k, const Func &v, const Expr &dk,
                                const Expr &dv, const Expr &q_len, const Expr &kv_len,
                                const Expr &group, const Expr &scale, const MaskInputs &mask,
                                int value_tile, const Type &products) {
    AttentionStage a;
    const Var &j = a.j, &i = a.i, &c = a.c, &h = a.h, &b = a.b, &u = a.u;
    a.dk = dk;
    a.dv = dv;
    a.q_len = q_len;
    a.kv_len = kv_len;
    a.mask = mask;

    a.packed = define_packed_score(q, k, v, dk, dv, q_len, kv_len, group, products, false,
                                   value_tile, false, true);

    const MaskedLogits logits = define_masked_logits(a.packed.score, scale, mask, q_len, kv_len);
    const Func &masked = logits.masked, &masked_logit = logits.masked_logit;
    const Expr masked_value = logits.masked_value;
    const Expr row = clamp(i, 0, q_len - 1);

    // Row reductions keep kReductionLanes partial results (a fixed summation order for every
    // target, and whole vectors for the schedule), then combine them.
    const Expr full_groups = kv_len / kReductionLanes;
    const Expr tail_base = full_groups * kReductionLanes;
    a.r_lanes_full = RDom(0, full_groups, "r_lanes_full");
    a.r_lanes_tail = RDom(0, kv_len - tail_base, "r_lanes_tail");
    a.r_lanes = RDom(0, kReductionLanes, "r_lanes");

    a.max_lanes = Func("max_lanes");
    a.max_lanes(u, i, h, b) = masked_value;
    a.max_lanes(u, i, h, b) =
        max(a.max_lanes(u, i, h, b), masked_logit(a.r_lanes_full * kReductionLanes + u, i, h, b));
    a.max_lanes(a.r_lanes_tail, i, h, b) = max(a.max_lanes(a.r_lanes_tail, i, h, b),
                                               masked_logit(tail_base + a.r_lanes_tail, i, h, b));
    a.row_max = Func("row_max");
    a.row_max(i, h, b) = masked_value;
    a.row_max(i, h, b) = max(a.row_max(i, h, b), a.max_lanes(a.r_lanes, i, h, b));

    // Arguments are <= 0 after the shift.
    a.exp_score = Func("exp_score");
    const Expr shifted = masked_logit(j, i, h, b) - a.row_max(i, h, b);
    a.exp_score(j, i, h, b) = select(masked(j, i, h, b), 0.0f, exp_nonpositive(shifted));

    a.sum_lanes = Func("sum_lanes");
    a.sum_lanes(u, i, h, b) = 0.0f;
    a.sum_lanes(u, i, h, b) += a.exp_score(a.r_lanes_full * kReductionLanes + u, i, h, b);
    a.sum_lanes(a.r_lanes_tail, i, h, b) += a.exp_score(tail_base + a.r_lanes_tail, i, h, b);
    a.row_sum = Func("row_sum");
    a.row_sum(i, h, b) = 0.0f;
    a.row_sum(i, h, b) += a.sum_lanes(a.r_lanes, i, h, b);

    // A fully masked row has sum 0: its probabilities, and so its output, are 0.
    a.inv_sum = Func("inv_sum");
    a.inv_sum(i, h, b) = select(a.row_sum(i, h, b) > 0.0f, 1.0f / a.row_sum(i, h, b), 0.0f);
    a.probs = Func("probs");
    a.probs(j, i, h, b) = a.exp_score(j, i, h, b) * a.inv_sum(i, h, b);

    // Unlike the other register tiles, this sum starts from 0: the GPU schedule stages probs and
    // values per key tile of the update, where an initial term could not read them.
    a.r_keys = RDom(0, kv_len, "r_keys");
    a.out_acc = Func("out_acc");
    a.out_acc(c, i, h, b) = 0.0f;
    // probs is read at a clamped row because it may be a pipeline output (the weights), which
    // cannot grow to cover rows a register tile computes past q_len.
    a.out_acc(c, i, h, b) +=
        a.probs(a.r_keys, row, h, b) * a.packed.values(c, a.r_keys, h / group, b);
    a.out = Func("attention_out");
    a.out(c, i, h, b) = a.out_acc(c, i, h, b);
    return a;
}

}  // namespace attngen
