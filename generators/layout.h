// Facts about data layout shared by the generators and the runtime that calls them.
// Kept free of Halide so that runtime/ can include it.
#ifndef ATTNGEN_GENERATORS_LAYOUT_H
#define ATTNGEN_GENERATORS_LAYOUT_H

namespace attngen {

// The kernels take at most this many heads, and features per head (the bounds of their Inputs);
// attngen_mha_create and attngen/specialized.hpp refuse more.
constexpr int kMaxPerHead = 1 << 16;

// The kernels take projection weights transposed, with out zero-padded to a multiple of this
// many features and stored in panels of that many outputs (weight_panel_columns below), and
// biases zero-padded likewise. The padding lets a register tile of the projection run past the last
// output feature without reading outside the buffer, so its loops need no tail case. Every
// projection tile width must divide it (the generators check).
constexpr int kWeightPadding = 64;

// Bfloat16 weights for CPUs are stored in pairs of consecutive input features, the pair
// innermost: (2 o + f % 2, f / 2) in place of (o, f), the odd count's last pair completed with 0.
// Each pair is one lane of vdpbf16ps (ProjectionStage::paired).
constexpr int kWeightPairs = 2;
// Rows of stored weights for in_features input features: pairs of them for bfloat16 pairs (the
// odd count's last pair completed with 0), one each otherwise. Int is int or Halide::Expr, so
// that the runtime's packing and the kernels' view count them alike.
template <typename Int>
Int stored_weight_rows(const Int &in_features, bool pairs) {
    return pairs ? Int((in_features + 1) / kWeightPairs) : in_features;
}

// GPU kernels multiply float32 (the 16-bit formats widened), so bfloat16 weights for a GPU are
// stored as float16 ones are, one feature per row: a projection thread's 4 outputs of a feature
// are then one 8-byte load, and decoding's matrix-vector products take the few-rows path. In
// pairs, an H100 ran llama3-8b-decode in 7.01 ms in bfloat16 against 0.548 in float32.
constexpr bool weights_in_pairs(bool bfloat16, bool gpu) {
    return bfloat16 && !gpu;
}

// Whether a GPU kernel takes 16-bit weights as their bits (uint16), widened to float32 and their
// operands rounded to the format in integer arithmetic (generators/stages.h,
// storage_bits_as_float), rather than as Halide's 16-bit float type. OpenCL C holds float16 only
// with the cl_half feature, which NVIDIA's OpenCL lacks, and Halide 21's PTX backend failed an
// LLVM assertion on bfloat16 weights; float16 on CUDA is a hardware type, one cvt instruction
// each way. As bits, float16's widening (rebias, subnormals, infinities) took a dozen integer
// operations per weight inside the projections' reductions: on an H200, CUDA forwards with
// float16 weights took 1.6-2.4x the time of float32 ones below bert-512-b8, and as float16
// 0.99-1.10x (bench/RESULTS.md).
constexpr bool half_weights_as_bits(bool bfloat16, bool gpu, bool cuda) {
    return gpu && (bfloat16 || !cuda);
}
// define_projection reads weights as bits as a GPU's, one feature per row (weights_in_pairs):
// bfloat16 taken as Halide's type on a GPU would be read in pairs the runtime does not pack.
static_assert(half_weights_as_bits(true, true, true) && half_weights_as_bits(true, true, false),
              "a GPU's bfloat16 weights are bits");

// A KV cache, and the rows a GPU kernel projects into it, keep the 16-bit formats as bits on every
// GPU target: as float16 on CUDA, the cache's store kernel (one for both formats' bits) would
// need a variant of its own.
constexpr bool half_cache_as_bits(bool gpu) {
    return gpu;
}
// Whether a kernel that holds float16 as bits converts them with float16 instructions, the bits
// reinterpreted as Halide's float16 (CUDA: one cvt each way), rather than in integer arithmetic
// (rebias, subnormals, infinities: a dozen operations per element). OpenCL C would need cl_half.
// In integer arithmetic, CUDA's float16 decoding step took 1.24-1.46x the bfloat16 step's time
// on an H200 (llama3-8b-decode, its batch of 8, long-decode; bench/RESULTS.md).
constexpr bool float16_bits_by_instruction(bool cuda) {
    return cuda;
}

// Stored weights (columns o, or 2 o + f % 2 for bfloat16 pairs; rows f, or f / 2) are laid out
// in panels of weight_panel_outputs outputs: panel by panel, and within a panel row by row, so
// that a register tile's panel is one contiguous run of memory, read front to back. Element
// (column, row) is at panel_columns * (rows * (column / panel_columns) + row) + column %
// panel_columns. As [in, out] rows, each step of a tile read a new weight row (3 to 16 KiB away),
// and the projections copied each block of a panel together first (8-15% of their samples in
// perf). The fused kernels take them as a 3-D buffer (pair element, output in panel, row + rows
// * panel), the pair element's extent 1 where there are no pairs; attngen_linear's packed form
// as a 2-D one (row * panel columns + column in panel, panel).
//
// Bfloat16 pairs come in panels of 16 outputs, one AMX tile's columns (a 64-byte row): the AMX
// variant's tile products then read each tile in place, one contiguous KiB per 32 features
// (generators/stages.h, AmxPath). Stand-alone, 2 threads, Intel Xeon with AMX (bench/
// cpu_experiments/amx_projection.cpp): copied into tiles every call from panels of 64 outputs,
// the projections ran at 0.8-1.9 TFLOP/s; read in place from panels of 64, 1.1-1.7; from panels
// of 16, 1.5-2.3. The bfloat16 forward in the AMX variant, against the copy: 0.93-1.21x by shape
// (bench/RESULTS.md); the AVX512-BF16 variant's register tiles, which now read 4 panels a row,
// 0.97-0.99x, its decoding 1.06-1.15x.
constexpr int kPairPanelOutputs = 16;
constexpr int weight_panel_outputs(bool bfloat16_pairs) {
    return bfloat16_pairs ? kPairPanelOutputs : kWeightPadding;
}
constexpr int weight_panel_columns(bool bfloat16_pairs) {
    return bfloat16_pairs ? kWeightPairs * kPairPanelOutputs : kWeightPadding;
}
static_assert(kWeightPadding % kPairPanelOutputs == 0, "panels tile the padded outputs");

// The GPU schedule's projection blocks (kWeightPadding features, register tiles of 4 inside
// them, guarded at the edge) get a loose bound from Halide's interval analysis: up to one block
// past the padded width. Weights for a GPU carry that much more zero padding.
constexpr int kGpuExtraWeightPadding = kWeightPadding;

// Projections over at most this many input features take the direct path (DirectPath,
// generators/schedule_cpu_projection.cpp) where a register tile spans a weight panel: a panel of
// kWeightPadding outputs by 1024 features is 256 KiB, which stays in L2 while every row tile of a
// task reads it whole. Blocked instead, each tile's partial sums went through a task's buffer of 64
// outputs by its rows (32 KiB at 128 rows, all of L1), and copying it to the result took 3.4% of a
// projection's samples at bert-512 and 5.7% at bert-128 (perf: the stores, to lines last written by
// the previous call). scripts/ab_runs.py, AVX-512, 2 threads, Zen 4, 3-5 rounds:
// mha_forward/bert-128 1.02-1.08x (three runs), bert-512 and bert-512-b8 1.01x, gpt2-causal,
// long-causal level; mha_forward_bf16/bert-128 1.09x, bert-512 1.03-1.05x, bert-512-b8 1.08x;
// projection/bert-128 1.03-1.08x. A task of the direct path allocates nothing, so the forward of an
// output projection that takes it (heads x v_head_dim at most this) writes its output in place
// (runtime/mha.cpp).
constexpr int kDirectMaxInFeatures = 1024;

// Intel AMX's tiles (the bfloat16 kernels' AMX variant) sum blocks of this many input features
// (16 pairs, 64 bytes a tile row). A projection whose input features are whole blocks keeps no
// sums for a tail, and its tasks then allocate nothing (their tiles' copy is on the stack), so
// a forward whose output projection's input features are whole blocks writes its output in
// place there (runtime/mha.cpp).
constexpr int kAmxBlock = 32;

// Row reductions (max and sum over keys) keep this many partial results per row, combined at
// the end. It is part of the algorithm rather than the schedule so that every target adds in
// the same order; it is a multiple of every vector width in use (NEON 4, AVX2 8, AVX-512 16).
constexpr int kReductionLanes = 16;

// Attention packs the keys in panels of this many, (key % panel, feature, key / panel): a score
// tile reads each panel front to back (PackedScore::k_panels). It divides every key block
// (multiples of kReductionLanes), so that Halide proves a vector of a tile's keys lies in one
// panel and loads it whole; 16 is one AVX-512 vector, two AVX2 or four NEON vectors.
constexpr int kKeyPanel = kReductionLanes;

// A KV cache stores its keys in blocks of this many positions, (position % block, feature,
// block, kv head, item): the keys of a block are one contiguous run, which the decode kernel
// streams. With positions innermost over the whole cache, each feature's row of a block was
// 1 KiB every max_len * 4 bytes (128 KiB at 32768 positions), a new page per row, and the
// decode kernel read the cache at 28% of the machine's read bandwidth (long-decode). Blocks
// of 256 positions still made a score tile (32 keys) read 128 bytes of every 1 KiB feature
// row, striding through the block once per tile; a block of 32 is exactly an AVX-512 score
// tile, read front to back. It is a multiple of every vector width in use.
constexpr int kCacheKeyBlock = 32;

// A KV cache stores its values in panels of this many features, (feature % panel, position,
// panel, kv head, item), the last panel padded with zeros: a decode tile of a panel's features
// reads one contiguous run over its keys. With features innermost, a row of 128 float32
// features was 512 bytes, and the AVX2 variant's tiles (4 vectors of 8 features by 2 rows) read
// it in four passes of 128 bytes, each a stream of every fourth pair of lines. The loop
// modelled in C++ (bench/cpu_experiments/decode_value_layout_model.cpp, long-decode's 128 MiB of
// values, 2 threads, Zen 3): 5.0-7.0 GB/s in rows against 6.5-12.8 in panels (1.29-2.17x per
// round, 8 rounds), a plain read 10.4-17.2. 32 features are one AVX2 or NEON value tile and a
// quarter of an AVX-512 one (four runs side by side); a float32 panel step is two cache lines,
// a 16-bit one one. Heads that are not a multiple of it pay its padding in memory (80 features
// take 96).
constexpr int kCacheValuePanel = 32;

// A cached forward (attngen_mha_forward_cached) of at least this many queries per item, a
// prompt, runs the flash kernel on CPUs; with fewer, the steps of decoding, the split-KV kernel
// (MhaDecodeGenerator). Against a long cache it takes one query per kCacheFlashKeysPerQuery
// cached positions as well: the flash kernel packs the keys and values on every call and reads
// them once per query block and head, where the split-KV kernel reads the cache in place once.
constexpr int kCacheFlashMinQueries = 64;
constexpr int kCacheFlashKeysPerQuery = 128;

constexpr int round_up(int x, int multiple) {
    return (x + multiple - 1) / multiple * multiple;
}

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_LAYOUT_H
