// The attngen generators: the fused MHA forward, scaled dot-product attention on projected
// heads, and the projection on its own. Each composes the stages of stages.h and applies the
// schedule of its target family; with an autoscheduler it only sets estimates.
#include <array>
#include <map>
#include <string>

#include "Halide.h"
#include "layout.h"
#include "schedule_cpu.h"
#include "schedule_gpu.h"
#include "schedule_knobs.h"
#include "stages.h"

namespace attngen {
namespace {

using namespace Halide;

// Estimates describe BERT-base (d_model 768, 12 heads of 64, 128 tokens): the autoschedulers
// plan for it, and it is a shape where both projections and attention matter.
constexpr int kEstBatch = 1, kEstLen = 128, kEstModel = 768, kEstHeads = 12, kEstHeadDim = 64;

// Rows (a head of one query) per parallel task where a cached forward copies the flash
// kernel's result for its output projection: 32 KiB per task at 128-wide heads.
constexpr int kCopyRowsPerTask = 64;

// The type a handle stores its weights and KV cache in (attngen_precision); the generators that
// read them take it as their `precision` GeneratorParam.
enum class Precision { F32, BF16, F16 };
const std::map<std::string, Precision> kPrecisionNames = {
    {"f32", Precision::F32}, {"bf16", Precision::BF16}, {"f16", Precision::F16}};

Type storage_type(Precision p) {
    switch (p) {
        case Precision::BF16:
            return BFloat(16);
        case Precision::F16:
            return Float(16);
        case Precision::F32:
            break;
    }
    return Float(32);
}

// The operands' type of attention's two products on a CPU's flash kernel: bfloat16 handles
// multiply in bfloat16 (attngen_precision), float16 ones in float32, since x86 has no float16
// dot product.
Type attention_products(Precision p) {
    return p == Precision::BF16 ? BFloat(16) : Float(32);
}

// The type of a precision's weight buffers on `target`: on GPU targets the 16-bit formats come
// as their bits, uint16, but for float16 on CUDA (layout.h, half_weights_as_bits).
Type weight_buffer_type(Precision p, const Target &target) {
    const Type t = storage_type(p);
    const bool as_bits =
        t.bits() == 16 && half_weights_as_bits(t == BFloat(16), target.has_gpu_feature(),
                                               target.has_feature(Target::CUDA));
    return as_bits ? UInt(16) : t;
}

// The type of a KV cache's buffers, and of the rows stored into it, on `target`: on GPU targets
// the 16-bit formats as their bits (layout.h, half_cache_as_bits).
Type cache_buffer_type(Precision p, const Target &target) {
    const Type t = storage_type(p);
    return t.bits() == 16 && half_cache_as_bits(target.has_gpu_feature()) ? UInt(16) : t;
}

// A float32 value as a KV cache of precision `p` on `target` stores it. Where the cache holds a
// 16-bit format as bits, the rounding is integer arithmetic, with the same results
// (tests/stages: HalfBits), but for float16 on CUDA, the hardware's (layout.h,
// float16_bits_by_instruction).
Expr to_cache_element(const Expr &x, Precision p, const Target &target) {
    const Type stored = storage_type(p);
    if (cache_buffer_type(p, target) == UInt(16)) {
        return float_to_storage_bits(x, stored,
                                     float16_bits_by_instruction(target.has_feature(Target::CUDA)));
    }
    return cast(stored, x);
}

// A KV cache's element, as to_cache_element stored it, widened to float32.
Expr from_cache_element(const Expr &element, Precision p, const Target &target) {
    if (cache_buffer_type(p, target) == UInt(16)) {
        return storage_bits_as_float(element, storage_type(p),
                                     float16_bits_by_instruction(target.has_feature(Target::CUDA)));
    }
    return cast<float>(element);
}

// Schedule knobs shared by every generator: a GeneratorParam per knob of schedule_knobs.h,
// 0 (derived from the target) to its max, so a build (PARAMS) or the autotuner can set it.
template <typename T>
class AttngenGenerator : public Generator<T> {
  public:
#define ATTNGEN_KNOB_PARAM(name, max, values, what) GeneratorParam<int> name{#name, 0, 0, max};
    ATTNGEN_SCHEDULE_KNOBS(ATTNGEN_KNOB_PARAM)
#undef ATTNGEN_KNOB_PARAM

  protected:
#define ATTNGEN_KNOB_COPY(name, max, values, what) k.name = name;
    CpuScheduleKnobs cpu_knobs() const {
        CpuScheduleKnobs k;
        ATTNGEN_CPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_COPY)
        return k;
    }

    GpuScheduleKnobs gpu_knobs() const {
        GpuScheduleKnobs k;
        ATTNGEN_GPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_COPY)
        return k;
    }
#undef ATTNGEN_KNOB_COPY

    // An input as the algorithm reads it. attngen's own schedules compute exactly the regions
    // whose reads stay inside the inputs (or clamp them); an autoscheduler's tiles may reach
    // past the edges, so with one every input is read through repeat_edge, which changes
    // nothing inside the bounds.
    template <typename InputBuffer>
    Func bounded(const InputBuffer &input) const {
        if (this->using_autoscheduler()) return BoundaryConditions::repeat_edge(input);
        return Func(input);
    }

    // Whether the weights are bfloat16 pairs (layout.h, weights_in_pairs).
    bool weights_in_pairs() const {
        return attngen::weights_in_pairs(
            storage_type(static_cast<const T *>(this)->precision) == BFloat(16),
            this->get_target().has_gpu_feature());
    }

    // Packed projection weights as the algorithm reads them: the 3-D buffer (pair element,
    // output in panel, row + rows * panel) of layout.h, seen as (stored column, stored row).
    // Its strides are fixed to the packing's, so that a panel row is one dense vector and a
    // GPU projection's 4 weights of one input feature one 16-byte load (schedule_projection_gpu,
    // which Halide emits only where it can prove the alignment: packed weights start a device
    // allocation). But AMX tile products find a weight tile's 16 rows of 64 bytes only where
    // the rows' stride is not a constant as wide as a row (a dense KiB was loaded as one vector
    // and shuffled): weights that `amx` reads (AmxPath) keep that stride free.
    template <typename InputBuffer>
    Func packed_weights(InputBuffer &w, const Expr &in_features, const AmxPath &amx = {}) {
        const bool pairs = weights_in_pairs();
        if (!this->using_autoscheduler()) {
            w.dim(1).set_stride(pairs ? kWeightPairs : 1);
            if (!amx.stored.defined()) w.dim(2).set_stride(weight_panel_columns(pairs));
            if (this->get_target().has_gpu_feature()) {
                w.set_host_alignment(16);
                w.dim(0).set_min(0);
            }
        }
        return weight_panel_view(bounded(w), stored_weight_rows(in_features, pairs), pairs);
    }

    // Autoscheduler estimates of a packed weight of in x out features (its 3-D buffer above).
    template <typename InputBuffer>
    void set_weight_estimates(InputBuffer &w, int in, int out) const {
        const bool pairs = weights_in_pairs();
        const int elements = pairs ? kWeightPairs : 1, outputs = weight_panel_outputs(pairs);
        const int rows = stored_weight_rows(in, pairs);
        w.set_estimates(
            {{0, elements}, {0, outputs}, {0, rows * round_up(out, kWeightPadding) / outputs}});
    }

    // GPU projections of a few rows (decoding) get a second algorithm, a schedule of their own
    // (schedule_gpu.h); CPU projections, and every projection an autoscheduler plans, one.
    FewRowsPath few_rows_path() const {
        if (!this->get_target().has_gpu_feature() || this->using_autoscheduler()) return {};
        return gpu_few_rows_path(gpu_knobs());
    }

    // GPU projections of many outputs get a third, whose operands a block stages in shared
    // memory (schedule_gpu.h).
    StagedPath staged_path() const {
        if (!this->get_target().has_gpu_feature() || this->using_autoscheduler()) return {};
        return gpu_staged_path();
    }

    // Bfloat16 projection operands as float32 on CPUs without a bfloat16 dot product
    // (define_projection's float_operand). AVX2 variant, mha_forward_bf16/bert-512, Zen 4: each
    // row of the register tile took 4 instructions (a 16-bit load, shift, move and broadcast)
    // for its 2 FMAs per feature, where a float32 operand takes one broadcast load; the forward
    // 1.15-1.17x at bert-128, bert-512 and gpt2-causal. Autoschedulers' plans get it too: it
    // changes no value.
    bool float_operand() const {
        const Target t = this->get_target();
        return storage_type(static_cast<const T *>(this)->precision) == BFloat(16) &&
               !t.has_gpu_feature() && !has_bfloat16_dot_product(t);
    }

    // Bfloat16 projections on CPUs with AMX take its tile products, as their one algorithm
    // (AmxPath): then with the bfloat16 operand, and no direct path. On an Intel Xeon with AMX
    // (2 threads), 1.3-1.8 TFLOP/s stand-alone at bert's sizes, 0.6 at 4096 input features,
    // against a float32 FMA peak of 393 GFLOP/s (bench/RESULTS.md).
    // Decoding's kernels take it for calls of at least kAmxMinRows rows, a whole tile (a
    // prompt, not a step), as another path (AmxPath::min_rows).
    static constexpr int kAmxMinRows = kAmxTile;
    template <typename InputBuffer>
    AmxPath amx_path(const InputBuffer &w, const Expr &in_features, int min_rows = 0) const {
        const Target t = this->get_target();
        if (storage_type(static_cast<const T *>(this)->precision) != BFloat(16) ||
            t.has_gpu_feature() || this->using_autoscheduler() || !uses_amx(t)) {
            return {};
        }
        return {bounded(w), stored_weight_rows(in_features, weights_in_pairs()), min_rows};
    }

    // CPU projections of many rows over few enough input features get a copy of their
    // reduction kept in registers per row tile (schedule_cpu.h), where the target's register
    // tile spans a weight panel.
    DirectPath direct_path() const {
        if (this->get_target().has_gpu_feature() || this->using_autoscheduler()) return {};
        return cpu_direct_path(this->get_target(), cpu_knobs());
    }

    // The attention output (c, i, h, b). Without a weights output, attngen's CPU and GPU
    // schedules use the flash algorithm (no q_len x kv_len buffer, masked key blocks skipped);
    // the weights and the autoschedulers use the one that materializes the probabilities.
    // Query head h reads key/value head h / group. The CPU flash kernel multiplies q . k and
    // probs x values in `products` (PackedScore); the others in float32.
    // q and k rotated by rotary() (inline on CPU targets) come with `unrotated`, true at run
    // time when they are the projected heads as they are. The CPU flash kernel stores its
    // output as flash_out_type (define_flash_attention's out_type); the others in float32.
    // amx_heads (the key/value heads and the batch) lets CPUs with AMX multiply in its tiles.
    Func attention(const Func &q, const Func &k, const Func &v, const Expr &dk, const Expr &dv,
                   const Expr &q_len, const Expr &kv_len, const Expr &group, const Expr &scale,
                   const MaskInputs &mask, Func *weights, const Type &products = Float(32),
                   const Expr &unrotated = Expr(), const AmxHeads &amx_heads = {},
                   const Type &flash_out_type = Float(32)) {
        const Target t = this->get_target();
        if (weights == nullptr && t.has_gpu_feature() && !this->using_autoscheduler()) {
            const auto flash = [&](const GpuScheduleKnobs &blocks) {
                FlashAttentionStage a =
                    define_flash_attention(q, k, v, dk, dv, q_len, kv_len, group, scale, mask,
                                           blocks.gpu_query_block, blocks.gpu_key_block, true);
                schedule_flash_attention_gpu(a, blocks);
                return a.out;
            };
            const GpuScheduleKnobs knobs = resolve_gpu_knobs(gpu_knobs());
            const GpuScheduleKnobs small = small_head_flash_knobs(knobs);
            if (small.gpu_key_block == knobs.gpu_key_block &&
                small.gpu_value_tile == knobs.gpu_value_tile) {
                return flash(knobs);
            }
            // Two kernels, one of which a call runs (the other is skipped at run time, Halide's
            // skip_stages), and a copy that picks its result: 4.7 us against the flash kernel's
            // 215 us at bert-512 on an H200 (ncu). Halide still allocates device memory for the
            // skipped kernel's output, which stays unwritten.
            const Expr small_heads = dk <= kSmallFlashHead && dv <= kSmallFlashHead;
            const Func small_out = flash(small), out = flash(knobs);
            Var c("c"), i("i"), h("h"), b("b");
            Func chosen("flash_by_head_size");
            chosen(c, i, h, b) = select(small_heads, small_out(c, i, h, b), out(c, i, h, b));
            schedule_elementwise_gpu(chosen);
            return chosen;
        }
        if (weights == nullptr && !this->using_autoscheduler()) {
            const CpuScheduleKnobs knobs = resolve_cpu_knobs(cpu_knobs(), t);
            const Expr query_block = flash_query_block(knobs, t, kv_len, dk, dv, mask.causal);
            // Bfloat16 products on CPUs without a bfloat16 dot product: the float32 kernel over
            // operands rounded to bfloat16 (PackedScore::rounded). The pairs' 16-bit operands
            // took a widening per key or value vector and a load, shift and broadcast per row,
            // on the ports of the FMAs. mha_forward_bf16, AVX-512 variant, Intel Xeon (model
            // 207), 2 threads, scripts/ab_runs.py against the pairs: long-single 1.24x (4
            // rounds), bert-128 and bert-512 1.12x, gpt2-causal 1.03x (3 rounds); AVX2
            // variant, same host, 3 rounds: long-single 1.74x, bert-512 1.24x, gpt2-causal 1.10x.
            // On CPUs with AMX, bfloat16 products in its tiles where the caller says how many
            // key/value heads there are (AmxAttention).
            const bool amx = products == BFloat(16) && uses_amx(t) && amx_heads.kv_heads.defined();
            FlashAttentionStage a = define_flash_attention(
                q, k, v, dk, dv, q_len, kv_len, group, scale, mask, query_block, knobs.key_block,
                false, products, cpu_value_tile(knobs, t), !amx && !has_bfloat16_dot_product(t),
                amx ? amx_heads : AmxHeads{}, unrotated, flash_out_type);
            schedule_flash_attention_cpu(a, t, knobs);
            return a.out;
        }
        const bool cpu_schedule = !t.has_gpu_feature() && !this->using_autoscheduler();
        // A bfloat16 handle's scores and values multiply its heads rounded to bfloat16 on every
        // target, as its flash kernel does: in pairs where vdpbf16ps takes them, elsewhere as
        // float32 products of the rounded values (stored so by a CPU's projections, rounded
        // here on a GPU). The probabilities, being the weights output, stay float32. In pairs,
        // the keys' transposing copy moves 32-bit words of two features (k_pairs), half the
        // elements of float32 keys: attngen_parallel_timeline tutorial bf16, Zen 4, two
        // alternations, 102-120 -> 72-82 us, the scores' loop level (its halved products
        // offset by the queries' pairs); scripts/paired_ab.py --bf16, 16 pairs in 2 sessions,
        // old/new: tutorial 1.023x (14 of 16), tutorial-cross 1.008x (13 of 16), bert-128
        // (no weights output) 1.001x; the AVX-512 and AVX2 variants (float32 products of
        // bfloat16 heads), 10 pairs: tutorial 1.015x and 1.008x, tutorial-cross 0.995x and
        // 1.006x.
        const bool paired_scores =
            cpu_schedule && products == BFloat(16) && has_bfloat16_dot_product(t);
        const auto operand = [&](const Func &heads) {
            if (paired_scores || (products == Float(32) && heads.type() == Float(32))) {
                return heads;
            }
            const std::vector<Var> args = heads.args();
            Func rounded(heads.name() + "_operand");
            // On a GPU in integer arithmetic: its kernels hold no 16-bit float type.
            const Expr x = heads(args);
            rounded(args) = heads.type() != Float(32) ? cast<float>(x)
                            : t.has_gpu_feature()     ? round_operand_bits(x, products)
                                                      : round_operand(x, products);
            return rounded;
        };
        AttentionStage a =
            define_attention(operand(q), operand(k), operand(v), dk, dv, q_len, kv_len, group,
                             scale, mask, cpu_schedule ? cpu_value_tile(cpu_knobs(), t) : 0,
                             paired_scores ? products : Float(32));
        if (weights != nullptr) *weights = a.probs;
        if (this->using_autoscheduler()) return a.out;
        if (t.has_gpu_feature()) {
            schedule_attention_gpu(a, gpu_knobs());  // with weights: flash ran above otherwise
        } else {
            a.packed.sources_unrotated = unrotated;
            schedule_attention_cpu(a, t, cpu_knobs(), weights != nullptr);
        }
        return a.out;
    }

    // heads(d, l, h, b) rotated at position(l, b), the angle table scheduled for the target.
    // On CPU targets the rotated heads are left inline, computed by the stage that reads them:
    // the attention stages that pack the queries and keys (see attention()), the decode
    // kernel's query rows, the rows appended to a cache. At root without rotary positions they
    // were a copy of the projections, 10% of the samples of a bfloat16 forward at bert-512-b8
    // (perf), and in a decoding step a parallel loop of their own.
    Func rotary(const std::string &name, const Func &heads, const RopeInputs &rope,
                const Func &position) {
        const RopeAngles angles = define_rope_angles(name + "_angles", rope, position);
        if (!this->using_autoscheduler()) {
            const Target t = this->get_target();
            for (Func f : {angles.cos, angles.sin}) {
                if (t.has_gpu_feature()) {
                    schedule_rope_angles_gpu(f, rope);
                } else {
                    schedule_rope_angles_cpu(f, t, rope);
                }
            }
        }
        Func rotated = apply_rope(name, heads, rope, angles);
        if (!this->using_autoscheduler() && this->get_target().has_gpu_feature()) {
            schedule_rotated_heads_gpu(rotated);
        }
        return rotated;
    }

    // attngen_linear runs on the CPU only: the C API has no GPU entry point for it.
    void require_cpu_target() const {
        const Target t = this->get_target();
        if (t.has_gpu_feature()) {
            throw CompileError("this generator has no GPU schedule; target: " + t.to_string());
        }
    }
};

// A mask input read with its outer dimensions (rows, heads, items; not keys) broadcast where
// their extent is 1: the runtime passes an absent mask as one neutral row, and a mask given for
// one item or head as it lies in memory. (As buffers of the full logical shape with stride 0,
// Halide refused every call of more than 2^31 - 1 logits, whatever the mask, because it checks
// the product of a buffer's extents.) The clamp is per row, outside the loops over keys.
template <typename InputBuffer>
Func broadcast_outer(const Func &input, const InputBuffer &buffer) {
    std::vector<Var> args = input.args();
    std::vector<Expr> at(args.begin(), args.end());
    for (size_t d = 1; d < at.size(); ++d) {
        at[d] = min(args[d], buffer.dim(int(d)).max());
    }
    Func broadcast(input.name() + "_broadcast");
    broadcast(args) = input(at);
    return broadcast;
}

// Mask inputs appear in the same order in every generator that takes them.
#define ATTNGEN_MASK_INPUTS                                                        \
    Input<int> causal{"causal", 0, 0, 2};                                          \
    Input<Buffer<int32_t, 1>> kv_lengths{"kv_lengths"};                            \
    Input<bool> has_bool_mask{"has_bool_mask", false};                             \
    Input<Buffer<uint8_t, 3>> bool_mask{"bool_mask"};                              \
    Input<bool> has_additive{"has_additive", false};                               \
    Input<Buffer<float, 4>> additive{"additive"};                                  \
    MaskInputs mask_inputs() const {                                               \
        MaskInputs m;                                                              \
        m.kv_lengths = this->bounded(kv_lengths);                                  \
        m.bool_mask = broadcast_outer(this->bounded(bool_mask), bool_mask);        \
        m.additive = broadcast_outer(this->bounded(additive), additive);           \
        m.causal = causal;                                                         \
        m.has_bool_mask = has_bool_mask;                                           \
        m.has_additive = has_additive;                                             \
        return m;                                                                  \
    }                                                                              \
    void set_mask_estimates(int batch, int heads, int q_len, int kv_len) {         \
        causal.set_estimate(0);                                                    \
        has_bool_mask.set_estimate(true);                                          \
        has_additive.set_estimate(true);                                           \
        kv_lengths.set_estimates({{0, batch}});                                    \
        bool_mask.set_estimates({{0, kv_len}, {0, q_len}, {0, batch}});            \
        additive.set_estimates({{0, kv_len}, {0, q_len}, {0, heads}, {0, batch}}); \
    }

class SdpaGenerator : public AttngenGenerator<SdpaGenerator> {
  public:
    GeneratorParam<bool> weights_output{"weights_output", false};

    Input<Buffer<float, 4>> q{"q"};  // (dk, q_len, heads, batch)
    Input<Buffer<float, 4>> k{"k"};  // (dk, kv_len, kv_heads, batch), kv_heads dividing heads
    Input<Buffer<float, 4>> v{"v"};  // (dv, kv_len, kv_heads, batch)
    Input<float> scale{"scale", 1.0f};
    ATTNGEN_MASK_INPUTS
    Output<Buffer<float, 4>> output{"output"};    // (dv, q_len, heads, batch)
    Output<Buffer<float, 4>> *weights = nullptr;  // (kv_len, q_len, heads, batch)

    void configure() {
        if (weights_output) weights = add_output<Buffer<float, 4>>("weights");
    }

    void generate() {
        Func probs;
        const Expr group = q.dim(2).extent() / k.dim(2).extent();
        output = attention(bounded(q), bounded(k), bounded(v), q.dim(0).extent(), v.dim(0).extent(),
                           q.dim(1).extent(), k.dim(1).extent(), group, scale, mask_inputs(),
                           weights ? &probs : nullptr);
        if (weights) *weights = probs;

        q.set_estimates({{0, kEstHeadDim}, {0, kEstLen}, {0, kEstHeads}, {0, kEstBatch}});
        k.set_estimates({{0, kEstHeadDim}, {0, kEstLen}, {0, kEstHeads}, {0, kEstBatch}});
        v.set_estimates({{0, kEstHeadDim}, {0, kEstLen}, {0, kEstHeads}, {0, kEstBatch}});
        scale.set_estimate(0.125f);
        set_mask_estimates(kEstBatch, kEstHeads, kEstLen, kEstLen);
        output.set_estimates({{0, kEstHeadDim}, {0, kEstLen}, {0, kEstHeads}, {0, kEstBatch}});
        if (weights) {
            weights->set_estimates({{0, kEstLen}, {0, kEstLen}, {0, kEstHeads}, {0, kEstBatch}});
        }
    }
};

class MhaForwardGenerator : public AttngenGenerator<MhaForwardGenerator> {
  public:
    GeneratorParam<bool> weights_output{"weights_output", false};
    // Sizes a build may fix (attngen_add_library's HEAD_DIM, NUM_HEADS, CAUSAL); 0, or -1 for
    // causal, leaves them to run time. A fixed size is a constant in the algorithm, so loops
    // over it have constant extents; its Input keeps its place in the signature and a call
    // that passes another value fails with a message.
    GeneratorParam<int> fixed_num_heads{"fixed_num_heads", 0, 0, kMaxPerHead};
    GeneratorParam<int> fixed_head_dim{"fixed_head_dim", 0, 0, kMaxPerHead};
    GeneratorParam<int> fixed_causal{"fixed_causal", -1, -1, 2};
    GeneratorParam<Precision> precision{"precision", Precision::F32, kPrecisionNames};

    Input<Buffer<float, 3>> query{"query"};  // (d_model, q_len, batch)
    Input<Buffer<float, 3>> key{"key"};      // (kdim, kv_len, batch)
    Input<Buffer<float, 3>> value{"value"};  // (vdim, kv_len, batch)
    // The key is the query's tensor, the value the key's: one pointer and one shape (set by
    // runtime/fused_forward_call.h). A tensor that several projections take is then rounded
    // to 16-bit weights' type once (InputOperands). Ignored where the shapes differ, by float32
    // kernels and by GPU kernels.
    Input<bool> key_is_query{"key_is_query", false};
    Input<bool> value_is_key{"value_is_key", false};
    // Projection weights transposed, padded and packed in panels (layout.h): wq_t of padded
    // H*hd outputs over d_model inputs, wk_t padded Hkv*hd over kdim, wv_t padded Hkv*vhd over
    // vdim, wo_t padded d_model over H*vhd, of the precision's type.
    Input<Buffer<void, 3>> wq_t{"wq_t"}, wk_t{"wk_t"}, wv_t{"wv_t"};
    Input<Buffer<void, 3>> wo_t{"wo_t"};
    Input<Buffer<float, 1>> bq{"bq"}, bk{"bk"}, bv{"bv"}, bo{"bo"};
    Input<int> num_heads{"num_heads", 1, 1, kMaxPerHead};
    Input<int> head_dim{"head_dim", 64, 1, kMaxPerHead};
    Input<int> num_kv_heads{"num_kv_heads", 1, 1, kMaxPerHead};  // divides num_heads
    Input<int> v_head_dim{"v_head_dim", 64, 1, kMaxPerHead};
    Input<int> rope{"rope", 0, 0, 2};  // attngen_rope
    Input<int> rotary_dim{"rotary_dim", 64, 0, kMaxPerHead};
    // theta^(-2k / rotary_dim) for k < rotary_dim / 2 (at least one entry), in double.
    Input<Buffer<double, 1>> rope_inv_freq{"rope_inv_freq"};
    Input<float> scale{"scale", 1.0f};
    ATTNGEN_MASK_INPUTS
    // The rows of every batch in one dimension, as the projections compute them
    // (ProjectionStage).
    Output<Buffer<float, 2>> output{"output"};  // (d_model, q_len * batch)
    Output<Buffer<float, 4>> *weights = nullptr;

    void configure() {
        const Type t = weight_buffer_type(precision, get_target());
        for (auto *w : {&wq_t, &wk_t, &wv_t, &wo_t}) w->set_type(t);
        if (weights_output) weights = add_output<Buffer<float, 4>>("weights");
    }

    void generate() {
        const Expr q_len = query.dim(1).extent(), kv_len = key.dim(1).extent();
        const Expr heads = fixed_or_input(fixed_num_heads, num_heads, "num_heads");
        const Expr hd = fixed_or_input(fixed_head_dim, head_dim, "head_dim");
        MaskInputs mask = mask_inputs();
        if (fixed_causal >= 0) mask.causal = fixed_or_input(fixed_causal, causal, "causal");

        const Expr batch = query.dim(2).extent();
        const Expr q_rows = q_len * batch, kv_rows = kv_len * batch;
        const Expr q_in = query.dim(0).extent(), k_in = key.dim(0).extent();
        const Expr v_in = value.dim(0).extent(), o_in = v_head_dim * heads;
        const AmxPath amx_q = amx_path(wq_t, q_in), amx_k = amx_path(wk_t, k_in);
        const AmxPath amx_v = amx_path(wv_t, v_in), amx_o = amx_path(wo_t, o_in);
        const bool amx = amx_q.stored.defined();
        const DirectPath direct = amx ? DirectPath{} : direct_path();
        const bool float_x = !amx && float_operand();
        const Func q_rows_in = as_rows(bounded(query), q_len);
        const Func k_rows_in = as_rows(bounded(key), kv_len);
        const Func v_rows_in = as_rows(bounded(value), kv_len);
        // The 16-bit operands of a CPU's input projections in one Func (InputOperands), so that
        // one tensor passed as several of the inputs is rounded once, AMX's tiles reading it in
        // whole tiles of rows; float32 weights multiply the inputs as they are.
        const bool share_operands =
            !get_target().has_gpu_feature() && storage_type(precision) != Float(32);
        InputOperands operands;
        std::array<SharedOperand, 3> operand_of{};
        if (share_operands) {
            operands = define_input_operands({q_rows_in, k_rows_in, v_rows_in}, {q_in, k_in, v_in},
                                             {q_rows, kv_rows, kv_rows}, storage_type(precision),
                                             weights_in_pairs(), float_x, key_is_query,
                                             value_is_key, amx ? kAmxTile : 1);
            for (int source = 0; source < 3; ++source)
                operand_of[source] = operands.operand(source);
        }
        ProjectionStage pq = define_projection(
            "q_proj", q_rows_in, q_in, 1, q_rows, bq.dim(0).extent(),
            packed_weights(wq_t, q_in, amx_q), bounded(bq), storage_type(precision),
            few_rows_path(), direct, float_x, staged_path(), amx_q, operand_of[0]);
        ProjectionStage pk = define_projection(
            "k_proj", k_rows_in, k_in, 1, kv_rows, bk.dim(0).extent(),
            packed_weights(wk_t, k_in, amx_k), bounded(bk), storage_type(precision),
            few_rows_path(), direct, float_x, staged_path(), amx_k, operand_of[1]);
        ProjectionStage pv = define_projection(
            "v_proj", v_rows_in, v_in, 1, kv_rows, bv.dim(0).extent(),
            packed_weights(wv_t, v_in, amx_v), bounded(bv), storage_type(precision),
            few_rows_path(), direct, float_x, staged_path(), amx_v, operand_of[2]);
        // A CPU's flash kernel in bfloat16 rounds the projected heads to bfloat16 before
        // anything multiplies them, so they are stored so: half the bytes written and read again
        // (scripts/ab_runs.py, 2 rounds, Intel Xeon with AMX, 2 threads: mha_forward_bf16
        // bert-512-b8 1.04x, bert-512 and gpt2-causal 1.05x, tutorial level). Rotated heads are
        // then rotated from the rounded values and rounded again. So are they with the weights
        // output, whose attention (define_attention) multiplies them rounded as well (see
        // attention()), but in an autoscheduled kernel, which rounds them there itself.
        // The flash kernel's output likewise: the output projection rounds its operand to
        // bfloat16 (define_projection), so the kernel stores it rounded, the same bits in half
        // the bytes. scripts/paired_ab.py, Zen 5, old/new: mha_forward_bf16/long-causal 1.015x
        // twice (9 of 10 and 13 of 16 pairs), the other shapes level (0.988-1.011x).
        const bool bf16_flash =
            precision == Precision::BF16 && !weights_output && !get_target().has_gpu_feature();
        // With the weights output too, but in an autoscheduler's kernel: attention() rounds
        // its float32 heads itself.
        const bool bf16_heads = precision == Precision::BF16 && !get_target().has_gpu_feature() &&
                                (!weights_output || !this->using_autoscheduler());
        if (bf16_heads) {
            for (ProjectionStage *p : {&pq, &pk, &pv}) store_result_as(*p, BFloat(16));
        }
        Func qh = split_heads("q_heads", pq.result, hd, q_len);
        Func kh = split_heads("k_heads", pk.result, hd, kv_len);
        Func vh = split_heads("v_heads", pv.result, v_head_dim, kv_len);
        // Key j has position j, query i position i + kv_len - q_len (the keys end where the
        // queries do, as with a KV cache).
        const RopeInputs rotation{rope, rotary_dim, bounded(rope_inv_freq)};
        Var l("l"), item("item");
        Func q_position("q_position"), k_position("k_position");
        q_position(l, item) = l + (kv_len - q_len);
        k_position(l, item) = l;
        Func qr = rotary("q_rotated", qh, rotation, q_position);
        Func kr = rotary("k_rotated", kh, rotation, k_position);
        Func probs;
        Func attention_out =
            attention(qr, kr, vh, hd, v_head_dim, q_len, kv_len, heads / num_kv_heads, scale, mask,
                      weights ? &probs : nullptr, attention_products(precision), rope == 0,
                      AmxHeads{num_kv_heads, batch}, bf16_flash ? BFloat(16) : Float(32));

        MergedHeads merged =
            merge_heads(attention_out, q_len, batch, !get_target().has_gpu_feature());
        ProjectionStage po = define_projection(
            "out_proj", merged.merged, v_head_dim, heads, q_rows, bo.dim(0).extent(),
            packed_weights(wo_t, o_in, amx_o), bounded(bo), storage_type(precision),
            few_rows_path(), direct, float_x, staged_path(), amx_o);
        output = po.result;
        // Its GPU schedule's wide weight loads need tiles at multiples of 4 features
        // (ProjectionResult::Output); attngen's runtime passes every output from feature 0.
        if (get_target().has_gpu_feature()) output.dim(0).set_min(0);
        if (weights) *weights = probs;

        set_all_estimates();
        if (using_autoscheduler()) return;
        const Target t = get_target();
        if (merged.places.defined()) merged.places.compute_root();
        if (share_operands) schedule_input_operands(operands, t);
        if (!t.has_gpu_feature()) {
            // Stored query by query, every head of a query side by side, as the output
            // projection reads it (as the cached forward's prompt attention is, below). Stored
            // head by head, the output projection took 1.06-1.08x the time of the query
            // projection at bert-512-b8, 1.01-1.02x after (attngen_parallel_timeline, Zen 5);
            // scripts/paired_ab.py, 9 pairs in 3 sessions, AVX-512, old/new: mha_forward/
            // bert-128 1.024x, tutorial-cross 1.017x, tutorial 1.013x, bert-512-b8 1.011x,
            // gpt2-causal 1.007x, bert-512 1.006x; long-causal, long-single (one head) and
            // bfloat16 (whose operand is a rounded copy) level.
            const std::vector<Var> a = attention_out.args();  // (c, i, h, b)
            attention_out.reorder_storage(a[0], a[2], a[1], a[3]);
        }
        for (ProjectionStage *p : {&pq, &pk, &pv, &po}) {
            if (t.has_gpu_feature()) {
                schedule_projection_gpu(
                    *p, gpu_knobs(),
                    p == &po ? ProjectionResult::Output : ProjectionResult::Inside);
            } else {
                schedule_projection_cpu(*p, t, cpu_knobs(), ProjectionRows::Many,
                                        p == &po ? output.dim(0).extent() : Expr());
            }
        }
    }

  private:
    // The fixed value, checked against what the call passes, or the Input itself.
    static Expr fixed_or_input(int fixed, const Expr &input, const std::string &name) {
        const bool is_fixed = name == "causal" ? fixed >= 0 : fixed > 0;
        if (!is_fixed) return input;
        return require(input == fixed, Expr(fixed), "this kernel was generated for " + name + " =",
                       fixed, "but the call passed", input);
    }

    void set_all_estimates() {
        const int inner = kEstHeads * kEstHeadDim;
        const int padded = round_up(inner, kWeightPadding);
        for (auto *x : {&query, &key, &value}) {
            x->set_estimates({{0, kEstModel}, {0, kEstLen}, {0, kEstBatch}});
        }
        for (auto *w : {&wq_t, &wk_t, &wv_t}) set_weight_estimates(*w, kEstModel, inner);
        set_weight_estimates(wo_t, inner, kEstModel);
        for (auto *bias : {&bq, &bk, &bv}) bias->set_estimates({{0, padded}});
        bo.set_estimates({{0, round_up(kEstModel, kWeightPadding)}});
        // Estimates must agree with fixed sizes, or the requirement fails while planning.
        num_heads.set_estimate(fixed_num_heads > 0 ? int(fixed_num_heads) : kEstHeads);
        head_dim.set_estimate(fixed_head_dim > 0 ? int(fixed_head_dim) : kEstHeadDim);
        num_kv_heads.set_estimate(fixed_num_heads > 0 ? int(fixed_num_heads) : kEstHeads);
        v_head_dim.set_estimate(fixed_head_dim > 0 ? int(fixed_head_dim) : kEstHeadDim);
        rope.set_estimate(0);
        rotary_dim.set_estimate(fixed_head_dim > 0 ? int(fixed_head_dim) : kEstHeadDim);
        rope_inv_freq.set_estimates({{0, kEstHeadDim / 2}});
        scale.set_estimate(0.125f);
        set_mask_estimates(kEstBatch, kEstHeads, kEstLen, kEstLen);
        output.set_estimates({{0, kEstModel}, {0, kEstLen * kEstBatch}});
        if (weights) {
            weights->set_estimates({{0, kEstLen}, {0, kEstLen}, {0, kEstHeads}, {0, kEstBatch}});
        }
    }
};

// y(o, l, b) = x(f, l, b) . w(f, o) + bias(o), with w as torch.nn.Linear stores it (row-major
// [out, in]); the transpose into the projection's (o, f) order is a stage of the pipeline.
class LinearGenerator : public AttngenGenerator<LinearGenerator> {
  public:
    // true: w is already in the projection's (o, f) order and padded as the fused forward's
    // weights are (layout.h), bias padded likewise; the kernel is then exactly one projection
    // of attngen_mha_forward (bench/ measures it against sgemm).
    GeneratorParam<bool> packed_weights{"packed_weights", false};

    Input<Buffer<float, 2>> x{"x"};        // (in, rows)
    Input<Buffer<float, 2>> w{"w"};        // (in, out), or packed: (in x 64, panels) (layout.h)
    Input<Buffer<float, 1>> bias{"bias"};  // (out), or (padded out) when packed
    Output<Buffer<float, 2>> y{"y"};       // (out, rows)

    void generate() {
        require_cpu_target();
        const Expr in = x.dim(0).extent();
        const Expr out_features = packed_weights ? bias.dim(0).extent() : w.dim(1).extent();
        Var o("o"), f("f"), d("d"), g("g"), n("n");
        Func w_t("w_t");
        const Func w_in = bounded(w), bias_in = bounded(bias), x_in = bounded(x);
        Func bias_clamped("bias_clamped");
        // Either way the projection reads weights in panels of kWeightPadding outputs
        // (layout.h); unpacked ones are packed so first.
        constexpr int panel = kWeightPadding;
        Func panels("w_panels");
        Var column("column"), pn("pn");
        if (packed_weights) {
            bias_clamped(o) = bias_in(o);
        } else {
            panels(column, f, pn) = w_in(f, clamp(pn * panel + column, 0, out_features - 1));
            bias_clamped(o) = bias_in(clamp(o, 0, out_features - 1));
        }
        w_t(o, f) =
            packed_weights ? weight_panel_view(w_in, panel)(o, f) : panels(o % panel, f, o / panel);
        Func rows("x_rows");
        rows(d, g, n) = x_in(d, n);
        ProjectionStage p =
            define_projection("linear", rows, in, 1, x.dim(1).extent(), out_features, w_t,
                              bias_clamped, Float(32), FewRowsPath{}, direct_path());
        y = p.result;

        x.set_estimates({{0, kEstModel}, {0, kEstLen * kEstBatch}});
        w.set_estimates({{0, kEstModel}, {0, kEstModel}});
        bias.set_estimates({{0, kEstModel}});
        y.set_estimates({{0, kEstModel}, {0, kEstLen * kEstBatch}});
        if (!using_autoscheduler()) {
            if (!packed_weights) schedule_weight_pack_cpu(panels, get_target());
            schedule_projection_cpu(p, get_target(), cpu_knobs(), ProjectionRows::Many,
                                    y.dim(0).extent());
        }
    }
};

// Keys and values appended to a KV cache (attngen_kv_cache_append): both projections, the keys
// rotated at positions(b) + l. k_rows (l, d, hk, b) is laid out as the cache keeps keys,
// positions innermost; v_rows (c, l, hk, b) features innermost, copied into the cache's panels.
class KvProjectGenerator : public AttngenGenerator<KvProjectGenerator> {
  public:
    GeneratorParam<Precision> precision{"precision", Precision::F32, kPrecisionNames};

    Input<Buffer<float, 3>> key{"key"};                 // (kdim, len, batch)
    Input<Buffer<float, 3>> value{"value"};             // (vdim, len, batch)
    Input<Buffer<void, 3>> wk_t{"wk_t"}, wv_t{"wv_t"};  // padded, as the fused forward's
    Input<Buffer<float, 1>> bk{"bk"}, bv{"bv"};
    Input<int> head_dim{"head_dim", 64, 1, kMaxPerHead};
    Input<int> v_head_dim{"v_head_dim", 64, 1, kMaxPerHead};
    Input<int> rope{"rope", 0, 0, 2};
    Input<int> rotary_dim{"rotary_dim", 64, 0, kMaxPerHead};
    Input<Buffer<double, 1>> rope_inv_freq{"rope_inv_freq"};
    Input<Buffer<int32_t, 1>> positions{"positions"};  // (batch): the first position of row 0
    // In the precision's type, rounded to nearest: a float16 row beyond its range is infinite,
    // which the runtime refuses before anything reaches the cache.
    Output<Buffer<void, 4>> k_rows{"k_rows"};  // (len, head_dim, kv_heads, batch)
    Output<Buffer<void, 4>> v_rows{"v_rows"};  // (v_head_dim, len, kv_heads, batch)

    void configure() {
        for (auto *w : {&wk_t, &wv_t}) w->set_type(weight_buffer_type(precision, get_target()));
        for (auto *rows : {&k_rows, &v_rows}) {
            rows->set_type(cache_buffer_type(precision, get_target()));
        }
    }

    void generate() {
        const Expr len = key.dim(1).extent(), batch = key.dim(2).extent();
        const Expr k_in = key.dim(0).extent(), v_in = value.dim(0).extent();
        const AmxPath amx_k = amx_path(wk_t, k_in, kAmxMinRows);
        const AmxPath amx_v = amx_path(wv_t, v_in, kAmxMinRows);
        ProjectionStage pk = define_projection(
            "k_proj", as_rows(bounded(key), len), k_in, 1, len * batch, bk.dim(0).extent(),
            packed_weights(wk_t, k_in, amx_k), bounded(bk), storage_type(precision),
            few_rows_path(), DirectPath{}, float_operand(), staged_path(), amx_k);
        ProjectionStage pv = define_projection(
            "v_proj", as_rows(bounded(value), len), v_in, 1, len * batch, bv.dim(0).extent(),
            packed_weights(wv_t, v_in, amx_v), bounded(bv), storage_type(precision),
            few_rows_path(), DirectPath{}, float_operand(), staged_path(), amx_v);
        Func kh = split_heads("k_heads", pk.result, head_dim, len);
        Func vh = split_heads("v_heads", pv.result, v_head_dim, len);
        Var l("l"), d("d"), c("c"), hk("hk"), b("b");
        const Func first = bounded(positions);
        Func position("k_position");
        position(l, b) = first(b) + l;
        Func kr =
            rotary("k_rotated", kh, RopeInputs{rope, rotary_dim, bounded(rope_inv_freq)}, position);
        const Target t = get_target();
        k_rows(l, d, hk, b) = to_cache_element(kr(d, l, hk, b), precision, t);
        v_rows(c, l, hk, b) = to_cache_element(vh(c, l, hk, b), precision, t);

        key.set_estimates({{0, kEstModel}, {0, 1}, {0, 8}});
        value.set_estimates({{0, kEstModel}, {0, 1}, {0, 8}});
        for (auto *w : {&wk_t, &wv_t}) set_weight_estimates(*w, kEstModel, kEstModel);
        for (auto *bias : {&bk, &bv}) bias->set_estimates({{0, kEstModel}});
        head_dim.set_estimate(kEstHeadDim);
        v_head_dim.set_estimate(kEstHeadDim);
        rope.set_estimate(1);
        rotary_dim.set_estimate(kEstHeadDim);
        rope_inv_freq.set_estimates({{0, kEstHeadDim / 2}});
        positions.set_estimates({{0, 8}});
        k_rows.set_estimates({{0, 1}, {0, kEstHeadDim}, {0, kEstHeads}, {0, 8}});
        v_rows.set_estimates({{0, kEstHeadDim}, {0, 1}, {0, kEstHeads}, {0, 8}});
        if (using_autoscheduler()) return;
        if (t.has_gpu_feature()) {
            for (ProjectionStage *p : {&pk, &pv}) schedule_projection_gpu(*p, gpu_knobs());
            schedule_elementwise_gpu(k_rows);
            schedule_elementwise_gpu(v_rows);
            return;
        }
        for (ProjectionStage *p : {&pk, &pv}) {
            schedule_projection_cpu(*p, t, cpu_knobs(), ProjectionRows::FewOrMany);
        }
        schedule_cache_key_rows_cpu(k_rows, kr, len, batch, k_rows.dim(1).extent(), rope == 0, t,
                                    k_rows.dim(1).stride());
        schedule_cache_value_rows_cpu(v_rows, len, batch, t);
    }
};

// A KV cache's buffers (the decode kernels' layout) estimated for one item of 1024 positions of
// kEstHeads heads.
template <typename KeyBuffer, typename ValueBuffer>
void set_cache_estimates(KeyBuffer &k_cache, ValueBuffer &v_cache) {
    constexpr int kEstPositions = 1024;
    k_cache.set_estimates({{0, kCacheKeyBlock},
                           {0, kEstHeadDim},
                           {0, kEstPositions / kCacheKeyBlock},
                           {0, kEstHeads},
                           {0, 1}});
    v_cache.set_estimates({{0, kCacheValuePanel},
                           {0, kEstPositions},
                           {0, kEstHeadDim / kCacheValuePanel},
                           {0, kEstHeads},
                           {0, 1}});
}

// Rows from attngen_kv_project written into a KV cache that lives on a GPU: a scatter into the
// cache's own buffers (k_rows' row l of batch row b goes to position positions(b) + l of item
// items(b)), leaving every other position as it was. On the CPU the runtime copies the rows.
class KvStoreGenerator : public AttngenGenerator<KvStoreGenerator> {
  public:
    GeneratorParam<Precision> precision{"precision", Precision::F32, kPrecisionNames};

    Input<Buffer<void, 4>> k_rows{"k_rows"};           // (len, head_dim, kv_heads, batch)
    Input<Buffer<void, 4>> v_rows{"v_rows"};           // (v_head_dim, len, kv_heads, batch)
    Input<Buffer<int32_t, 1>> items{"items"};          // (batch), distinct: see below
    Input<Buffer<int32_t, 1>> positions{"positions"};  // (batch): where row 0 goes
    // The cache, laid out as attngen_mha_decode reads it.
    // (kCacheKeyBlock, head_dim, blocks, kv_heads, max_batch)
    Output<Buffer<void, 5>> k_cache{"k_cache"};
    // (kCacheValuePanel, max_len, panels, kv_heads, max_batch): feature c is (c % panel, c / panel)
    Output<Buffer<void, 5>> v_cache{"v_cache"};

    void configure() {
        const Type t = cache_buffer_type(precision, get_target());
        for (auto *rows : {&k_rows, &v_rows}) rows->set_type(t);
        k_cache.set_type(t);
        v_cache.set_type(t);
    }

    void generate() {
        const Target t = get_target();
        if (!t.has_gpu_feature()) {
            throw CompileError("attngen_kv_store is for GPU targets; target: " + t.to_string());
        }
        const Type stored = cache_buffer_type(precision, t);
        Var p("p"), d("d"), blk("blk"), hk("hk"), it("it"), c("c");
        // Undefined: the positions not appended to keep what the cache held.
        k_cache(p, d, blk, hk, it) = undef(stored);
        v_cache(c, p, blk, hk, it) = undef(stored);
        // Clamped so that Halide can bound the writes; the runtime passes positions and items
        // inside the cache.
        const auto item_of = [&](const Expr &row) {
            return clamp(items(row), 0, v_cache.dim(4).extent() - 1);
        };
        const auto position_of = [&](const Expr &row, const Expr &l) {
            return clamp(positions(row) + l, 0, v_cache.dim(1).extent() - 1);
        };
        RDom rk(0, k_rows.dim(0).extent(), 0, k_rows.dim(1).extent(), 0, k_rows.dim(2).extent(), 0,
                k_rows.dim(3).extent(), "rk");
        const Expr key_position = position_of(rk.w, rk.x);
        k_cache(key_position % kCacheKeyBlock, rk.y, key_position / kCacheKeyBlock, rk.z,
                item_of(rk.w)) = k_rows(rk.x, rk.y, rk.z, rk.w);
        RDom rv(0, v_rows.dim(0).extent(), 0, v_rows.dim(1).extent(), 0, v_rows.dim(2).extent(), 0,
                v_rows.dim(3).extent(), "rv");
        v_cache(rv.x % kCacheValuePanel, position_of(rv.w, rv.y), rv.x / kCacheValuePanel, rv.z,
                item_of(rv.w)) = v_rows(rv.x, rv.y, rv.z, rv.w);

        k_rows.set_estimates({{0, 1}, {0, kEstHeadDim}, {0, kEstHeads}, {0, 1}});
        v_rows.set_estimates({{0, kEstHeadDim}, {0, 1}, {0, kEstHeads}, {0, 1}});
        items.set_estimates({{0, 1}});
        positions.set_estimates({{0, 1}});
        set_cache_estimates(k_cache, v_cache);
        if (using_autoscheduler()) return;
        // One thread per element of the rows. Distinct items (the runtime checks them) make
        // every write's place distinct, which Halide cannot prove through the items buffer.
        for (auto [cache, r] : {std::pair<Func, RDom>{k_cache, rk}, {v_cache, rv}}) {
            // The undefined pure definition computes nothing, but on the host it would count as
            // a host access of the cache, which has no host memory.
            cache.gpu_blocks(cache.args().back());
            RVar fused("fused"), block("block"), thread("thread");
            cache.update()
                .allow_race_conditions()
                .fuse(r.x, r.y, fused)
                .fuse(fused, r.z, fused)
                .fuse(fused, r.w, fused)
                .split(fused, block, thread, kStoreThreads, TailStrategy::GuardWithIf)
                .gpu_blocks(block)
                .gpu_threads(thread);
        }
    }

  private:
    static constexpr int kStoreThreads = 64;
};

// The cached forward (attngen_mha_forward_cached): the query projection, rotated at the
// positions the cache says, attention over the cache (the split-KV kernel,
// define_decode_attention) and the output projection.
class MhaDecodeGenerator : public AttngenGenerator<MhaDecodeGenerator> {
  public:
    GeneratorParam<Precision> precision{"precision", Precision::F32, kPrecisionNames};

    Input<Buffer<float, 3>> query{"query"};  // (d_model, q_len, batch)
    // Weights and cache in the precision's type. The split-KV kernel widens the cached keys and
    // values to float32 and multiplies them by float32 queries and probabilities; a prompt's
    // flash kernel multiplies attention_products (cache_flash_attention).
    Input<Buffer<void, 3>> wq_t{"wq_t"}, wo_t{"wo_t"};
    Input<Buffer<float, 1>> bq{"bq"}, bo{"bo"};
    // (kCacheKeyBlock, head_dim, blocks, kv_heads, max_batch): position p is (p % block, p / block)
    Input<Buffer<void, 5>> k_cache{"k_cache"};
    // (kCacheValuePanel, max_len, panels, kv_heads, max_batch): feature c is (c % panel, c / panel)
    Input<Buffer<void, 5>> v_cache{"v_cache"};
    Input<Buffer<int32_t, 1>> items{"items"};      // (batch)
    Input<Buffer<int32_t, 1>> lengths{"lengths"};  // (batch): the positions each item holds
    Input<int> num_heads{"num_heads", 1, 1, kMaxPerHead};
    Input<int> num_kv_heads{"num_kv_heads", 1, 1, kMaxPerHead};
    Input<int> head_dim{"head_dim", 64, 1, kMaxPerHead};
    Input<int> v_head_dim{"v_head_dim", 64, 1, kMaxPerHead};
    Input<int> rope{"rope", 0, 0, 2};
    Input<int> rotary_dim{"rotary_dim", 64, 0, kMaxPerHead};
    Input<Buffer<double, 1>> rope_inv_freq{"rope_inv_freq"};
    Input<float> scale{"scale", 1.0f};
    Input<int> causal{"causal", 0, 0, 2};
    Input<int> key_limit{"key_limit", 1, 0, 1 << 30};  // the largest length in this call
    Output<Buffer<float, 2>> output{"output"};         // (d_model, q_len * batch)

    void configure() {
        for (auto *w : {&wq_t, &wo_t}) w->set_type(weight_buffer_type(precision, get_target()));
        k_cache.set_type(cache_buffer_type(precision, get_target()));
        v_cache.set_type(cache_buffer_type(precision, get_target()));
    }

    void generate() {
        const Target t = get_target();
        const Expr q_len = query.dim(1).extent(), batch = query.dim(2).extent();
        const Expr q_in = query.dim(0).extent(), o_in = v_head_dim * num_heads;
        const AmxPath amx_q = amx_path(wq_t, q_in, kAmxMinRows);
        const AmxPath amx_o = amx_path(wo_t, o_in, kAmxMinRows);
        ProjectionStage pq = define_projection(
            "q_proj", as_rows(bounded(query), q_len), q_in, 1, q_len * batch, bq.dim(0).extent(),
            packed_weights(wq_t, q_in, amx_q), bounded(bq), storage_type(precision),
            few_rows_path(), DirectPath{}, float_operand(), staged_path(), amx_q);
        Func qh = split_heads("q_heads", pq.result, head_dim, q_len);
        Var l("l"), b("b");
        const Func n = bounded(lengths);
        Func position("q_position");
        position(l, b) = n(b) - q_len + l;
        Func qr =
            rotary("q_rotated", qh, RopeInputs{rope, rotary_dim, bounded(rope_inv_freq)}, position);

        // The cache's elements as float32: on GPU targets a 16-bit format may come as its bits
        // (layout.h, half_cache_as_bits).
        const CacheViews cache =
            define_cache_views(bounded(k_cache), bounded(v_cache), v_cache.dim(2).extent(),
                               [&](const Expr &x) { return from_cache_element(x, precision, t); });
        const Func &keys = cache.keys, &values = cache.values;
        const Func attention_out = t.has_gpu_feature() ? cache_attention_gpu(qr, keys, values, n)
                                                       : cache_attention_cpu(qr, keys, values, n);

        MergedHeads merged = merge_heads(attention_out, q_len, batch, !t.has_gpu_feature());
        ProjectionStage po = define_projection(
            "out_proj", merged.merged, v_head_dim, num_heads, q_len * batch, bo.dim(0).extent(),
            packed_weights(wo_t, o_in, amx_o), bounded(bo), storage_type(precision),
            few_rows_path(), DirectPath{}, float_operand(), staged_path(), amx_o);
        output = po.result;
        // Its GPU schedule's wide weight loads need tiles at multiples of 4 features
        // (ProjectionResult::Output); attngen's runtime passes every output from feature 0.
        if (get_target().has_gpu_feature()) output.dim(0).set_min(0);

        query.set_estimates({{0, kEstModel}, {0, 1}, {0, 1}});
        set_weight_estimates(wq_t, kEstModel, kEstModel);
        set_weight_estimates(wo_t, kEstModel, kEstModel);
        bq.set_estimates({{0, kEstModel}});
        bo.set_estimates({{0, kEstModel}});
        set_cache_estimates(k_cache, v_cache);
        items.set_estimates({{0, 1}});
        lengths.set_estimates({{0, 1}});
        num_heads.set_estimate(kEstHeads);
        num_kv_heads.set_estimate(kEstHeads);
        head_dim.set_estimate(kEstHeadDim);
        v_head_dim.set_estimate(kEstHeadDim);
        rope.set_estimate(0);
        rotary_dim.set_estimate(kEstHeadDim);
        rope_inv_freq.set_estimates({{0, kEstHeadDim / 2}});
        scale.set_estimate(0.125f);
        causal.set_estimate(2);
        key_limit.set_estimate(1024);
        output.set_estimates({{0, kEstModel}, {0, 1}});
        if (using_autoscheduler()) return;
        if (t.has_gpu_feature()) {
            if (decode_needs_device_cache_layout(gpu_knobs())) {
                constrain_device_cache_layout(k_cache);
                constrain_device_cache_layout(v_cache);
            }
            schedule_projection_gpu(pq, gpu_knobs());
            schedule_projection_gpu(po, gpu_knobs(), ProjectionResult::Output);
            return;
        }
        if (merged.places.defined()) merged.places.compute_root();
        schedule_projection_cpu(pq, t, cpu_knobs(), ProjectionRows::FewOrMany);
        schedule_projection_cpu(po, t, cpu_knobs(), ProjectionRows::FewOrMany,
                                output.dim(0).extent());
    }

  private:
    // On CPUs, the split-KV decode kernel (define_decode_attention) for calls of fewer than
    // kCacheFlashMinQueries queries per item (or than one per kCacheFlashKeysPerQuery cached
    // positions), the steps of decoding; the flash kernel of attngen_mha_forward for more, a
    // prompt. The split-KV kernel computes every key of every split for every query row, so a
    // prompt of n tokens into an empty cache cost it n^2 scores where a causal mask leaves
    // n^2 / 2, which the flash kernel skips by key block. A call runs one of them: the other's
    // stages are skipped at run time (Halide's skip_stages), and the chosen result is copied
    // once for the output projection.
    Func cache_attention_cpu(const Func &q, const Func &keys, const Func &values, const Func &n) {
        const CpuScheduleKnobs knobs = resolve_cpu_knobs(cpu_knobs(), get_target());
        DecodeAttentionStage a = define_decode_attention(
            decode_inputs(q, keys, values, n), knobs.decode_split_keys, DecodeSplit::ShrinkToCall);
        if (!using_autoscheduler()) {
            schedule_decode_attention_cpu(a, get_target(), cpu_knobs(), storage_type(precision),
                                          rope == 0);
        }
        const Func prompt = cache_flash_attention(q, keys, values, n);
        // llama3-8b shape (32 heads over 8 KV heads of 128), float32, Zen 4, ms per query at
        // 63 queries (split-KV) against 64 (flash): 4000 cached positions 0.81 against 0.75,
        // 8000 1.28 against 1.18, 16000 1.92-2.21 against 1.93-2.07; 32000 3.45-3.91 against
        // 4.44-4.84, and the flash kernel took 4.08 at 128 queries and 3.87 at 256.
        const Expr many_queries = query.dim(1).extent() >=
                                  max(kCacheFlashMinQueries, key_limit / kCacheFlashKeysPerQuery);
        Var c("c"), i("i"), h("h"), b("b"), hi("hi");
        Func out("cache_attention_out");
        out(c, i, h, b) = select(many_queries, prompt(c, i, h, b), a.out(c, i, h, b));
        if (!using_autoscheduler()) {
            // Stored query by query, every head of a query side by side, as the output
            // projection reads it (merged_heads): stored head by head, each of its row tiles
            // read a head's features from a run 256 KiB away from the last (512 queries of
            // 128 features), and at llama3-8b-prefill that projection took 1.02-1.19x the time
            // of the query projection, the same product over a caller's rows
            // (attngen_parallel_timeline, Zen 3, nine runs); 1.00-1.10x after (three runs).
            // scripts/paired_ab.py, 16 pairs in 4 sessions, 2 threads, Zen 3, old/new:
            // decode/llama3-8b-prefill 1.10x (new faster in 11 of 16); the copy itself went from
            // 0.9-1.1 to 1.3-1.6 ms of the call's 370-470.
            // A prompt's copy in tasks of kCopyRowsPerTask rows: in tasks of one row (a head of
            // one query), a llama3-8b-prefill's copy was 16384 tasks of 512 bytes and took
            // 2.4 ms (attngen_parallel_timeline, Intel Xeon, 2 threads).
            out.compute_root()
                .reorder_storage(c, h, i, b)
                .reorder(c, h, i, b)
                .fuse(h, i, hi)
                .vectorize(c, natural_vector_size<float>(), TailStrategy::GuardWithIf);
            out.specialize(many_queries).parallel(hi, kCopyRowsPerTask, TailStrategy::GuardWithIf);
        }
        return out;
    }

    // The flash kernel over each item's cached keys and values: the item's length is its key
    // mask, and a bottom-right causal mask ends there. A bfloat16 cache's prompt multiplies in
    // bfloat16, as attngen_mha_forward does: the cache holds its keys and values in bfloat16
    // already, and a prompt is bound by its products, not by reading the cache. (The split-KV
    // kernel's steps are bound by reading it, and widen it to float32.) Not in AMX tiles
    // (attention()'s kv_heads): that path was not tried, for want of a CPU with AMX to test it.
    Func cache_flash_attention(const Func &q, const Func &keys, const Func &values, const Func &n) {
        Var d("d"), c("c"), j("j"), hk("hk"), b("b");
        const Expr item = clamp(bounded(items)(b), 0, k_cache.dim(4).extent() - 1);
        Func k_heads("cached_key_heads"), v_heads("cached_value_heads");
        k_heads(d, j, hk, b) = keys(j, d, hk, item);
        v_heads(c, j, hk, b) = values(c, j, hk, item);
        MaskInputs mask = key_lengths_mask(n, causal);
        mask.causal_end = n;
        // At least one key, so that reads clamped to the last key stay in the cache when every
        // item of the call is empty; the key mask hides it.
        return attention(q, k_heads, v_heads, head_dim, v_head_dim, query.dim(1).extent(),
                         max(key_limit, 1), num_heads / num_kv_heads, scale, mask, nullptr,
                         attention_products(precision), rope == 0);
    }

    // On GPUs the split-KV kernel too, with splits of a constant gpu_decode_split_keys keys
    // (schedule_decode_attention_gpu): the flash kernel of attngen_mha_forward, which served
    // here before, gave a step one block per query head and item (32 for llama3-8b-decode),
    // each reading its KV head's whole cache, with 15 of its 16 query rows idle at one query.
    Func cache_attention_gpu(const Func &q, const Func &keys, const Func &values, const Func &n) {
        DecodeInputs in = decode_inputs(q, keys, values, n);
        // At least one key, so that a call whose items are all empty still has one split (a
        // GPU launch of no blocks fails); the key mask hides it.
        in.key_limit = max(key_limit, 1);
        const int split_keys = resolve_gpu_knobs(gpu_knobs()).gpu_decode_split_keys;
        DecodeAttentionStage a = define_decode_attention(in, split_keys, DecodeSplit::Fixed);
        if (!using_autoscheduler()) schedule_decode_attention_gpu(a, gpu_knobs());
        return a.out;
    }

    DecodeInputs decode_inputs(const Func &q, const Func &keys, const Func &values, const Func &n) {
        DecodeInputs in;
        in.q = q;
        in.k_cache = keys;
        in.v_cache = values;
        in.items = bounded(items);
        in.lengths = n;
        in.dk = head_dim;
        in.dv = v_head_dim;
        in.q_len = query.dim(1).extent();
        in.group = num_heads / num_kv_heads;
        in.scale = scale;
        in.causal = causal;
        in.key_limit = key_limit;
        in.max_len = v_cache.dim(1).extent();  // the keys' blocks cover at least as many
        in.max_items = k_cache.dim(4).extent();
        return in;
    }
};

}  // namespace
}  // namespace attngen

HALIDE_REGISTER_GENERATOR(attngen::SdpaGenerator, attngen_sdpa)
HALIDE_REGISTER_GENERATOR(attngen::MhaForwardGenerator, attngen_mha_forward)
HALIDE_REGISTER_GENERATOR(attngen::LinearGenerator, attngen_linear)
HALIDE_REGISTER_GENERATOR(attngen::KvProjectGenerator, attngen_kv_project)
HALIDE_REGISTER_GENERATOR(attngen::MhaDecodeGenerator, attngen_mha_decode)
HALIDE_REGISTER_GENERATOR(attngen::KvStoreGenerator, attngen_kv_store)
