// The schedule knobs, defined once. Every consumer reads this list: the knob structs of the
// schedules (schedule_cpu.h, schedule_gpu.h), the generators' GeneratorParams
// (generators.cpp), the autotuner's search space (autotune/search_space.cpp), and CMake's list
// of knobs a tuned file may set (cmake/AttngenTunedParams.cmake parses the KNOB lines below;
// tests/knobs checks that it reads the same list the compiler does).
//
// KNOB(name, max, tuner values, what it controls): the knob takes 0 ("derived from the
// target": resolve_cpu_knobs, resolve_gpu_knobs) to max; the autotuner draws from the tuner
// values. Plain C++, free of Halide, so that the autotuner and the tests can include it.
#ifndef ATTNGEN_GENERATORS_SCHEDULE_KNOBS_H
#define ATTNGEN_GENERATORS_SCHEDULE_KNOBS_H

#include <string>
#include <vector>

// clang-format off
// Register tiles beyond these tuner values spill on every target attngen has (16 or 32 vector
// registers); gemm_vectors times the vector width must divide the weight padding (64 floats),
// which 1, 2 and 4 do for 4-, 8- and 16-float vectors. key_block is a multiple of 16
// (kReductionLanes).
// On a register tile narrower than a weight panel (AVX2, SSE, NEON), gemm_k_block blocks only
// float32 reductions over more than 512 features; shorter ones and bfloat16 pairs take at most
// 64 (schedule_cpu_tiles.h, kShortReductionBlock).
#define ATTNGEN_CPU_SCHEDULE_KNOBS(KNOB)                                                           \
    KNOB(gemm_vectors, 8, (1, 2, 4), "vectors across output features in a projection register tile") \
    KNOB(gemm_rows, 16, (2, 4, 6, 8, 12), "rows in a projection register tile")                    \
    KNOB(gemm_row_tiles, 64, (1, 2, 4, 8, 16, 22, 32), "register tiles of rows per parallel projection task") \
    KNOB(gemm_k_block, 65536, (128, 256, 512, 1024), "input features per block of a projection reduction") \
    KNOB(query_block, 512, (8, 16, 32, 64, 128), "queries per parallel attention task")            \
    KNOB(long_query_block, 512, (64, 128, 256),                                                   \
         "queries per attention task when a head's keys and values exceed L2 (flash)")            \
    KNOB(score_vectors, 4, (1, 2, 4), "vectors across keys in a score register tile")              \
    KNOB(score_rows, 8, (2, 4, 6, 8), "queries in a score register tile")                          \
    KNOB(out_vectors, 4, (1, 2, 4), "vectors across value features in a probs x values tile")      \
    KNOB(out_rows, 8, (2, 4, 6, 8), "queries in a probs x values register tile")                   \
    KNOB(key_block, 1024, (64, 128, 256, 512, 768), "keys per block of the flash attention (multiple of 16)") \
    KNOB(decode_split_keys, 8192, (128, 256, 512, 1024),                                           \
         "cached keys per parallel split of the decode kernel (multiple of 16)")

// GPU blocks (schedule_gpu.cpp): projection rows a multiple of its 4-row thread tile, at most
// 64 (a block's accumulators and staged operands within 48 KiB of shared memory), query
// blocks and key tiles that keep a block within 1024 threads; the flash kernel's query block a
// multiple of its query tile, its key blocks multiples of 16. The small-head flash kernel's
// limits keep it within the 48 KiB of shared memory a CUDA launch may have at heads of 64
// (schedule_gpu.h, kSmallFlashHead): 128 keys or value tiles of 8 would pass it. The few-row
// knobs have their defaults as their one tuner value: the tuner times the forward at its shapes'
// many rows, which never take that path, so other values would only multiply its draws; a build
// sets them (ATTNGEN_GPU_SCHEDULE_PARAMS) to time them on decoding. gpu_decode_split_keys and
// gpu_decode_rows_per_thread likewise (the decode kernel alone reads them; the tuner does not
// search them).
#define ATTNGEN_GPU_SCHEDULE_KNOBS(KNOB)                                                           \
    KNOB(gpu_gemm_rows, 64, (16, 32, 64), "rows of a GPU projection block of many outputs")        \
    KNOB(gpu_query_block, 64, (4, 8, 16, 32), "queries per GPU attention block")                   \
    KNOB(gpu_key_block, 128, (16, 32, 64), "keys per shared-memory tile of GPU probs x values")    \
    KNOB(gpu_query_tile, 8, (1, 2, 4), "queries per thread of the GPU flash attention's register tiles") \
    KNOB(gpu_value_tile, 8, (1, 2, 4), "value features per thread of the GPU flash attention's probs x values tile") \
    KNOB(gpu_small_head_key_block, 64, (32, 64), "gpu_key_block where both head sizes are at most kSmallFlashHead") \
    KNOB(gpu_small_head_value_tile, 4, (2, 4), "gpu_value_tile where both head sizes are at most kSmallFlashHead") \
    KNOB(gpu_few_rows_split, 256, (32), "threads sharing each output's reduction in a GPU projection of few rows (decoding)") \
    KNOB(gpu_few_rows_columns, 64, (64), "output features per block of a GPU projection of few rows (4 to 64, dividing 64)") \
    KNOB(gpu_decode_split_keys, 256, (128), "keys per split of the GPU split-KV decode (a multiple of 32)") \
    KNOB(gpu_decode_rows_per_thread, 4, (1),                                                       \
         "GPU split-KV decode rows per thread: 1 (a warp per row) or 4 (all of its block's)")

#define ATTNGEN_SCHEDULE_KNOBS(KNOB) ATTNGEN_CPU_SCHEDULE_KNOBS(KNOB) ATTNGEN_GPU_SCHEDULE_KNOBS(KNOB)
// clang-format on

namespace attngen {

// One knob of the table above, as data.
struct ScheduleKnob {
    std::string name;
    bool gpu;
    int max;
    std::vector<int> tuner_values;
    std::string what;
};

#define ATTNGEN_KNOB_VALUES(...) \
    { __VA_ARGS__ }
#define ATTNGEN_CPU_KNOB_ENTRY(name, max, values, what) \
    ScheduleKnob{#name, false, max, ATTNGEN_KNOB_VALUES values, what},
#define ATTNGEN_GPU_KNOB_ENTRY(name, max, values, what) \
    ScheduleKnob{#name, true, max, ATTNGEN_KNOB_VALUES values, what},

inline const std::vector<ScheduleKnob> &schedule_knobs() {
    static const std::vector<ScheduleKnob> knobs = {ATTNGEN_CPU_SCHEDULE_KNOBS(
        ATTNGEN_CPU_KNOB_ENTRY) ATTNGEN_GPU_SCHEDULE_KNOBS(ATTNGEN_GPU_KNOB_ENTRY)};
    return knobs;
}

#undef ATTNGEN_CPU_KNOB_ENTRY
#undef ATTNGEN_GPU_KNOB_ENTRY

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_SCHEDULE_KNOBS_H
