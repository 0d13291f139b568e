// GPU schedules (CUDA and OpenCL) for the stages of stages.h. One schedule serves both APIs:
// Halide lowers gpu_blocks / gpu_threads to either, and the OpenCL build of it is what the
// test suite runs through PoCL on machines without a GPU.
#ifndef ATTNGEN_GENERATORS_SCHEDULE_GPU_H
#define ATTNGEN_GENERATORS_SCHEDULE_GPU_H

#include "Halide.h"
#include "layout.h"
#include "schedule_knobs.h"
#include "stages.h"

namespace attngen {

// Tile sizes of the GPU schedules, one int per knob of ATTNGEN_GPU_SCHEDULE_KNOBS
// (schedule_knobs.h); 0 = the default (resolve_gpu_knobs). Each is a GeneratorParam of the
// generators so the autotuner can set them on a machine with a GPU.
struct GpuScheduleKnobs {
#define ATTNGEN_KNOB_FIELD(name, max, values, what) int name = 0;
    ATTNGEN_GPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_FIELD)
#undef ATTNGEN_KNOB_FIELD
};

GpuScheduleKnobs resolve_gpu_knobs(GpuScheduleKnobs knobs);

// Whether a projection's result is the pipeline's output, whose bounds the caller's buffer
// gives (the generator constrains it to start at feature 0, which the runtime always passes), or
// a stage inside it.
enum class ProjectionResult { Inside, Output };

// The few-rows path GPU projections are defined with (define_projection's FewRowsPath): its
// split is the knobs' gpu_few_rows_split, which schedule_projection_gpu must then be given.
FewRowsPath gpu_few_rows_path(const GpuScheduleKnobs &knobs);

// The staged path GPU projections of many outputs are defined with (define_projection's
// StagedPath).
StagedPath gpu_staged_path();

// result is computed at root by one of three kernels of register-tiled threads, specializations
// chosen by the call's size: the staged path's, which stages chunks of the operands in shared
// memory (p must have it, as gpu_staged_path gives it: a CompileError otherwise), the short
// path's, and with a few-rows path, that path's.
void schedule_projection_gpu(ProjectionStage &p, const GpuScheduleKnobs &knobs,
                             ProjectionResult where = ProjectionResult::Inside);

// The attention that materializes the probabilities, for the weights output (without it the
// flash kernel runs): scores are one tiled kernel, the probabilities one kernel per block of
// queries with its softmax statistics fused into it, probs x values one more. See
// schedule_gpu.cpp.
void schedule_attention_gpu(AttentionStage &a, const GpuScheduleKnobs &knobs);

// The flash attention (define_flash_attention with fixed blocks of gpu_query_block queries and
// gpu_key_block keys): one kernel, a GPU block per query block streaming the key blocks, with
// no q_len x kv_len buffer.
void schedule_flash_attention_gpu(FlashAttentionStage &a, const GpuScheduleKnobs &knobs);

// Calls whose key and value head sizes are both at most kSmallFlashHead run a second flash
// kernel, with the knobs small_head_flash_knobs gives (gpu_small_head_key_block and
// gpu_small_head_value_tile in place of gpu_key_block and gpu_value_tile). Its larger key blocks
// and value tiles need more shared memory per head feature than a launch may have at heads of
// 128 (schedule_gpu.cpp).
constexpr int kSmallFlashHead = 64;
GpuScheduleKnobs small_head_flash_knobs(const GpuScheduleKnobs &resolved);

// The tail of a GPU schedule's split where outputs, and stages whose reads reach the mask
// inputs, must not run past their extents.
constexpr Halide::TailStrategy kGpuExact = Halide::TailStrategy::GuardWithIf;

// Keys of one split-KV decode block's thread row (a warp): every split is a multiple of it.
constexpr int kGpuDecodeKeyThreads = 32;
// Rows (query heads of one key/value head times queries) per split-KV decode block. Rows past a
// call's last (a group of 4 at one query filled half of a block of 8) are computed and dropped:
// blocks of 8 rows to 4 took long-decode's split kernel from 303 to 194 us, llama3-8b-decode's
// from 62 to 60 (ncu, H200, 2026-12-04, a warp per row).
constexpr int kGpuDecodeRows = 4;

// The split-KV decode (FlashDecoding, schedule_gpu_decode.cpp): one kernel with a GPU block per
// (split, block of kGpuDecodeRows rows, key/value head and item), then one that merges the splits
// per row (a block per 32 value features and row, whose threads share the row's splits). A block
// keeps its split's scores and probabilities in shared memory, so the split is a constant: the
// resolved gpu_decode_split_keys (default 128, a multiple of 32 up to 256), which the stage must
// have been defined with (define_decode_attention with DecodeSplit::Fixed). The resolved
// gpu_decode_rows_per_thread picks the split kernel's threads: a warp per row (1, the default),
// or every row of the block per thread, so that the block reads each key and value once
// (kGpuDecodeRows; its 16-byte value loads need the cache laid out as the runtime allocates it).
void schedule_decode_attention_gpu(DecodeAttentionStage &a, const GpuScheduleKnobs &knobs);

// Whether schedule_decode_attention_gpu's split kernel, at these knobs, loads the cache 16 bytes
// at a time and so needs constrain_device_cache_layout on both cache buffers. Only that kernel
// takes the constraints: the default one stays the kernel that was timed.
bool decode_needs_device_cache_layout(const GpuScheduleKnobs &knobs);

// A device KV cache's buffer (the keys' or the values', as MhaDecodeGenerator takes them)
// constrained to the layout the runtime allocates (kv_cache_device.cpp: dense, from 0), so that
// Halide proves a split-KV thread's values one aligned wide load. A buffer of other mins,
// extents or strides is refused with an error; the 16-byte alignment is assumed, not checked
// (Halide checks a host pointer's; device allocations are aligned to 256 bytes).
template <typename CacheBuffer>
void constrain_device_cache_layout(CacheBuffer &cache) {
    static_assert(kCacheValuePanel == kCacheKeyBlock);
    cache.set_host_alignment(16);
    cache.dim(0).set_extent(kCacheValuePanel);
    Halide::Expr stride = kCacheValuePanel;
    for (int i = 0; i < cache.dimensions(); i++) {
        cache.dim(i).set_min(0);
        if (i == 0) continue;
        cache.dim(i).set_stride(stride);
        stride = stride * cache.dim(i).extent();
    }
}

// A rotary angle table (the cos or the sin of define_rope_angles), at root on the host.
void schedule_rope_angles_gpu(Halide::Func angles, const RopeInputs &rope);

// f(x, y, z, w) at root, one thread per element: 32 x 8 tiles of (x, y), a block per tile and
// (z, w).
void schedule_elementwise_gpu(Halide::Func f);

// Rotated heads (apply_rope) at root, one thread per feature and position: read inline, the
// rotation was recomputed at every read of the score tiles (bert-512-b8 on an H100: 11.0 to
// 19.5 ms).
void schedule_rotated_heads_gpu(Halide::Func rotated);

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_SCHEDULE_GPU_H
