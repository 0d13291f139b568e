// Stage-level tests below the C API: the algorithm of generators/stages.h, JIT-compiled with
// the schedules the kernels use, checked against double precision. As Halide's apps test their
// helpers, each test covers one stage over inputs that the C API reaches only indirectly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <attngen/attngen.h>
#include <attngen/detail/half_precision.h>
#include "Halide.h"
#include "knob_draws.h"
#include "layout.h"
#include "reference.h"
#include "schedule_cpu.h"
#include "schedule_gpu.h"
#include "stages.h"

namespace {

using namespace Halide;

float from_bits(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

uint32_t to_bits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
}

// The targets the kernels are built for that this machine can run: the host (with FMA and
// AVX-512 where it has them) and the baseline without FMA, which rounds the polynomial
// differently.
std::vector<Target> cpu_targets() {
    const Target host = get_host_target();
    std::vector<Target> targets = {host};
    if (host.arch == Target::X86) targets.push_back(Target("x86-64-linux"));
    return targets;
}

// ---------------------------------------------------------------------------------------------
// exp_nonpositive: the error bound its comment in stages.cpp states, over the whole range.

struct ExpError {
    double worst_near = 0;  // max relative error for x in [-10, 0]
    double worst_far = 0;   // max relative error for x in [-87, -10)
    float worst_near_x = 0, worst_far_x = 0;
};

// Every `stride`-th float between -0 and -87 by bit pattern (negative floats grow in magnitude
// with their bits), so the sample covers every binade evenly. `products`: exp_nonpositive's
// choice of polynomial.
ExpError measure_exp_error(const Target &target, uint32_t stride,
                           const Type &products = Float(32)) {
    const uint32_t first = to_bits(-0.0f), last = to_bits(-87.0f);
    const int n = int((last - first) / stride + 1);
    Var i("i");
    Func x("x"), e("e");
    x(i) = reinterpret(Float(32), Expr(first) + cast<uint32_t>(i) * Expr(stride));
    e(i) = attngen::exp_nonpositive(x(i), products);
    e.vectorize(i, target.natural_vector_size<float>()).parallel(i, 1 << 16);
    Buffer<float> out = e.realize({n}, target);
    ExpError r;
    for (int k = 0; k < n; ++k) {
        const float xf = from_bits(first + uint32_t(k) * stride);
        const double want = std::exp(double(xf));
        const double rel = std::abs(double(out(k)) - want) / want;
        if (xf >= -10.0f && rel > r.worst_near) r.worst_near = rel, r.worst_near_x = xf;
        if (xf < -10.0f && rel > r.worst_far) r.worst_far = rel, r.worst_far_x = xf;
    }
    return r;
}

TEST(ExpNonpositive, StaysWithinItsStatedErrorBound) {
    // stages.cpp states at most 5.6e-7 on [-10, 0] and 4.1e-6 down to -87 without FMA, 1.9e-7
    // and 3.9e-7 with it. Every 61st float by bit pattern (18 million points, 137 thousand per
    // binade) on each target, with 3% of slack for the points between them.
    for (const Target &t : cpu_targets()) {
        const ExpError r = measure_exp_error(t, 61);
        std::printf(
            "%s: worst relative error %.3g at x = %.9g on [-10, 0], %.3g at x = %.9g below\n",
            t.to_string().c_str(), r.worst_near, r.worst_near_x, r.worst_far, r.worst_far_x);
        const bool fma = t.has_feature(Target::FMA) || t.has_feature(Target::AVX512);
        EXPECT_LE(r.worst_near, fma ? 1.96e-7 : 5.8e-7)
            << t.to_string() << " at x = " << r.worst_near_x;
        EXPECT_LE(r.worst_far, fma ? 4.02e-7 : 4.2e-6)
            << t.to_string() << " at x = " << r.worst_far_x;
        // And the bound is not loose by orders of magnitude (it would hide a change).
        EXPECT_GE(r.worst_near, 5e-8) << t.to_string();
    }
}

TEST(ExpNonpositive, ForHalfProductsStaysWithinItsStatedErrorBound) {
    // stages.cpp states at most 3.2e-6 with FMA; without, 3.4e-6 on [-10, 0] and 6.9e-6 below.
    // The same polynomial for either 16-bit format; 3% of slack as above.
    for (const Type &products : {BFloat(16), Float(16)}) {
        for (const Target &t : cpu_targets()) {
            const ExpError r = measure_exp_error(t, 61, products);
            std::printf("%s, %s products: worst relative error %.3g on [-10, 0], %.3g below\n",
                        t.to_string().c_str(), products == BFloat(16) ? "bfloat16" : "float16",
                        r.worst_near, r.worst_far);
            const bool fma = t.has_feature(Target::FMA) || t.has_feature(Target::AVX512);
            EXPECT_LE(r.worst_near, fma ? 3.3e-6 : 3.5e-6) << t.to_string();
            EXPECT_LE(r.worst_far, fma ? 3.3e-6 : 7.1e-6) << t.to_string();
            EXPECT_GE(r.worst_near, 1e-6) << t.to_string();  // not the float32 polynomial
        }
    }
}

TEST(ExpNonpositive, IsExactAtZeroAndZeroBelowUnderflow) {
    // exp_nonpositive is exactly 0 from where 2^n would be 2^-127 (x <= -126.5 / log2(e), about
    // -87.683) down: the lowest float and -inf (the running state's gap between the lowest
    // float and a large maximum) among them, 0 and not NaN. Above that it follows exp into the
    // subnormals (below 2^-126, x < -87.337), to within the polynomial's error and the
    // subnormals' spacing of 2^-149. Vectorized as the kernels are, and one by one.
    const std::vector<float> zero = {-87.684f,
                                     -88.0f,
                                     -100.0f,
                                     -1e30f,
                                     std::numeric_limits<float>::lowest(),
                                     -std::numeric_limits<float>::infinity()};
    const std::vector<float> near = {-87.0001f, -87.2f, -87.336f, -87.34f, -87.5f, -87.68f};
    std::vector<float> xs = {0.0f, -0.0f};
    xs.insert(xs.end(), zero.begin(), zero.end());
    xs.insert(xs.end(), near.begin(), near.end());
    Buffer<float> in(int(xs.size()));
    for (size_t k = 0; k < xs.size(); ++k) in(int(k)) = xs[k];
    const int first_zero = 2, first_near = first_zero + int(zero.size());
    const double subnormal_spacing = std::ldexp(1.0, -149);
    for (const Type &products : {Float(32), BFloat(16)}) {
        // The stated bounds of ExpNonpositive's other tests, with slack.
        const double relative = products == Float(32) ? 4.2e-6 : 7.1e-6;
        for (const Target &t : cpu_targets()) {
            for (const bool vectorized : {false, true}) {
                Var i("i");
                Func e("e");
                e(i) = attngen::exp_nonpositive(in(i), products);
                if (vectorized) e.vectorize(i, 8, TailStrategy::GuardWithIf);
                Buffer<float> out = e.realize({int(xs.size())}, t);
                const std::string where = t.to_string() + ", " + std::to_string(products.bits()) +
                                          "-bit" + (vectorized ? ", vectorized" : "");
                EXPECT_EQ(out(0), 1.0f) << where;
                EXPECT_EQ(out(1), 1.0f) << where;
                for (int k = first_zero; k < first_near; ++k) {
                    EXPECT_EQ(out(k), 0.0f) << xs[size_t(k)] << ", " << where;
                }
                for (int k = first_near; k < int(xs.size()); ++k) {
                    const double want = std::exp(double(xs[size_t(k)]));
                    EXPECT_NEAR(out(k), want, relative * want + subnormal_spacing)
                        << xs[size_t(k)] << ", " << where;
                    EXPECT_GT(out(k), 0.0f) << xs[size_t(k)] << ", " << where;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// define_masked_logits: which keys are masked, against the float64 reference's rule.

struct MaskCase {
    int batch, heads, q_len, kv_len;
    attngen_causal causal;
    bool key_lengths, bool_mask, additive;
};

std::string describe(const MaskCase &c) {
    return "batch " + std::to_string(c.batch) + " heads " + std::to_string(c.heads) + " q_len " +
           std::to_string(c.q_len) + " kv_len " + std::to_string(c.kv_len) + " causal " +
           std::to_string(int(c.causal)) + " lengths " + std::to_string(c.key_lengths) + " bool " +
           std::to_string(c.bool_mask) + " additive " + std::to_string(c.additive);
}

// define_masked_logits over mask inputs given as parameters, JIT-compiled once for every case.
struct MaskPipeline {
    ImageParam kv_lengths{Int(32), 1, "kv_lengths"};
    ImageParam bool_mask{UInt(8), 3, "bool_mask"};
    ImageParam additive{Float(32), 4, "additive"};
    Param<int> causal{"causal"}, q_len{"q_len"}, kv_len{"kv_len"};
    Param<bool> has_bool_mask{"has_bool_mask"}, has_additive{"has_additive"};
    Func masked{"masked_u8"}, logit{"logit"};

    MaskPipeline() {
        attngen::MaskInputs in;
        in.kv_lengths = kv_lengths;
        in.bool_mask = bool_mask;
        in.additive = additive;
        in.causal = causal;
        in.has_bool_mask = has_bool_mask;
        in.has_additive = has_additive;
        Var j("j"), i("i"), h("h"), b("b");
        Func score("score");
        score(j, i, h, b) = 1.0f;
        attngen::MaskedLogits logits =
            attngen::define_masked_logits(score, 0.5f, in, q_len, kv_len);
        masked(j, i, h, b) = cast<uint8_t>(logits.masked(j, i, h, b));
        logit(j, i, h, b) = logits.logit(j, i, h, b);
        masked.compile_jit();
        logit.compile_jit();
    }
};

void check_mask_case(MaskPipeline &p, const MaskCase &c) {
    SCOPED_TRACE(describe(c));
    const int B = c.batch, H = c.heads, Lq = c.q_len, Lkv = c.kv_len;
    std::vector<int32_t> lengths(B);
    for (int b = 0; b < B; ++b) lengths[b] = (b * 7 + 3) % (Lkv + 2);  // 0 and > kv_len too
    std::vector<uint8_t> bools(size_t(B) * Lq * Lkv);
    for (size_t k = 0; k < bools.size(); ++k) bools[k] = (k * 2654435761u >> 7) % 5 == 0;
    std::vector<float> adds(size_t(B) * H * Lq * Lkv);
    for (size_t k = 0; k < adds.size(); ++k) {
        adds[k] = (k * 40503u >> 3) % 7 == 0 ? -std::numeric_limits<float>::infinity()
                                             : float(int(k % 9) - 4) * 0.25f;
    }
    attngen_mask mask{};
    mask.causal = c.causal;
    if (c.key_lengths) mask.kv_lengths = lengths.data();
    if (c.bool_mask) mask.bool_mask = bools.data(), mask.bool_mask_batch = B;
    if (c.additive) mask.additive = adds.data(), mask.additive_batch = B, mask.additive_heads = H;

    // The mask inputs as the runtime feeds them: absent parts are neutral, their flags off.
    Buffer<int32_t> len_buf(B);
    for (int b = 0; b < B; ++b) len_buf(b) = c.key_lengths ? lengths[b] : Lkv;
    Buffer<uint8_t> bool_buf(Lkv, Lq, B);
    Buffer<float> add_buf(Lkv, Lq, H, B);
    for (int b = 0; b < B; ++b) {
        for (int i = 0; i < Lq; ++i) {
            for (int j = 0; j < Lkv; ++j) {
                bool_buf(j, i, b) = bools[(size_t(b) * Lq + i) * Lkv + j];
                for (int h = 0; h < H; ++h) {
                    add_buf(j, i, h, b) = adds[((size_t(b) * H + h) * Lq + i) * Lkv + j];
                }
            }
        }
    }
    p.kv_lengths.set(len_buf);
    p.bool_mask.set(bool_buf);
    p.additive.set(add_buf);
    p.causal.set(int(c.causal));
    p.q_len.set(Lq);
    p.kv_len.set(Lkv);
    p.has_bool_mask.set(c.bool_mask);
    p.has_additive.set(c.additive);
    // One key past kv_len too: a schedule's rounded-up key block must see it masked.
    Buffer<uint8_t> got = p.masked.realize({Lkv + 1, Lq, H, B});
    Buffer<float> logit = p.logit.realize({Lkv, Lq, H, B});

    const attngen_ref::SdpaShape shape{B, H, Lq, Lkv, 1, 1};
    for (int bb = 0; bb < B; ++bb) {
        for (int hh = 0; hh < H; ++hh) {
            for (int ii = 0; ii < Lq; ++ii) {
                ASSERT_EQ(got(Lkv, ii, hh, bb), 1) << "key kv_len is visible at " << ii;
                for (int jj = 0; jj < Lkv; ++jj) {
                    const double add = attngen_ref::additive_at(&mask, shape, bb, hh, ii, jj);
                    const bool want = attngen_ref::hard_masked(&mask, shape, bb, ii, jj) ||
                                      add == -std::numeric_limits<double>::infinity();
                    ASSERT_EQ(bool(got(jj, ii, hh, bb)), want)
                        << "b " << bb << " h " << hh << " i " << ii << " j " << jj;
                    if (!want) {
                        ASSERT_EQ(double(logit(jj, ii, hh, bb)), 0.5 + add);
                    }
                }
            }
        }
    }
}

TEST(MaskedLogits, MatchTheReferenceForEveryMaskKind) {
    MaskPipeline pipeline;
    for (attngen_causal causal :
         {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
        for (int parts = 0; parts < 8; ++parts) {
            // q_len < kv_len, q_len > kv_len (bottom-right then hides whole rows) and equal.
            for (auto [lq, lkv] : {std::pair{3, 7}, std::pair{7, 3}, std::pair{5, 5}}) {
                check_mask_case(pipeline, {2, 2, lq, lkv, causal, bool(parts & 1), bool(parts & 2),
                                           bool(parts & 4)});
            }
        }
    }
}

// A KV cache's items differ in length n_b: a bottom-right causal mask given causal_end = n_b
// lets query i see keys j <= n_b - q_len + i of its own item (and only keys below n_b), whatever
// the call's kv_len (the longest item).
TEST(MaskedLogits, BottomRightCausalEndsAtEachItemsOwnLength) {
    const int q_len = 3, kv_len = 9;
    const std::vector<int32_t> lengths = {9, 5, 2, 0};
    const int B = int(lengths.size());
    Buffer<int32_t> n(B);
    for (int b = 0; b < B; ++b) n(b) = lengths[size_t(b)];
    attngen::MaskInputs in = attngen::key_lengths_mask(Func(n), int(ATTNGEN_CAUSAL_BOTTOM_RIGHT));
    in.causal_end = Func(n);
    Var j("j"), i("i"), h("h"), b("b");
    Func score("score");
    score(j, i, h, b) = 1.0f;
    const attngen::MaskedLogits logits =
        attngen::define_masked_logits(score, 1.0f, in, Expr(q_len), Expr(kv_len));
    Func masked("masked_u8");
    masked(j, i, h, b) = cast<uint8_t>(logits.masked(j, i, h, b));
    Buffer<uint8_t> got = masked.realize({kv_len, q_len, 1, B});
    for (int bb = 0; bb < B; ++bb) {
        for (int ii = 0; ii < q_len; ++ii) {
            for (int jj = 0; jj < kv_len; ++jj) {
                const int nb = lengths[size_t(bb)];
                const bool visible = jj < nb && jj <= nb - q_len + ii;
                ASSERT_EQ(got(jj, ii, 0, bb), visible ? 0 : 1)
                    << "item of length " << nb << ", query " << ii << ", key " << jj;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// define_projection with schedule_projection_cpu: register tiles at the edges of rows and
// output features.

// The projection as the kernels compute it, sizes from its buffers, compiled once per target.
struct ProjectionPipeline {
    ImageParam x{Float(32), 2, "x"}, w_t, bias{Float(32), 1, "bias"};
    // The result's feature count, which a pipeline's output passes to the schedule (its bound)
    // in the bfloat16 pipeline; the float32 one computes whole panels.
    Param<int> out_features{"out_features"};
    Func result;
    attngen::ProjectionStage stage;

    // group_size > 0 reads the input features as groups of that many (as the output projection
    // reads heads); the feature counts checked are then multiples of it.
    explicit ProjectionPipeline(const Target &target,
                                attngen::ProjectionRows rows = attngen::ProjectionRows::Many,
                                const attngen::CpuScheduleKnobs &knobs = {}, int group_size = 0)
        : ProjectionPipeline(target, rows, knobs, group_size, Float(32), {}, false) {}

    // Bfloat16 weights in pairs (layout.h), with the operand as float32 and the direct path
    // where the target's tiles allow it, as the generators give a CPU without a bfloat16 dot
    // product.
    static ProjectionPipeline bfloat16_float_operand(const Target &target,
                                                     const attngen::CpuScheduleKnobs &knobs) {
        return ProjectionPipeline(target, attngen::ProjectionRows::Many, knobs, 0, BFloat(16),
                                  attngen::cpu_direct_path(target, knobs), true);
    }

    // Bfloat16 weights in pairs and the operand rounded to bfloat16 pairs, which a target with
    // a bfloat16 dot product reduces in vdpbf16ps lanes, with the direct path.
    static ProjectionPipeline bfloat16_dot(const Target &target,
                                           const attngen::CpuScheduleKnobs &knobs) {
        return ProjectionPipeline(target, attngen::ProjectionRows::Many, knobs, 0, BFloat(16),
                                  attngen::cpu_direct_path(target, knobs), false);
    }

    // Float16 weights as (output, feature), over a float32 operand, with the direct path where
    // the target's tiles allow it, as the generators give every CPU.
    static ProjectionPipeline float16(const Target &target,
                                      const attngen::CpuScheduleKnobs &knobs) {
        return ProjectionPipeline(target, attngen::ProjectionRows::Many, knobs, 0, Float(16),
                                  attngen::cpu_direct_path(target, knobs), false);
    }

    bool bfloat16() const { return w_t.type() == BFloat(16); }
    bool float16() const { return w_t.type() == Float(16); }

  private:
    ProjectionPipeline(const Target &target, attngen::ProjectionRows rows,
                       const attngen::CpuScheduleKnobs &knobs, int group_size, const Type &storage,
                       const attngen::DirectPath &direct, bool float_operand)
        : w_t(storage, 2, "w_t") {
        Var d("d"), g("g"), n("n");
        Func x_rows("x_rows");
        const Expr in = x.dim(0).extent();
        const Expr size = group_size > 0 ? Expr(group_size) : in;
        x_rows(d, g, n) = x(g * size + d, n);
        stage = attngen::define_projection("proj", x_rows, size, in / size, x.dim(1).extent(),
                                           bias.dim(0).extent(), w_t, bias, storage, {}, direct,
                                           float_operand);
        attngen::schedule_projection_cpu(stage, target, knobs, rows,
                                         storage != Float(32) ? Expr(out_features) : Expr());
        result = stage.result;
        result.compile_jit(target);
    }
};

// Whether the pipeline's lowered statement for `target` allocates a buffer whose name starts
// with `prefix` and contains `part` (a staged copy is a buffer of its own, as "allocate
// w_t_in_proj_acc$1_intm" for Func::in's wrapper of the weights in acc's rfactor).
bool lowered_allocates(const ProjectionPipeline &pipeline, const Target &target,
                       const std::string &prefix, const std::string &part) {
    // A file per test and target: ctest runs the tests in processes of their own, in parallel.
    const std::string stmt_path =
        ::testing::TempDir() + "attngen_" + prefix + "_" + target.to_string() + ".stmt";
    Func result = pipeline.result;
    result.compile_to_lowered_stmt(stmt_path, result.infer_arguments(), Halide::Text, target);
    std::ifstream stmt_file(stmt_path);
    const std::string stmt((std::istreambuf_iterator<char>(stmt_file)),
                           std::istreambuf_iterator<char>());
    const std::string allocate = "allocate " + prefix;
    for (size_t at = stmt.find(allocate); at != std::string::npos;
         at = stmt.find(allocate, at + 1)) {
        if (stmt.substr(at, stmt.find('\n', at) - at).find(part) != std::string::npos) return true;
    }
    return false;
}

void check_projection(ProjectionPipeline &pipeline, int rows, int in_features, int out_features) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " in " + std::to_string(in_features) + " out " +
                 std::to_string(out_features));
    const int padded_out = attngen::round_up(out_features, attngen::kWeightPadding);
    Buffer<float> x(in_features, rows), bias(padded_out);
    // float32 weights as (output, feature); bfloat16 ones in pairs of features (layout.h):
    // (2 output + feature % 2, feature / 2), the odd count's last pair completed with 0.
    Buffer<float> w_t(padded_out, in_features);
    Buffer<bfloat16_t> w_pairs(2 * padded_out, (in_features + 1) / 2);
    std::vector<float> w_rows(size_t(out_features) * in_features);  // [out, in], for the reference
    for (int n = 0; n < rows; ++n)
        for (int f = 0; f < in_features; ++f) x(f, n) = float((n * 31 + f * 17) % 13 - 6) / 8;
    w_t.fill(0.0f);
    w_pairs.fill(bfloat16_t(0.0f));
    bias.fill(0.0f);
    for (int o = 0; o < out_features; ++o) {
        bias(o) = float(o % 5) - 2;
        for (int f = 0; f < in_features; ++f) {
            const float v = float((o * 7 + f * 3) % 11 - 5) / 16;
            w_t(o, f) = v;
            w_pairs(2 * o + f % 2, f / 2) = bfloat16_t(v);
            w_rows[size_t(o) * in_features + f] = v;
        }
    }
    pipeline.x.set(x);
    pipeline.out_features.set(out_features);
    if (pipeline.bfloat16()) {
        pipeline.w_t.set(w_pairs);
    } else if (pipeline.float16()) {
        Buffer<float16_t> w_half(padded_out, in_features);
        w_half.for_each_element([&](int o, int f) { w_half(o, f) = float16_t(w_t(o, f)); });
        pipeline.w_t.set(w_half);
    } else {
        pipeline.w_t.set(w_t);
    }
    pipeline.bias.set(bias);
    Buffer<float> got = pipeline.result.realize({out_features, rows});

    std::vector<float> x_rowmajor(size_t(rows) * in_features);
    for (int r = 0; r < rows; ++r)
        for (int f = 0; f < in_features; ++f) x_rowmajor[size_t(r) * in_features + f] = x(f, r);
    std::vector<float> b_vec(out_features);
    for (int o = 0; o < out_features; ++o) b_vec[o] = bias(o);
    const std::vector<double> want = attngen_ref::linear(
        rows, in_features, out_features, x_rowmajor.data(), w_rows.data(), b_vec.data());
    for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < out_features; ++o) {
            // Inputs are multiples of 1/128 with small sums: every product and partial sum is
            // exact in float (and every input and weight in bfloat16), so any order of addition
            // gives the reference exactly.
            ASSERT_EQ(double(got(o, r)), want[size_t(r) * out_features + o])
                << "row " << r << " feature " << o;
        }
    }
}

TEST(Projection, RegisterTileEdgesOfRowsAndFeatures) {
    for (const Target &t : cpu_targets()) {
        SCOPED_TRACE(t.to_string());
        ProjectionPipeline pipeline(t);
        const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs({}, t);
        const int tile_rows = k.gemm_rows, task_rows = k.gemm_rows * k.gemm_row_tiles;
        const int tile_features = k.gemm_vectors * t.natural_vector_size<float>();
        for (int rows : {1, tile_rows - 1, tile_rows + 1, task_rows - 1, task_rows + 1}) {
            for (int out : {1, tile_features - 1, tile_features + 1, 67}) {
                if (rows >= 1 && out >= 1) check_projection(pipeline, rows, 13, out);
            }
        }
    }
}

// Decoding's projections split their reduction over input features into parallel tasks when
// rows are few (8 at most), with unrolled steps of 4 features: feature counts that leave a
// short last task or a partial step, rows on either side of the limit.
TEST(Projection, SplitReductionOfFewRows) {
    for (const Target &t : cpu_targets()) {
        SCOPED_TRACE(t.to_string());
        ProjectionPipeline pipeline(t, attngen::ProjectionRows::FewOrMany);
        for (int rows : {1, 2, 5, 8, 9}) {
            for (int in : {1, 3, 13, 64, 67, 130}) check_projection(pipeline, rows, in, 67);
        }
    }
}

// The matrix product's reduction over input features runs in blocks of gemm_k_block features
// (within a group first, then whole groups): counts around a block and its multiples, in one
// group and in groups smaller and larger than a block.
TEST(Projection, BlockedReductionOverInputFeatures) {
    attngen::CpuScheduleKnobs knobs;
    knobs.gemm_k_block = 16;
    for (const Target &t : cpu_targets()) {
        SCOPED_TRACE(t.to_string());
        const int task_rows = attngen::resolve_cpu_knobs(knobs, t).gemm_rows *
                              attngen::resolve_cpu_knobs(knobs, t).gemm_row_tiles;
        ProjectionPipeline one_group(t, attngen::ProjectionRows::Many, knobs);
        for (int in : {1, 15, 16, 17, 47, 48, 49, 100}) {
            check_projection(one_group, task_rows + 3, in, 67);
        }
        for (int group_size : {5, 24}) {
            SCOPED_TRACE("groups of " + std::to_string(group_size));
            ProjectionPipeline groups(t, attngen::ProjectionRows::FewOrMany, knobs, group_size);
            for (int groups_count : {1, 3, 7}) {
                for (int rows : {2, task_rows + 3}) {
                    check_projection(groups, rows, group_size * groups_count, 67);
                }
            }
        }
    }
}

// A register tile narrower than a weight panel takes blocks of gemm_k_block features over
// reductions longer than 512 features and blocks of 64 over shorter ones, a specialization each
// (schedule_projection_cpu): feature counts on either side of 512, past a long block, in one
// group and in groups of 64 (an output projection's heads). AVX2 derives blocks of 512, SSE 64.
TEST(Projection, LongReductionsOfNarrowTilesTakeLongBlocks) {
    if (get_host_target().arch == Target::X86) {
        const auto derived = [](const char *target) {
            return attngen::resolve_cpu_knobs({}, Target(target)).gemm_k_block;
        };
        EXPECT_EQ(derived("x86-64-linux-avx2-fma-f16c"), 512);
        EXPECT_EQ(derived("x86-64-linux-sse41"), 64);
    }
    attngen::CpuScheduleKnobs knobs;
    knobs.gemm_vectors = 1;  // narrower than a panel on every target
    knobs.gemm_k_block = 160;
    for (const Target &t : cpu_targets()) {
        SCOPED_TRACE(t.to_string());
        const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs(knobs, t);
        const int rows = k.gemm_rows * k.gemm_row_tiles + 3;
        ProjectionPipeline one_group(t, attngen::ProjectionRows::Many, knobs);
        for (int in : {511, 512, 513, 640, 700}) check_projection(one_group, rows, in, 67);
        ProjectionPipeline heads(t, attngen::ProjectionRows::FewOrMany, knobs, 64);
        for (int groups : {8, 9, 11}) check_projection(heads, rows, 64 * groups, 67);
    }
}

// AVX2's float32 tiles, narrower than a weight panel, read a copy of each block of the panel's
// weights made per task (schedule_projection_cpu: the block read front to back once, for
// weights that come cold from memory); other narrow targets read the panel in place. The
// lowered statement shows the copy as a buffer of its own (Func::in's wrapper of the weights),
// and the products stay exact around the block edges, past a task's rows, and over groups.
TEST(Projection, Avx2FloatTilesReadAStagedCopyOfEachBlock) {
    const Target host = get_host_target();
    if (host.arch != Target::X86 || !host.has_feature(Target::AVX2)) {
        GTEST_SKIP() << "no AVX2 on this CPU";
    }
    for (const char *name : {"x86-64-linux-avx2-fma-f16c", "x86-64-linux-sse41"}) {
        const Target t(name);
        SCOPED_TRACE(t.to_string());
        const bool staged_expected = t.has_feature(Target::AVX2);
        ProjectionPipeline pipeline(t);
        EXPECT_EQ(lowered_allocates(pipeline, t, "w_t", "_intm"), staged_expected)
            << "staged copy of the weights' blocks";
        const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs({}, t);
        const int task_rows = k.gemm_rows * k.gemm_row_tiles;
        for (int in : {7, 64, 65, 511, 513, 1030})
            check_projection(pipeline, task_rows + 1, in, 67);
        check_projection(pipeline, 5, 1030, 130);
        ProjectionPipeline heads(t, attngen::ProjectionRows::FewOrMany, {}, 64);
        for (int groups : {1, 9}) check_projection(heads, task_rows + 1, 64 * groups, 67);
    }
}

// Float16 weights are widened to float32 once per block of a task where the target has no F16C
// (SSE4.1, the baseline) or stages the block anyway (AVX2's narrow tiles), and inline, by each
// register tile, where the target widens a vector in one instruction and reads the block in
// place (AVX-512): schedule_projection_cpu. The lowered statement shows the widened copy as a
// buffer of its own, and the products stay exact around blocks, past a task's rows and over
// groups.
TEST(Projection, Float16WeightsAreWidenedOncePerBlockWithoutF16C) {
    if (get_host_target().arch != Target::X86) GTEST_SKIP() << "x86 dispatch variants";
    const Target host = get_host_target();
    // The dispatch variants' target strings (cmake/AttngenKernels.cmake): AVX-512 names no F16C.
    for (const char *name : {"x86-64-linux-sse41", "x86-64-linux", "x86-64-linux-avx2-fma-f16c",
                             "x86-64-linux-avx512_skylake"}) {
        const Target t(name);
        SCOPED_TRACE(t.to_string());
        const bool avx512 = t.has_feature(Target::AVX512_Skylake);
        ProjectionPipeline pipeline = ProjectionPipeline::float16(t, {});
        EXPECT_EQ(lowered_allocates(pipeline, t, "proj_weights_widened", "_intm"), !avx512)
            << "widened copy of the weights' blocks";
        const bool runs_here = (!avx512 || host.has_feature(Target::AVX512_Skylake)) &&
                               (!t.has_feature(Target::AVX2) || host.has_feature(Target::AVX2));
        if (!runs_here) continue;
        const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs({}, t);
        const int task_rows = k.gemm_rows * k.gemm_row_tiles;
        for (int in : {7, 64, 65, 511, 513, 1030})
            check_projection(pipeline, task_rows + 1, in, 67);
        check_projection(pipeline, 5, 1030, 130);
    }
}

// Projections with outputs for many groups of panels take row blocks 4x taller than
// gemm_row_tiles says (schedule_projection_cpu), when their input is too large for the panel
// tasks: rows on either side of a tall block, outputs past a whole group. Small tiles keep the
// blocks and groups small; 24000 features make the input of 7 rows larger than the panel
// tasks take (640 KiB), and keep every partial sum exact.
TEST(Projection, TallRowBlocksForManyOutputPanels) {
    attngen::CpuScheduleKnobs knobs;
    knobs.gemm_vectors = 1, knobs.gemm_rows = 2, knobs.gemm_row_tiles = 1;
    for (const Target &t : cpu_targets()) {
        SCOPED_TRACE(t.to_string());
        const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs(knobs, t);
        const int tall_rows = 4 * k.gemm_rows * k.gemm_row_tiles;
        // Groups of 4 tile columns, at least a whole weight panel (64 features).
        const int group_features =
            std::max(64, 4 * k.gemm_vectors * t.natural_vector_size<float>());
        ProjectionPipeline pipeline(t, attngen::ProjectionRows::Many, knobs);
        for (int rows : {tall_rows - 1, tall_rows + 1}) {
            check_projection(pipeline, rows, 24000, 8 * group_features + 1);
        }
    }
}

// Bfloat16 weights on a CPU without a bfloat16 dot product (float_operand) are read through a
// copy widened to float32 (ProjectionStage::weights_f32): per panel of a task on the direct path
// (AVX-512: a register tile as wide as a panel), per block of the reduction on the blocked path
// (AVX2: blocks of 16 pairs here, so that small inputs cross several). Rows on either side of
// a tile and of a task, feature counts odd (the last pair's second half 0) and even, around a
// block, outputs within one panel and past it.
TEST(Projection, BFloat16WeightsWidenedOnceForManyRegisterTiles) {
    // With the dot product, the pairs go to vdpbf16ps as they are: nothing widened.
    {
        Var d("d"), g("g"), n("n");
        Func x_rows("x_rows");
        ImageParam x(Float(32), 2, "x"), w_t(BFloat(16), 2, "w_t"), bias(Float(32), 1, "bias");
        x_rows(d, g, n) = x(d, n);
        const attngen::ProjectionStage dot = attngen::define_projection(
            "dot", x_rows, 64, 1, 9, 64, w_t, bias, BFloat(16), {}, {}, false);
        EXPECT_FALSE(dot.weights_f32.defined());
    }
    const Target host = get_host_target();
    struct Case {
        const char *target;
        Target::Feature needs;
        bool direct;
    };
    int checked = 0;
    for (const Case &c : {Case{"x86-64-linux-avx512_skylake", Target::AVX512_Skylake, true},
                          Case{"x86-64-linux-avx2-fma-f16c", Target::AVX2, false}}) {
        if (host.arch != Target::X86 || !host.has_feature(c.needs)) continue;
        const Target t(c.target);
        SCOPED_TRACE(t.to_string());
        ASSERT_FALSE(attngen::has_bfloat16_dot_product(t));
        // Tiles of 4 vectors by 4 rows, as the checked-in knobs have them: a panel on AVX-512;
        // AVX2 takes its derived tile instead (resolve_cpu_knobs: 16 registers).
        attngen::CpuScheduleKnobs knobs;
        knobs.gemm_vectors = 4, knobs.gemm_rows = 4;
        if (!c.direct) knobs.gemm_k_block = 16;
        ProjectionPipeline pipeline = ProjectionPipeline::bfloat16_float_operand(t, knobs);
        ASSERT_EQ(pipeline.stage.acc_direct.defined(), c.direct);
        ASSERT_TRUE(pipeline.stage.weights_f32.defined());
        // The staged copy is a buffer of its own in the lowered pipeline (Func::in's wrapper),
        // for the direct path's tiles or the blocked path's (the rfactor of acc), named as
        // "allocate proj_weights_f32$1_in_proj_acc$1_intm$0".
        EXPECT_TRUE(
            lowered_allocates(pipeline, t, "proj_weights_f32", c.direct ? "_acc_direct" : "_intm"))
            << "no staged copy of the widened weights";
        const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs(knobs, t);
        const int tile_rows = k.gemm_rows, task_rows = k.gemm_rows * k.gemm_row_tiles;
        // 5 rows: the blocked path, on AVX-512 too (the direct path takes more than 8).
        for (int rows : {5, 9, 2 * tile_rows + 3, task_rows - 1, task_rows + 1}) {
            for (int in : {1, 13, 31, 32, 33, 67}) {
                for (int out : {1, 63, 65, 130}) check_projection(pipeline, rows, in, out);
            }
        }
        // An input larger than the panel tasks take (640 KiB): blocks of rows in parallel,
        // groups of panels per task, 12 panels as at d_model 768.
        check_projection(pipeline, 200, 1000, 768);
        check_projection(pipeline, 200, 1000, 700);
        ++checked;
    }
    if (checked == 0) GTEST_SKIP() << "neither AVX-512 nor AVX2 on this CPU";
}

// Bfloat16 pairs multiplied by vdpbf16ps (the bfloat16 kernels' AVX512-BF16 variant, taken where
// vdpbf16ps pays: AMD Zen 4 and 5 of the CPUs measured): the direct path's register tiles take at
// most 4 rows, in row blocks of 128, where the knobs ask for 6 (schedule_projection_cpu: LLVM moved
// the 6-row tiles' accumulators between registers in every step); the blocked path keeps 6. The
// lowered statement shows the direct tile's accumulator, 64 outputs by 4 rows; the products stay
// exact on both paths, rows around the tiles and the blocks.
TEST(Projection, BFloat16DotDirectTilesTakeFourRows) {
    attngen::CpuScheduleKnobs knobs;
    knobs.gemm_vectors = 4, knobs.gemm_rows = 6, knobs.gemm_row_tiles = 22;
    const Target host = get_host_target();
    if (host.arch != Target::X86 || !host.has_feature(Target::AVX512_Zen4)) {
        GTEST_SKIP() << "no AVX512-BF16 (Halide's avx512_zen4 set) on this CPU";
    }
    const Target t("x86-64-linux-avx512_skylake-avx512_zen4");
    ASSERT_TRUE(attngen::has_bfloat16_dot_product(t));
    ProjectionPipeline pipeline = ProjectionPipeline::bfloat16_dot(t, knobs);
    ASSERT_TRUE(pipeline.stage.paired);
    ASSERT_TRUE(pipeline.stage.acc_direct.defined());
    ASSERT_FALSE(pipeline.stage.weights_f32.defined());
    EXPECT_TRUE(lowered_allocates(pipeline, t, "proj_acc_direct", "[float32 * 64 * 4]"))
        << "the direct path's tile is not 64 outputs by 4 rows";
    EXPECT_FALSE(lowered_allocates(pipeline, t, "proj_acc_direct", "[float32 * 64 * 6]"));
    // 5 rows: the blocked path (the direct path takes more than 8); 1000 features: an input
    // larger than the panel tasks take, in row blocks of 128; 1030: the blocked path's.
    for (int rows : {5, 9, 12, 13, 17, 18, 19, 25}) {
        for (int in : {1, 31, 64, 67}) {
            for (int out : {1, 63, 65, 130}) check_projection(pipeline, rows, in, out);
        }
    }
    for (int rows : {127, 129, 200}) check_projection(pipeline, rows, 1000, 768);
    for (int rows : {127, 133, 200}) check_projection(pipeline, rows, 1030, 130);
}

// The bfloat16 operand of grouped inputs (the output projection's, over heads) is written group
// by group over a pure definition that writes nothing: every feature gets its rounded input,
// the feature past an odd count (the last pair's second half) gets 0, and nothing past an even
// count is written, so that rows stay in_features wide. The buffer starts as NaN, which any
// element left unwritten keeps.
TEST(Projection, BFloat16OperandOfGroupsPadsOnlyAnOddCount) {
    const int group_size = 5, rows = 2;
    for (int groups : {3, 4}) {
        SCOPED_TRACE("groups " + std::to_string(groups));
        const int in_features = groups * group_size;
        ImageParam x(Float(32), 3, "x"), w_t(BFloat(16), 2, "w_t"), bias(Float(32), 1, "bias");
        Var d("d"), g("g"), n("n");
        Func x_groups("x_groups");
        x_groups(d, g, n) = x(d, g, n);
        attngen::ProjectionStage p = attngen::define_projection(
            "proj", x_groups, group_size, groups, rows, 64, w_t, bias, BFloat(16));
        Buffer<float> input(group_size, groups, rows);
        input.for_each_element([&](int dd, int gg, int nn) { input(dd, gg, nn) = 1.5f + gg; });
        x.set(input);
        Buffer<bfloat16_t> operand(in_features + 1, rows);
        operand.fill(bfloat16_t(std::numeric_limits<float>::quiet_NaN()));
        p.operand.realize(operand);
        for (int r = 0; r < rows; ++r) {
            for (int f = 0; f < in_features; ++f) {
                EXPECT_EQ(float(operand(f, r)), 1.5f + f / group_size) << "feature " << f;
            }
            if (in_features % 2 == 1) {
                EXPECT_EQ(float(operand(in_features, r)), 0.0f);
            } else {
                EXPECT_TRUE(std::isnan(float(operand(in_features, r))));
            }
        }
    }
}

// Knob settings drawn from the tuner's values (knob_draws.h), each compiled for the targets in
// turn on one of the projection's paths: float32 of many rows and of few (split reductions),
// bfloat16 weights over a float32 operand, bfloat16 pairs in vdpbf16ps where the target has
// them, and float16 weights. Every one is exact (check_projection) at row and feature counts around
// tiles, panels and blocks.
TEST(TunerKnobs, ProjectionsMatchTheReference) {
    attngen_test::KnobDraws draw(3);
    enum Path { FloatMany, FloatFew, BFloat16FloatOperand, BFloat16Dot, Float16 };
    attngen_test::for_each_drawn_cpu_setting(draw, [&](const Target &t,
                                                       const attngen::CpuScheduleKnobs &knobs) {
        Path path =
            Path(draw.pick({FloatMany, FloatFew, BFloat16FloatOperand, BFloat16Dot, Float16}));
        if (path == BFloat16Dot && !attngen::has_bfloat16_dot_product(t)) {
            path = BFloat16FloatOperand;
        }
        SCOPED_TRACE("path " + std::to_string(path));
        ProjectionPipeline pipeline =
            path == FloatMany  ? ProjectionPipeline(t, attngen::ProjectionRows::Many, knobs)
            : path == FloatFew ? ProjectionPipeline(t, attngen::ProjectionRows::FewOrMany, knobs)
            : path == BFloat16FloatOperand ? ProjectionPipeline::bfloat16_float_operand(t, knobs)
            : path == BFloat16Dot          ? ProjectionPipeline::bfloat16_dot(t, knobs)
                                           : ProjectionPipeline::float16(t, knobs);
        for (int c = 0; c < 6; ++c) {
            check_projection(pipeline, draw.pick({1, 2, 5, 13, 64, 133, 300}),
                             draw.pick({1, 7, 64, 100, 520, 1030, 2049}),
                             draw.pick({1, 17, 64, 100, 200}));
            if (HasFatalFailure()) return;
        }
    });
}

// One set of knobs reaches every dispatch variant; a register tile tuned for AVX-512's 32
// registers must not reach the 16 of AVX2 and SSE4.1, where it would spill.
TEST(Knobs, RegisterTilesFitTheTargetsRegisters) {
    attngen::CpuScheduleKnobs tuned;
    tuned.gemm_vectors = 4, tuned.gemm_rows = 4;    // 21 registers
    tuned.score_vectors = 2, tuned.score_rows = 8;  // 19
    tuned.out_vectors = 4, tuned.out_rows = 4;      // 21
    const auto registers = [](int vectors, int rows) { return vectors * rows + vectors + 1; };
    for (const char *name : {"x86-64-linux-avx-avx2-fma-f16c", "x86-64-linux-sse41"}) {
        SCOPED_TRACE(name);
        const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs(tuned, Target(name));
        EXPECT_LE(registers(k.gemm_vectors, k.gemm_rows), 16);
        EXPECT_LE(registers(k.score_vectors, k.score_rows), 16);
        EXPECT_LE(registers(k.out_vectors, k.out_rows), 16);
    }
    // The 16-register variants' own projection tiles: AVX2 2 x 6; SSE4.1 and baseline, without
    // FMA and with broadcasts that cost a shuffle each, 4 x 2 (resolve_cpu_knobs).
    const attngen::CpuScheduleKnobs avx2 =
        attngen::resolve_cpu_knobs(tuned, Target("x86-64-linux-avx-avx2-fma-f16c"));
    EXPECT_EQ(avx2.gemm_vectors, 2);
    EXPECT_EQ(avx2.gemm_rows, 6);
    for (const char *name : {"x86-64-linux-sse41", "x86-64-linux"}) {
        SCOPED_TRACE(name);
        const attngen::CpuScheduleKnobs sse = attngen::resolve_cpu_knobs(tuned, Target(name));
        EXPECT_EQ(sse.gemm_vectors, 4);
        EXPECT_EQ(sse.gemm_rows, 2);
    }
    // Attention query blocks hold whole tiles of rows of both products on every target, also
    // where neither tile's rows divide the other's.
    attngen::CpuScheduleKnobs uneven = tuned;
    uneven.score_rows = 4, uneven.out_rows = 6;
    uneven.query_block = 16, uneven.long_query_block = 64;
    for (const attngen::CpuScheduleKnobs &knobs : {tuned, uneven}) {
        for (const char *name : {"x86-64-linux-avx-avx2-fma-f16c", "x86-64-linux-sse41",
                                 "x86-64-linux-avx512_skylake", "arm-64-linux"}) {
            SCOPED_TRACE(name);
            const attngen::CpuScheduleKnobs k = attngen::resolve_cpu_knobs(knobs, Target(name));
            for (int rows : {k.score_rows, k.out_rows}) {
                EXPECT_EQ(k.query_block % rows, 0) << rows;
                EXPECT_EQ(k.long_query_block % rows, 0) << rows;
            }
        }
    }
    // The AVX-512 variants as the build names them (AttngenHostTargets.cmake, the bfloat16
    // variants) keep the tiles: in Halide 21 avx512_skylake does not imply Target::AVX512.
    for (const char *name :
         {"x86-64-linux-avx-avx2-fma-f16c-avx512", "x86-64-linux-avx512_skylake",
          "x86-64-linux-avx512_zen4", "x86-64-linux-avx512_sapphirerapids", "arm-64-linux"}) {
        SCOPED_TRACE(name);
        const attngen::CpuScheduleKnobs wide = attngen::resolve_cpu_knobs(tuned, Target(name));
        EXPECT_EQ(wide.gemm_vectors, 4);
        EXPECT_EQ(wide.gemm_rows, 4);
        EXPECT_EQ(wide.score_vectors, 2);
        EXPECT_EQ(wide.score_rows, 8);
        EXPECT_EQ(wide.out_vectors, 4);
        EXPECT_EQ(wide.out_rows, 4);
    }
}

// Whether resolve_gpu_knobs refuses `knobs` with a message naming `knob`.
bool RefusedNaming(const attngen::GpuScheduleKnobs &knobs, const std::string &knob) {
    try {
        attngen::resolve_gpu_knobs(knobs);
    } catch (const Halide::CompileError &e) {
        return std::string(e.what()).find(knob) != std::string::npos;
    }
    return false;
}

// The GPU few-row path's knobs: a block of columns / 4 threads times the split, its partial sums
// in shared memory. A setting no launch could run is refused when the kernel is built, with the
// knob's name in the message.
TEST(Knobs, FewRowsGpuBlocksFitALaunch) {
    const attngen::GpuScheduleKnobs defaults = attngen::resolve_gpu_knobs({});
    EXPECT_EQ(defaults.gpu_few_rows_split, 32);
    EXPECT_EQ(defaults.gpu_few_rows_columns, 64);
    EXPECT_EQ(attngen::gpu_few_rows_path({}).split, 32);
    attngen::GpuScheduleKnobs k;
    k.gpu_few_rows_split = 64, k.gpu_few_rows_columns = 32;  // 512 threads, 8 KiB
    EXPECT_EQ(attngen::resolve_gpu_knobs(k).gpu_few_rows_columns, 32);
    EXPECT_EQ(attngen::gpu_few_rows_path(k).split, 64);
    const auto refused = [](int split, int columns, const std::string &knob) {
        attngen::GpuScheduleKnobs bad;
        bad.gpu_few_rows_split = split, bad.gpu_few_rows_columns = columns;
        return RefusedNaming(bad, knob);
    };
    EXPECT_TRUE(refused(32, 24, "gpu_few_rows_columns"));  // does not divide 64
    EXPECT_TRUE(refused(32, 6, "gpu_few_rows_columns"));   // not whole thread tiles
    EXPECT_TRUE(refused(128, 64, "gpu_few_rows_split"));   // 2048 threads
    attngen::GpuScheduleKnobs widest;
    widest.gpu_few_rows_split = 256, widest.gpu_few_rows_columns = 16;  // 1024 threads: fits
    EXPECT_NO_THROW(attngen::resolve_gpu_knobs(widest));
}

// The GPU split-KV decode's keys per split: 128 unless set, whole warps of keys (its threads
// take 32 keys a row), refused otherwise with the knob's name.
TEST(Knobs, GpuDecodeSplitsAreWholeWarps) {
    EXPECT_EQ(attngen::resolve_gpu_knobs({}).gpu_decode_split_keys, 128);
    for (int split : {32, 256}) {
        attngen::GpuScheduleKnobs k;
        k.gpu_decode_split_keys = split;
        EXPECT_EQ(attngen::resolve_gpu_knobs(k).gpu_decode_split_keys, split);
    }
    for (int split : {48, 100}) {
        attngen::GpuScheduleKnobs k;
        k.gpu_decode_split_keys = split;
        EXPECT_TRUE(RefusedNaming(k, "gpu_decode_split_keys")) << split << " keys a split";
    }
}

// The GPU split-KV decode's rows per thread: a warp per row unless set, or every row of a block
// (kGpuDecodeRows); refused otherwise with the knob's name.
TEST(Knobs, GpuDecodeRowsPerThreadAreOneOrTheBlocks) {
    EXPECT_EQ(attngen::resolve_gpu_knobs({}).gpu_decode_rows_per_thread, 1);
    attngen::GpuScheduleKnobs k;
    k.gpu_decode_rows_per_thread = attngen::kGpuDecodeRows;
    EXPECT_EQ(attngen::resolve_gpu_knobs(k).gpu_decode_rows_per_thread, attngen::kGpuDecodeRows);
    for (int rows : {2, 3}) {
        k.gpu_decode_rows_per_thread = rows;
        EXPECT_TRUE(RefusedNaming(k, "gpu_decode_rows_per_thread")) << rows << " rows a thread";
    }
}

// ---------------------------------------------------------------------------------------------
// The attention kernels (define_flash_attention with schedule_flash_attention_cpu, and
// define_attention with schedule_attention_cpu for the weights output) at knob settings that the
// tuner may pick but the tuned file does not.

// One call of an attention stage: `heads` query heads over heads / group key/value heads.
struct AttentionCase {
    int batch = 1, heads = 1, group = 1, q_len = 1, kv_len = 1, dk = 16, dv = 16;
    int causal = 0;  // attngen_causal

    std::string name() const {
        return "batch " + std::to_string(batch) + " heads " + std::to_string(heads) + "/" +
               std::to_string(group) + " q_len " + std::to_string(q_len) + " kv_len " +
               std::to_string(kv_len) + " dk " + std::to_string(dk) + " dv " + std::to_string(dv) +
               " causal " + std::to_string(causal);
    }
};

// An attention stage's inputs as the generators give them: q (d, q_len, heads, batch), k and v
// (d, kv_len, heads / group, batch), keys past each item's length masked, and a causal mode;
// and the target its pipeline is compiled for (a CPU's, or one with OpenCL).
struct AttentionInputs {
    ImageParam q{Float(32), 4, "q"}, k{Float(32), 4, "k"}, v{Float(32), 4, "v"};
    ImageParam lengths{Int(32), 1, "lengths"};
    Param<int> causal{"causal"};
    Target target;

    explicit AttentionInputs(const Target &target) : target(target) {}

    Expr dk() const { return q.dim(0).extent(); }
    Expr dv() const { return v.dim(0).extent(); }
    Expr q_len() const { return q.dim(1).extent(); }
    Expr kv_len() const { return k.dim(1).extent(); }
    Expr scale() const { return 1.0f / sqrt(cast<float>(dk())); }

    attngen::MaskInputs mask() const {
        Var b("b");
        Func kv_lengths("kv_lengths");
        kv_lengths(b) = lengths(b);
        return attngen::key_lengths_mask(kv_lengths, causal);
    }

    // Binds the inputs of `c` and returns the float64 reference. The values are multiples of
    // 1/64 in [-1, 1], exact in bfloat16, so that bfloat16 products differ from the reference by
    // the rounding of the probabilities alone. The first item sees all its keys, the others two
    // thirds of them.
    attngen_ref::SdpaResult bind(const AttentionCase &c) {
        const int kv_heads = c.heads / c.group;
        Buffer<float> qb(c.dk, c.q_len, c.heads, c.batch), kb(c.dk, c.kv_len, kv_heads, c.batch);
        Buffer<float> vb(c.dv, c.kv_len, kv_heads, c.batch);
        Buffer<int32_t> lb(c.batch);
        for (int b = 0; b < c.batch; ++b) lb(b) = b == 0 ? c.kv_len : c.kv_len * 2 / 3;
        uint32_t state = 12345u + uint32_t(c.kv_len);
        const auto next = [&state] {
            state = state * 1664525u + 1013904223u;
            return float(int(state >> 9) % 129 - 64) / 64.0f;
        };
        for (Buffer<float> *buf : {&qb, &kb, &vb}) {
            buf->for_each_value([&](float &x) { x = next(); });
        }
        q.set(qb), k.set(kb), v.set(vb), lengths.set(lb);
        // Written on the host: on a GPU target Halide copies an input in only if told.
        for (ImageParam *input : {&q, &k, &v, &lengths}) input->get().set_host_dirty();
        causal.set(c.causal);
        attngen_mask m{};
        m.causal = attngen_causal(c.causal);
        m.kv_lengths = lb.data();
        attngen_ref::SdpaShape shape;
        shape.batch = c.batch, shape.heads = c.heads, shape.kv_heads = kv_heads;
        shape.q_len = c.q_len, shape.kv_len = c.kv_len, shape.dk = c.dk, shape.dv = c.dv;
        return attngen_ref::sdpa(shape, qb.data(), kb.data(), vb.data(), &m, 0.0);
    }
};

// A stage's output (dv, q_len, heads, batch) against the reference's [batch, heads, q_len, dv].
void expect_attention_near(const Buffer<float> &got, const std::vector<double> &want,
                           const AttentionCase &c, double tolerance) {
    for (int b = 0; b < c.batch; ++b) {
        for (int h = 0; h < c.heads; ++h) {
            for (int i = 0; i < c.q_len; ++i) {
                const size_t row = (size_t(b) * c.heads + h) * c.q_len + i;
                for (int f = 0; f < c.dv; ++f) {
                    ASSERT_NEAR(got(f, i, h, b), want[row * c.dv + f], tolerance)
                        << "item " << b << " head " << h << " query " << i << " feature " << f;
                }
            }
        }
    }
}

// Float32 products accumulate in float32 with exact operands: float32 roundoff over a few
// thousand keys. Bfloat16 ones round each probability to bfloat16, which moves an output by at
// most the unit roundoff (2^-8) times the largest value, 1; the sum that normalizes them adds
// them unrounded, up to that much again.
double attention_tolerance(const Type &products) {
    return products == BFloat(16) ? 2.0 / 256 : 2e-5;
}

// The flash kernel of attngen_sdpa and attngen_mha_forward as the generators define and schedule
// it, JIT-compiled: for a CPU `target` with `requested` knobs, float32 products or bfloat16 ones
// (in vdpbf16ps pairs where the target has them, over operands rounded to bfloat16 elsewhere).
struct FlashPipeline : AttentionInputs {
    Type products;
    Func out;

    FlashPipeline(const Target &target, const attngen::CpuScheduleKnobs &requested, int group = 1,
                  const Type &products = Float(32))
        : AttentionInputs(target), products(products) {
        const attngen::MaskInputs masks = mask();
        const attngen::CpuScheduleKnobs knobs = attngen::resolve_cpu_knobs(requested, target);
        const bool float_operand =
            products == BFloat(16) && !attngen::has_bfloat16_dot_product(target);
        attngen::FlashAttentionStage a = attngen::define_flash_attention(
            Func(q), Func(k), Func(v), dk(), dv(), q_len(), kv_len(), group, scale(), masks,
            attngen::flash_query_block(knobs, target, kv_len(), dk(), dv(), masks.causal),
            knobs.key_block, false, products, attngen::cpu_value_tile(knobs, target),
            float_operand);
        attngen::schedule_flash_attention_cpu(a, target, requested);
        out = a.out;
        out.compile_jit(target);
    }

    // The GPU flash kernel (schedule_flash_attention_gpu, float32, fixed blocks) with `knobs`
    // resolved, as attngen_mha_forward builds it for OpenCL (for heads of at most
    // kSmallFlashHead with small_head_flash_knobs as well), compiled for the host's OpenCL device
    // (PoCL on machines without a GPU).
    explicit FlashPipeline(const attngen::GpuScheduleKnobs &knobs)
        : AttentionInputs(attngen_test::opencl_target()), products(Float(32)) {
        attngen::FlashAttentionStage a = attngen::define_flash_attention(
            Func(q), Func(k), Func(v), dk(), dv(), q_len(), kv_len(), 1, scale(), mask(),
            knobs.gpu_query_block, knobs.gpu_key_block, true);
        attngen::schedule_flash_attention_gpu(a, knobs);
        out = a.out;
        out.compile_jit(target);
    }

    void check(const AttentionCase &c) {
        SCOPED_TRACE(c.name());
        const attngen_ref::SdpaResult want = bind(c);
        Buffer<float> got(c.dv, c.q_len, c.heads, c.batch);
        try {
            out.realize(got, target);
        } catch (const Halide::RuntimeError &e) {
            FAIL() << e.what();
        }
        got.copy_to_host();
        expect_attention_near(got, want.out, c, attention_tolerance(products));
    }
};

// The attention that also returns the weights (define_attention, float32), as attngen_sdpa and
// attngen_mha_forward compute it when the caller asks for them: the CPU schedule for `target`,
// or the GPU one for OpenCL.
struct WeightsPipeline : AttentionInputs {
    Pipeline pipeline;

    WeightsPipeline(const Target &target, const attngen::CpuScheduleKnobs &knobs, int group)
        : AttentionInputs(target) {
        attngen::AttentionStage a = define(group, attngen::cpu_value_tile(knobs, target));
        attngen::schedule_attention_cpu(a, target, knobs, true);
        compile(a);
    }

    explicit WeightsPipeline(const attngen::GpuScheduleKnobs &knobs)
        : AttentionInputs(attngen_test::opencl_target()) {
        attngen::AttentionStage a = define(1, 0);
        attngen::schedule_attention_gpu(a, knobs);
        compile(a);
    }

    void check(const AttentionCase &c) {
        SCOPED_TRACE(c.name());
        const attngen_ref::SdpaResult want = bind(c);
        Buffer<float> got(c.dv, c.q_len, c.heads, c.batch);
        Buffer<float> weights(c.kv_len, c.q_len, c.heads, c.batch);
        try {
            pipeline.realize({got, weights}, target);
        } catch (const Halide::RuntimeError &e) {
            FAIL() << e.what();
        }
        got.copy_to_host();
        weights.copy_to_host();
        expect_attention_near(got, want.out, c, attention_tolerance(Float(32)));
        AttentionCase as_rows = c;  // the weights are a head's rows of kv_len "features"
        as_rows.dv = c.kv_len;
        expect_attention_near(weights, want.weights, as_rows, 2e-6);
    }

  private:
    attngen::AttentionStage define(int group, int value_tile) {
        return attngen::define_attention(Func(q), Func(k), Func(v), dk(), dv(), q_len(), kv_len(),
                                         group, scale(), mask(), value_tile);
    }

    void compile(const attngen::AttentionStage &a) {
        pipeline = Pipeline({a.out, a.probs});
        pipeline.compile_jit(target);
    }
};

// A score tile of 4 vectors (which the tuner may pick: it fits every target's registers with 2
// rows) is wider than the 16-key grain of a short head's one key block, and rounds the block up
// by more than the one vector its buffers had room for. Before the buffers took the rounding,
// 1, 17, 20 and 80 keys made the kernel fail at run time on AVX-512, 1, 48, 80 and 100 on AVX2
// ("The explicit allocation bound ... of dimension jj of block_logits is too small").
TEST(FlashAttention, ScoreTilesWiderThanTheKeyGrainFitTheBlockBuffers) {
    attngen::CpuScheduleKnobs wide_tiles;
    wide_tiles.score_vectors = 4, wide_tiles.score_rows = 2;
    std::vector<Target> targets = cpu_targets();
    const Target host = get_host_target();
    if (host.has_feature(Target::AVX512_Skylake) || host.has_feature(Target::AVX512)) {
        targets.push_back(Target("x86-64-linux-avx-avx2-fma-f16c"));  // 8-float vectors too
    }
    for (const Target &t : targets) {
        SCOPED_TRACE(t.to_string());
        ASSERT_EQ(attngen::resolve_cpu_knobs(wide_tiles, t).score_vectors, 4);
        FlashPipeline pipeline(t, wide_tiles);
        for (int kv_len : {1, 17, 20, 48, 80, 100}) {
            AttentionCase c;
            c.q_len = 7, c.kv_len = kv_len;
            pipeline.check(c);
        }
    }
}

// Attention cases for a pipeline of `group`, one per key count of `kv_lens`, the rest drawn
// around the edges of tiles: head sizes of 1 to 100, value heads of the same size or another,
// every causal mode.
std::vector<AttentionCase> drawn_attention_cases(attngen_test::KnobDraws &draw, int group,
                                                 const std::vector<int> &kv_lens) {
    std::vector<AttentionCase> cases;
    for (int kv_len : kv_lens) {
        AttentionCase c;
        c.batch = draw.pick({1, 2});
        c.group = group;
        c.heads = group * draw.pick({1, 2});
        c.q_len = draw.pick({1, 7, 10, 33, 130});
        c.kv_len = kv_len;
        c.dk = draw.pick({1, 2, 8, 16, 24, 63, 64, 100});
        c.dv = draw.pick({0, 1}) ? c.dk : draw.pick({1, 16, 40, 64, 96});
        c.causal =
            draw.pick({ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT});
        cases.push_back(c);
    }
    return cases;
}

// Knob settings drawn from the tuner's values (knob_draws.h), each compiled for the targets in
// turn, float32 and bfloat16 products, grouped heads: every one matches float64 at key counts
// of one key block and of several (and the long query blocks, where 2500 keys' heads pass
// kLongKeyValueBytes).
TEST(TunerKnobs, FlashKernelsMatchTheReference) {
    attngen_test::KnobDraws draw(1);
    attngen_test::for_each_drawn_cpu_setting(
        draw, [&](const Target &t, const attngen::CpuScheduleKnobs &knobs) {
            const int group = draw.pick({1, 1, 2, 3});
            const Type products = draw.pick({0, 1}) ? BFloat(16) : Float(32);
            SCOPED_TRACE(std::string(products == BFloat(16) ? "bfloat16" : "float32") + " group " +
                         std::to_string(group));
            FlashPipeline pipeline(t, knobs, group, products);
            for (const AttentionCase &c :
                 drawn_attention_cases(draw, group, {1, 17, 64, 100, 129, 300, 800, 2500})) {
                pipeline.check(c);
                if (HasFatalFailure()) return;
            }
        });
}

// The same for the attention that returns the weights (float32 only): its outputs and its
// weights.
TEST(TunerKnobs, WeightsKernelsMatchTheReference) {
    attngen_test::KnobDraws draw(2);
    attngen_test::for_each_drawn_cpu_setting(
        draw, [&](const Target &t, const attngen::CpuScheduleKnobs &knobs) {
            const int group = draw.pick({1, 1, 2, 3});
            SCOPED_TRACE("group " + std::to_string(group));
            WeightsPipeline pipeline(t, knobs, group);
            for (const AttentionCase &c :
                 drawn_attention_cases(draw, group, {1, 17, 20, 64, 100, 129, 300})) {
                pipeline.check(c);
                if (HasFatalFailure()) return;
            }
        });
}

// GPU knob settings drawn from the tuner's values (knob_draws.h): every one's flash kernel, or
// the one the generators build with its small-head knobs for heads that fit them, matches
// float64 through OpenCL.
TEST(TunerKnobs, GpuFlashKernelsMatchTheReference) {
    if (!attngen_test::has_opencl_device()) GTEST_SKIP() << "no OpenCL device";
    attngen_test::KnobDraws draw(5);
    attngen_test::for_each_drawn_gpu_setting(draw, [&](const attngen::GpuScheduleKnobs &knobs) {
        const bool small_heads = draw.pick({0, 1});
        SCOPED_TRACE(small_heads ? "its small-head knobs" : "its own knobs");
        FlashPipeline pipeline(small_heads ? attngen::small_head_flash_knobs(knobs) : knobs);
        const int widest = small_heads ? attngen::kSmallFlashHead : 128;
        for (const AttentionCase &c : drawn_attention_cases(draw, 1, {1, 17, 64, 129, 300})) {
            AttentionCase fitted = c;
            fitted.dk = std::min(c.dk, widest), fitted.dv = std::min(c.dv, widest);
            pipeline.check(fitted);
            if (HasFatalFailure()) return;
        }
    });
}

// The same for the GPU attention that returns the weights: its outputs and its weights.
TEST(TunerKnobs, GpuWeightsKernelsMatchTheReference) {
    if (!attngen_test::has_opencl_device()) GTEST_SKIP() << "no OpenCL device";
    attngen_test::KnobDraws draw(6);
    attngen_test::for_each_drawn_gpu_setting(draw, [&](const attngen::GpuScheduleKnobs &knobs) {
        WeightsPipeline pipeline(knobs);
        for (const AttentionCase &c : drawn_attention_cases(draw, 1, {1, 17, 64, 129, 300})) {
            pipeline.check(c);
            if (HasFatalFailure()) return;
        }
    });
}

// ---------------------------------------------------------------------------------------------
// merge_heads: the output projection's operand, row n = l + b * len of every head, whether each
// row's place is divided where it is read or read from the table (CPU kernels). The lengths are
// run-time parameters, as in the kernels, so that Halide divides by a value it does not know.

TEST(MergeHeads, EveryRowReadsItsItemAndPositionInBothForms) {
    const int head_dim = 3, heads = 2;
    Var d("d"), l("l"), h("h"), b("b");
    Func out("out");
    // Distinct per (d, l, h, b) and exact in float32.
    out(d, l, h, b) = cast<float>(d + 10 * l + 1000 * h + 10000 * b);
    for (bool table : {false, true}) {
        for (int len : {1, 7, 16}) {
            for (int batch : {1, 3}) {
                SCOPED_TRACE(std::string(table ? "table" : "divided") + " len " +
                             std::to_string(len) + " batch " + std::to_string(batch));
                Param<int> len_param("len"), batch_param("batch");
                len_param.set(len);
                batch_param.set(batch);
                attngen::MergedHeads m = attngen::merge_heads(out, len_param, batch_param, table);
                ASSERT_EQ(m.places.defined(), table);
                if (table) m.places.compute_root();
                Buffer<float> merged = m.merged.realize({head_dim, heads, len * batch});
                for (int n = 0; n < len * batch; ++n) {
                    for (int g = 0; g < heads; ++g) {
                        for (int k = 0; k < head_dim; ++k) {
                            const float want =
                                float(k + 10 * (n % len) + 1000 * g + 10000 * (n / len));
                            ASSERT_EQ(merged(k, g, n), want) << "row " << n << " head " << g;
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// define_rope_angles and apply_rope: the formula of DESIGN.md at positions far past 2^16.

TEST(Rope, MatchesTheFormulaAtLargePositions) {
    const int head_dim = 16, len = 6;
    for (attngen_rope mode : {ATTNGEN_ROPE_HALF, ATTNGEN_ROPE_INTERLEAVED}) {
        for (int rotary_dim : {16, 10}) {
            for (long long first : {0LL, 65531LL, 1000003LL, 50000017LL}) {
                SCOPED_TRACE("mode " + std::to_string(int(mode)) + " rotary_dim " +
                             std::to_string(rotary_dim) + " first position " +
                             std::to_string(first));
                const double theta = 10000.0;
                Buffer<float> x(head_dim, len, 1, 1);
                std::vector<double> want(size_t(head_dim) * len);
                for (int l = 0; l < len; ++l)
                    for (int d = 0; d < head_dim; ++d)
                        want[size_t(l) * head_dim + d] = x(d, l, 0, 0) =
                            float((l * 7 + d * 3) % 11 - 5) / 4;
                attngen_ref::rope(want, 1, 1, len, head_dim, mode, rotary_dim, theta, {first});
                Buffer<double> inv_freq(rotary_dim / 2);
                for (int k = 0; k < rotary_dim / 2; ++k)
                    inv_freq(k) = std::pow(theta, -2.0 * k / rotary_dim);
                Var l("l"), b("b");
                Func position("position");
                position(l, b) = cast<int32_t>(int32_t(first)) + l;
                const attngen::RopeInputs rope{Expr(int(mode)), Expr(rotary_dim), Func(inv_freq)};
                const attngen::RopeAngles angles =
                    attngen::define_rope_angles("angles", rope, position);
                Func rotated = attngen::apply_rope("rotated", Func(x), rope, angles);
                Buffer<float> got = rotated.realize({head_dim, len, 1, 1});
                for (int ll = 0; ll < len; ++ll) {
                    for (int d = 0; d < head_dim; ++d) {
                        // |x| <= 1.25: float rounding of the products and the sum, and the
                        // float cos and sin of an angle reduced in double.
                        ASSERT_NEAR(got(d, ll, 0, 0), want[size_t(ll) * head_dim + d], 1e-6)
                            << "d " << d << " l " << ll;
                    }
                }
            }
        }
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The 16-bit formats in integer arithmetic (some GPU kernels take their weights as bits): every
// pattern decodes to the value the runtime's own conversion gives, and operands round exactly
// as Halide's casts (the CPU kernels') round them.

namespace attngen_half_test {

// Runs f(x) -> float over the inputs on the host, JIT.
std::vector<float> realize_over(const std::vector<float> &inputs,
                                const std::function<Expr(const Expr &)> &f) {
    Buffer<float> in(int(inputs.size()));
    std::memcpy(in.data(), inputs.data(), inputs.size() * sizeof(float));
    Var i("i");
    Func g("g");
    g(i) = f(in(i));
    g.vectorize(i, 8);
    Buffer<float> out = g.realize({int(inputs.size())});
    return std::vector<float>(out.data(), out.data() + inputs.size());
}

bool same_float(float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || to_bits(a) == to_bits(b);
}

}  // namespace attngen_half_test

TEST(HalfBits, EveryPatternDecodesToTheFormatsValue) {
    Buffer<uint16_t> bits(65536);
    for (int k = 0; k < 65536; ++k) bits(k) = uint16_t(k);
    // Float16 twice: in integer arithmetic, and by instruction as CUDA kernels convert it.
    for (const auto &[t, by_instruction] :
         {std::pair{BFloat(16), false}, std::pair{Float(16), false}, std::pair{Float(16), true}}) {
        SCOPED_TRACE(t == Float(16) ? (by_instruction ? "float16 by instruction" : "float16")
                                    : "bfloat16");
        Var i("i");
        Func decoded("decoded");
        decoded(i) = attngen::storage_bits_as_float(bits(i), t, by_instruction);
        Buffer<float> got = decoded.realize({65536});
        for (int k = 0; k < 65536; ++k) {
            const float want = t == Float(16) ? attngen::rt::from_float16(uint16_t(k))
                                              : attngen::rt::from_bfloat16(uint16_t(k));
            ASSERT_TRUE(attngen_half_test::same_float(got(k), want))
                << "bits 0x" << std::hex << k << ": " << got(k) << " against " << want;
        }
    }
}

// Every 62465th float by bit pattern (about 69000, every exponent of both signs), and the
// edges: float16's range (65504, the last value below the rounding boundary at 65520, and
// beyond), its subnormals and their ties, bfloat16's overflow to infinity, infinities and NaN.
std::vector<float> rounding_edge_inputs() {
    std::vector<float> inputs;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 61 * 1024 + 1)
        inputs.push_back(from_bits(uint32_t(u)));
    for (float x :
         {65504.0f, 65519.996f, 65520.0f, 1e30f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
          std::ldexp(3.0f, -25), std::ldexp(1.0f, -14), std::ldexp(1023.5f, -24),
          std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN(), 0.0f, 1.0f + std::ldexp(1.0f, -8),
          1.0f + std::ldexp(3.0f, -8), 1.0f + std::ldexp(1.0f, -11)}) {
        inputs.push_back(x);
        inputs.push_back(-x);
    }
    return inputs;
}

TEST(HalfBits, OperandsRoundAsHalidesCastsRound) {
    const std::vector<float> inputs = rounding_edge_inputs();
    for (const Type &t : {BFloat(16), Float(16)}) {
        SCOPED_TRACE(t == Float(16) ? "float16" : "bfloat16");
        const std::vector<float> by_cast = attngen_half_test::realize_over(
            inputs, [&](const Expr &x) { return attngen::round_operand(x, t); });
        const std::vector<float> by_bits = attngen_half_test::realize_over(
            inputs, [&](const Expr &x) { return attngen::round_operand_bits(x, t); });
        for (size_t k = 0; k < inputs.size(); ++k) {
            if (std::isnan(inputs[k])) {
                // Halide 21's emulated bfloat16 cast rounds a NaN whose payload lies in the
                // dropped bits alone to infinity (0x7f8049c5 gave inf); a NaN stays NaN here.
                ASSERT_TRUE(std::isnan(by_bits[k])) << "bits 0x" << std::hex << to_bits(inputs[k]);
                continue;
            }
            ASSERT_TRUE(attngen_half_test::same_float(by_bits[k], by_cast[k]))
                << "x = " << inputs[k] << " (bits 0x" << std::hex << to_bits(inputs[k])
                << "): " << by_bits[k] << " against " << by_cast[k];
        }
    }
}

// What a GPU kernel stores in a KV cache of a 16-bit format: the bits Halide's cast (the CPU
// kernels' store) gives, float16's overflow to infinity included.
TEST(HalfBits, StoredBitsAreTheBitsOfHalidesCasts) {
    const std::vector<float> inputs = rounding_edge_inputs();
    Buffer<float> in(int(inputs.size()));
    std::memcpy(in.data(), inputs.data(), inputs.size() * sizeof(float));
    // Float16 by instruction is Halide's cast itself, reinterpreted: here only that its bits
    // survive the reinterpretation and the vectorized loop; the CUDA suite's decoding tests
    // check the hardware's cvt.
    for (const auto &[t, by_instruction] :
         {std::pair{BFloat(16), false}, std::pair{Float(16), false}, std::pair{Float(16), true}}) {
        SCOPED_TRACE(t == Float(16) ? (by_instruction ? "float16 by instruction" : "float16")
                                    : "bfloat16");
        Var i("i");
        Func by_cast("by_cast"), by_bits("by_bits");
        by_cast(i) = reinterpret<uint16_t>(cast(t, in(i)));
        by_bits(i) = attngen::float_to_storage_bits(in(i), t, by_instruction);
        by_bits.vectorize(i, 8);
        Buffer<uint16_t> want = by_cast.realize({in.width()});
        Buffer<uint16_t> got = by_bits.realize({in.width()});
        for (int k = 0; k < in.width(); ++k) {
            if (std::isnan(inputs[k])) {
                // As above: Halide's bfloat16 cast may turn such a NaN into infinity.
                const float decoded = t == Float(16) ? attngen::rt::from_float16(got(k))
                                                     : attngen::rt::from_bfloat16(got(k));
                ASSERT_TRUE(std::isnan(decoded)) << "bits 0x" << std::hex << to_bits(inputs[k]);
                continue;
            }
            ASSERT_EQ(got(k), want(k))
                << "x = " << inputs[k] << " (bits 0x" << std::hex << to_bits(inputs[k]) << ")";
        }
    }
}

// round_probability: for probabilities (finite, in [0, 1]) bfloat16 rounds to nearest with ties
// down, in both of its forms; everywhere but at the ties that is the even rounding of the
// other conversions. Every 1025th float of [0, 1] by bit pattern, the ties of every binade, and
// the values just either side of them.
TEST(HalfBits, ProbabilitiesRoundToNearestWithTiesDown) {
    std::vector<uint32_t> patterns;
    for (uint32_t u = 0; u <= to_bits(1.0f); u += 1025) patterns.push_back(u);
    for (uint32_t exponent = 1; exponent < 127; ++exponent) {
        for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x18000u}) {
            patterns.push_back((exponent << 23) | low);
        }
    }
    patterns.push_back(to_bits(1.0f));
    Buffer<float> in(int(patterns.size()));
    for (size_t k = 0; k < patterns.size(); ++k) in(int(k)) = from_bits(patterns[k]);
    Var i("i");
    Func as_float("as_float"), as_bits("as_bits");
    as_float(i) = attngen::round_probability(in(i), BFloat(16), true);
    as_bits(i) = reinterpret<uint16_t>(attngen::round_probability(in(i), BFloat(16), false));
    as_float.vectorize(i, 16);
    as_bits.vectorize(i, 16);
    const Buffer<float> got_float = as_float.realize({in.width()});
    const Buffer<uint16_t> got_bits = as_bits.realize({in.width()});
    int ties = 0;
    for (size_t k = 0; k < patterns.size(); ++k) {
        const uint32_t u = patterns[k];
        const bool tie = (u & 0xffffu) == 0x8000u;
        ties += tie;
        const uint32_t even = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        const uint32_t want = tie ? (u & 0xffff0000u) : even;
        ASSERT_EQ(to_bits(got_float(int(k))), want) << "bits 0x" << std::hex << u;
        ASSERT_EQ(uint32_t(got_bits(int(k))) << 16, want) << "bits 0x" << std::hex << u;
    }
    EXPECT_GE(ties, 126);
}
