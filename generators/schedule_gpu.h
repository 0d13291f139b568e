// GPU schedules (CUDA and OpenCL) for the stages of stages.h. One schedule serves both APIs:
// Halide lowers gpu_blocks / gpu_threads to either, and the OpenCL build of it is what the
// test suite runs through PoCL on machines without a GPU.
#ifndef ATTNGEN_GENERATORS_SCHEDULE_GPU_H
#define ATTNGEN_GENERATORS_SCHEDULE_GPU_H

#include "Halide.h"
#include "stages.h"

namespace attngen {

// Tile sizes of the GPU schedules; 0 = the default. Each is a GeneratorParam of the generators
// so the autotuner can set them on a machine with a GPU.
struct GpuScheduleKnobs {
    int gemm_block_rows = 0;  // rows of a projection block (its width is kWeightPadding features)
    int query_block = 0;      // queries per attention block
    int key_block = 0;        // keys per shared-memory tile of the probs x values reduction
};

GpuScheduleKnobs resolve_gpu_knobs(GpuScheduleKnobs knobs);

// result is computed at root as one kernel of register-tiled threads.
void schedule_projection_gpu(ProjectionStage &p, const GpuScheduleKnobs &knobs);

// Scores are one tiled kernel; softmax statistics and probs x values are fused into one kernel
// per block of queries (a second when the weights are an output). See schedule_gpu.cpp.
void schedule_attention_gpu(AttentionStage &a, const GpuScheduleKnobs &knobs, bool weights_output);

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_SCHEDULE_GPU_H
