// CPU schedules (x86 and ARM) for the stages of stages.h. The shape of every schedule follows
// from properties of the target (its vector width); the tile sizes are knobs the generators
// expose as GeneratorParams, so the autotuner can set them per target.
#ifndef ATTNGEN_GENERATORS_SCHEDULE_CPU_H
#define ATTNGEN_GENERATORS_SCHEDULE_CPU_H

#include "Halide.h"
#include "schedule_knobs.h"
#include "stages.h"

namespace attngen {

// Tile sizes of the CPU schedules, one int per knob of ATTNGEN_CPU_SCHEDULE_KNOBS
// (schedule_knobs.h, which says what each controls). 0 means "derive it from the target"
// (resolve_cpu_knobs); the generators expose each one as a GeneratorParam.
struct CpuScheduleKnobs {
#define ATTNGEN_KNOB_FIELD(name, max, values, what) int name = 0;
    ATTNGEN_CPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_FIELD)
#undef ATTNGEN_KNOB_FIELD
};

// AVX512-BF16's vdpbf16ps: the CPUs whose Halide feature includes it, but for Intel's with AMX,
// where it does half the float32 FMA's multiply-adds (runtime/bf16_dot_probe.h). Elsewhere a
// bfloat16 pair's products are two float32 FMAs.
bool has_bfloat16_dot_product(const Halide::Target &target);

// Intel AMX's tile products for bfloat16 projections (AmxPath): targets naming
// avx512_sapphirerapids, which the runtime takes only on CPUs with AMX whose kernel grants the
// tile state (runtime/cpu_dispatch.cpp).
bool uses_amx(const Halide::Target &target);

// Replaces every 0 knob by the value for the target's register file and vector width.
CpuScheduleKnobs resolve_cpu_knobs(CpuScheduleKnobs knobs, const Halide::Target &target);

// The features of the CPU attention's probs x values register tile (either algorithm): the
// value_tile of define_flash_attention and define_attention, so that heads of one tile (of
// rows that hold only them), or short heads of whole tiles, read their values in place, and
// others from panels of a tile's features (PackedScore::v_panels).
int cpu_value_tile(const CpuScheduleKnobs &knobs, const Halide::Target &target);

// The query block of the flash attention for a call: query_block while a head's keys and
// values stay in L2, long_query_block beyond (2 x query_block at most for causal calls).
// Target policy, so it lives here; define_flash_attention takes the result.
Halide::Expr flash_query_block(const CpuScheduleKnobs &knobs, const Halide::Target &target,
                               const Halide::Expr &kv_len, const Halide::Expr &dk,
                               const Halide::Expr &dv, const Halide::Expr &causal);

// Which row counts a projection's schedule is specialized for. Decoding projects one to a few
// rows per call (a token per item), where a projection is a matrix-vector product bound by
// reading the weights; elsewhere rows are many and it is a matrix product.
enum class ProjectionRows { Many, FewOrMany };

// The direct path (DirectPath) schedule_projection_cpu has a schedule for on this target, or
// none.
DirectPath cpu_direct_path(const Halide::Target &target, const CpuScheduleKnobs &knobs);

// Schedules result (compute_root, or a pipeline output) and its accumulator. A result that is
// the pipeline's output passes its buffer's feature count (output_features), which the
// caller's buffer must then start at 0 and hold exactly; other results are computed over
// whole panels of weights (layout.h).
void schedule_projection_cpu(ProjectionStage &p, const Halide::Target &target,
                             const CpuScheduleKnobs &knobs,
                             ProjectionRows rows = ProjectionRows::Many,
                             const Halide::Expr &output_features = Halide::Expr());

// Schedules the attention stages. a.out must be computed at root (it is either a pipeline
// output or the input of the output projection); when weights_output is true, a.probs is a
// pipeline output as well.
void schedule_attention_cpu(AttentionStage &a, const Halide::Target &target,
                            const CpuScheduleKnobs &knobs, bool weights_output);

// Schedules the flash attention stages; a.out must be computed at root (it is a pipeline
// output or the input of the output projection). The query and key blocks are those the
// algorithm was defined with (flash_query_block and knobs.key_block).
void schedule_flash_attention_cpu(FlashAttentionStage &a, const Halide::Target &target,
                                  const CpuScheduleKnobs &knobs);

// A rotary angle table (the cos or the sin of define_rope_angles), at root, on one thread: a
// decoding step's table is a few positions, and a prefill's (rotary_dim / 2 angles per
// position) a small part of its work. Without rotary positions (mode 0) it is ones and
// zeros, computed without trigonometry.
void schedule_rope_angles_cpu(Halide::Func angles, const Halide::Target &target,
                              const RopeInputs &rope);

// Schedules the decode attention (define_decode_attention): one parallel task per (split,
// key/value head, batch row), the merge per (key/value head, batch row). a.out is inlined into
// its consumer (the output projection). `cache_element` is the type the KV cache holds; the
// query rows are computed without the rotation where `unrotated` holds.
void schedule_decode_attention_cpu(DecodeAttentionStage &a, const Halide::Target &target,
                                   const CpuScheduleKnobs &knobs, const Halide::Type &cache_element,
                                   const Halide::Expr &unrotated);

// The rows an append writes into the KV cache, (.., .., kv head, batch), `positions` for each
// of `items`, in parallel over (kv head, batch) only for more rows than a decoding step
// appends, whose few rows cost less than waking the threads.
// Keys, rows(l, d, ..) = stored(rotated(d, l, ..)) with positions innermost, as the cache
// holds them (rows is the pipeline's output, whose buffer gives the kv heads and items): in tiles
// staged from `rotated` (`features` wide; computed without the rotation where `unrotated` holds),
// stored along the positions, or for fewer positions than a vector along the features
// (key_feature_stride apart).
void schedule_cache_key_rows_cpu(Halide::Func rows, Halide::Func rotated,
                                 const Halide::Expr &positions, const Halide::Expr &items,
                                 const Halide::Expr &features, const Halide::Expr &unrotated,
                                 const Halide::Target &target,
                                 const Halide::Expr &key_feature_stride);
// Values, rows(c, l, ..), features innermost: vectorized along them.
void schedule_cache_value_rows_cpu(Halide::Func rows, const Halide::Expr &positions,
                                   const Halide::Expr &items, const Halide::Target &target);

// The input projections' shared operands (InputOperands), at root: each source's rows in
// parallel tasks, features vectorized, as a projection's own operand is scheduled. The
// projections that read them leave their views inline (schedule_projection_cpu).
void schedule_input_operands(const InputOperands &ops, const Halide::Target &target);

// Packs a [out, in] weight into (o, f) order for a projection, at root.
void schedule_weight_pack_cpu(Halide::Func pack, const Halide::Target &target);

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_SCHEDULE_CPU_H
