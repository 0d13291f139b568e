// CPU schedules (x86 and ARM) for the stages of stages.h. The shape of every schedule follows
// from properties of the target (its vector width); the tile sizes are knobs the generators
// expose as GeneratorParams, so the autotuner can set them per target.
#ifndef ATTNGEN_GENERATORS_SCHEDULE_CPU_H
#define ATTNGEN_GENERATORS_SCHEDULE_CPU_H

#include "Halide.h"
#include "stages.h"

namespace attngen {

// Tile sizes of the CPU schedules. A knob of 0 means "derive it from the target"
// (default_cpu_knobs); the generators expose each one as a GeneratorParam.
struct CpuScheduleKnobs {
    int gemm_vectors = 0;      // vectors across output features in a projection register tile
    int gemm_rows = 0;         // rows in a projection register tile
    int gemm_row_tiles = 0;    // register tiles of rows per parallel projection task
    int query_block = 0;       // queries per parallel attention task
    int long_query_block = 0;  // the same when a head's keys and values exceed L2 (flash)
    int score_vectors = 0;     // vectors across keys in a score register tile
    int score_rows = 0;        // queries in a score register tile
    int out_vectors = 0;       // vectors across value features in a probs x values register tile
    int out_rows = 0;          // queries in a probs x values register tile
    int key_block = 0;         // keys per block of the flash attention (a multiple of 16)
};

// Replaces every 0 knob by the value for the target's register file and vector width.
CpuScheduleKnobs resolve_cpu_knobs(CpuScheduleKnobs knobs, const Halide::Target &target);

// Schedules result (compute_root, or a pipeline output) and its accumulator.
void schedule_projection_cpu(ProjectionStage &p, const Halide::Target &target,
                             const CpuScheduleKnobs &knobs);

// Schedules the attention stages. a.out must be computed at root (it is either a pipeline
// output or the input of the output projection); when weights_output is true, a.probs is a
// pipeline output as well.
void schedule_attention_cpu(AttentionStage &a, const Halide::Target &target,
                            const CpuScheduleKnobs &knobs, bool weights_output);

// Schedules the flash attention stages; a.out must be computed at root (it is a pipeline
// output or the input of the output projection). The query and key blocks are those the
// algorithm was defined with.
void schedule_flash_attention_cpu(FlashAttentionStage &a, const Halide::Target &target,
                                  const CpuScheduleKnobs &knobs);

// Packs a [out, in] weight into (o, f) order for a projection, at root.
void schedule_weight_pack_cpu(Halide::Func pack, const Halide::Target &target);

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_SCHEDULE_CPU_H
