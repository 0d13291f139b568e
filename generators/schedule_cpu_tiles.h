// What the CPU schedules (schedule_cpu*.cpp) share, not part of the generators' interface: the
// target's vector width and register file, the register tiles of every matrix product sized
// from them, the transposing copy, AMX tile products, and the constants that more than one kind
// of stage reads.
#ifndef ATTNGEN_GENERATORS_SCHEDULE_CPU_TILES_H
#define ATTNGEN_GENERATORS_SCHEDULE_CPU_TILES_H

#include <optional>
#include <utility>
#include <vector>

#include "Halide.h"
#include "schedule_cpu.h"

namespace attngen {

// Input features per block of a projection's reduction where the register tile is narrower than
// a weight panel and the reduction short (at most kShortReductionFeatures): the panel's block,
// 16 KiB, then stays in L1 for the tile columns after the first. Longer reductions take
// gemm_k_block (resolve_cpu_knobs).
constexpr int kShortReductionBlock = 64;
constexpr int kShortReductionFeatures = 512;
// gemm_k_block derived for AVX2's narrow tiles, used past kShortReductionFeatures
// (resolve_cpu_knobs has the measurements).
constexpr int kAvx2LongReductionBlock = 512;
// At most this many rows, a decoding projection splits its reduction (schedule_split_reduction),
// and the other stages of so few rows (a projection's rounded operand, the rows appended to the
// KV cache) run on one thread: waking the others costs more than their work.
constexpr int kSplitReductionMaxRows = 8;

// Floats per vector of the target.
int vector_width(const Halide::Target &target);

// AArch64 (NEON) and AVX-512 have 32 vector registers, AVX2 and SSE 16. Halide 21 implies no
// feature from another: a target string of avx512_skylake or avx512_zen4, as the dispatch
// variants are named, lacks Target::AVX512 itself, so each flavour is asked for. (Asking for
// AVX512 alone gave the AVX-512 variants AVX2's tiles.)
bool wide_register_file(const Halide::Target &target);

// The target's vector registers: 32 with a wide register file, 16 otherwise.
int vector_registers(const Halide::Target &target);

// Whether a projection register tile of `vectors` vectors covers a whole weight panel: a
// narrower one shares its panel's blocks of weights with the next tile columns.
bool tile_spans_panel(int vectors, const Halide::Target &target);

// Whether a register tile of `vectors` vectors by `rows` rows fits the target's registers: it
// keeps vectors * rows accumulators plus `vectors` loaded operands and one broadcast live.
bool tile_fits(int vectors, int rows, const Halide::Target &target);

// a / b rounded up, for non-negative a and positive b.
Halide::Expr ceil_div(const Halide::Expr &a, const Halide::Expr &b);

// A transposing copy, f(x, y) = source(y, x, ...) with y dense in the source: tiles of
// vec x vec, each staged through a small buffer filled with dense vector loads of the source
// and read back transposed. For the keys (head_dim 64) it took the packing from 3.4% to 2.1%
// of an attngen_sdpa call at bert-512 (perf, two runs each); vectorized along x alone, every
// lane was a separate scalar load.
// y_extent is the extent of y that f's consumers ask for, from 0, never more: where it is at least
// a tile (y_extent >= vec), the last tile is shifted inwards, not guarded, so that the tile's
// strided reads of the buffer are one block, which LLVM partly combines into permutes.
// attngen_parallel_timeline bert-512, AVX-512, Zen 4, with the source staged by its unclamped key
// (stages.cpp, k_rows): the keys' panels 124 -> 107 us, the bfloat16 keys' rows 125 -> 106 us;
// sdpa/tutorial 1.02x (scripts/ab_runs.py, 3 rounds), the forwards level. With `specialize_on`
// defined, the staging has a branch for it as well (the source is an inline expression that it
// simplifies).
// x_tail is RoundUp where f may be computed past its consumers' region along x (f is not an
// output and its source may be read there): the last tile of x is then whole, not guarded.
void schedule_transpose(Halide::Func f, Halide::Func source, const Halide::Var &x,
                        const Halide::Var &y, const Halide::Expr &y_extent, int vec,
                        Halide::TailStrategy x_tail,
                        const Halide::Expr &specialize_on = Halide::Expr());

// The reduction of a register tile: its steps (innermost first), and with bfloat16 products
// (ProjectionStage::paired, PackedScore::paired) a pair of features inside each step. A pair
// becomes one vdpbf16ps lane where the target has it; elsewhere its two products are unrolled
// FMAs. With first_pair, the tile's Func has two updates: the first pair's products alone
// (first_pair, over the pair's two features), then the steps.
struct TileReduction {
    TileReduction(const Halide::RDom &r) : steps{r.x} {}  // NOLINT: a 1-D RDom is the common case
    // A 2-D RDom whose x is the pair when paired; `first`, where defined, the first pair's RDom.
    TileReduction(const Halide::RDom &r, bool paired, const Halide::Target &target,
                  const Halide::RDom &first = Halide::RDom())
        : TileReduction(paired ? std::vector<Halide::RVar>{r.y} : std::vector<Halide::RVar>{r.x},
                        paired ? std::optional<Halide::RVar>(r.x) : std::nullopt, target) {
        if (first.defined()) first_pair = first.x;
    }
    TileReduction(std::vector<Halide::RVar> steps, std::optional<Halide::RVar> pair,
                  const Halide::Target &target)
        : steps(std::move(steps)),
          pair(std::move(pair)),
          dot_product(this->pair && has_bfloat16_dot_product(target)) {}
    std::vector<Halide::RVar> steps;
    std::optional<Halide::RVar> pair;
    std::optional<Halide::RVar> first_pair;
    bool dot_product = false;
};

// A register tile's update, the loops of one step innermost: the lanes of the columns
// vectorized, their vectors and the rows unrolled, then the reduction's steps.
void order_tile_update(Halide::Stage update, const Halide::Var &lanes, const Halide::Var &vectors,
                       const Halide::Var &rows, const TileReduction &reduction);

// A register tile's shape for the calls where `when` holds (schedule_register_tile_at).
struct TileShape {
    Halide::Expr when;
    int vectors, rows;
};

// How a tile's Func reads the accumulators: in loops over its rows and vectors, or unrolled.
// Unrolled, every read is at a constant place in acc's constant-size buffer, and LLVM takes it
// from the register that holds it instead of storing the tile and loading it back. The flash
// kernel's two tiles take it: in its scores' loop LLVM had kept three of the eight row pointers
// of the broadcasts on the stack (reloaded at every step, perf of sdpa/bert-512, Intel Xeon
// with AMX), and the block's logits loaded each accumulator from memory. With both unrolled,
// scripts/ab_runs.py, 3 rounds, AVX-512, 2 threads, same host: sdpa/ bert-128 1.02x, bert-512
// 1.03x, bert-512-b8 1.02x, gpt2-causal 1.01x, long-causal 1.04x, long-single 1.03x;
// mha_forward/ 0.99-1.04x; AVX2 variant, sdpa/ 1.00-1.03x (bench/RESULTS.md, 2026-11-29).
// So do the two tiles of the attention that also returns the weights (schedule_attention_cpu,
// since session 91), so Unrolled is the default. The decode kernel's tiles (several shapes each)
// ask for the loops: they lost unrolled, decode/llama3-8b-decode 0.91x (2 rounds).
// An unrolled tile's first term (the reduction's first step, which sets the accumulators) is
// unrolled likewise where it is a float32 product. In a loop over each row's vectors it went
// through a stack buffer, a multiply and a store per vector and then a load of each before the
// update's loop: 3.0% of the attention task's samples at sdpa/bert-512 (perf annotate, AVX-512,
// Zen 5). scripts/paired_ab.py, old/new, two runs of 10 pairs: mha_forward/ long-single 1.013x
// and 1.012x, long-causal 1.014x and 1.011x, bert-512-b8 1.011x and 1.004x, bert-512 0.996x and
// 1.008x, gpt2-causal 1.010x and 0.998x, bert-128 1.009x and 0.995x; the AVX2 kernels (sdpa/,
// 3 rounds) level to 1.01x. The decode kernel's tiles lost with their first term unrolled
// too: decode_bf16/long-decode 0.967-0.970x (16 pairs, twice). A vdpbf16ps tile starts from
// zeros, and its first pair is an update of its own (TileReduction::first_pair), unrolled like
// the rest, so that the steps' loop starts from products as a float32 tile's does. With the
// zeros unrolled and added to in the loop, LLVM moved every accumulator to another register at
// each step (16 vmovaps beside the score tile's 16 vdpbf16ps; the bfloat16 forward 0.97-0.98x).
// With the zeros in a loop, LLVM had made them a memset, which left the tile in registers,
// until its loop idioms were turned off (llvm_options.cpp): then each tile went through a stack
// buffer, its accumulators loaded before the steps' loop and stored after it.
// scripts/paired_ab.py --bf16, AVX512-BF16 variant, Zen 4, 2 threads, zeros in a loop against
// the first pair apart: long-single 1.056x and 1.020x, long-causal 1.027x, bert-512-b8 1.013x
// and 1.026x, the others level (bench/RESULTS.md, session 89).
enum class TileCopy { Loops, Unrolled };

// A register-blocked reduction computed inside a larger loop nest (a query block of attention,
// or a key block of it): `vectors` vectors along `columns` by `rows_per_tile` rows of
// accumulators, unrolled, with the reduction loop just outside them, so each step of the
// reduction loads `vectors` vectors and broadcasts `rows_per_tile` scalars. A wrapper Func covers
// the region `at` needs in whole tiles, and the reduction is computed per tile into a buffer of
// constant size, fully unrolled, which LLVM keeps in registers. (Scheduled directly at `at`, the
// accumulators of the probs x values tile stayed in memory: a load, an FMA and a store per step,
// which perf showed as half the kernel's time.)
// With `shapes`, calls where a shape's `when` holds (the first that does) get tiles of its
// `vectors` vectors by `rows` rows instead, each specialization with constant tiles of its own.
void schedule_register_tile_at(Halide::Func acc, const Halide::LoopLevel &at,
                               const Halide::Var &columns, const Halide::Var &rows,
                               const TileReduction &reduction, int vectors, int rows_per_tile,
                               int vec, const std::vector<TileShape> &shapes = {},
                               const std::vector<Halide::Expr> &when = {},
                               TileCopy copy = TileCopy::Unrolled);

// schedule_register_tile_into: the tiles are those of `tile`, a pure Func over (tile_columns,
// tile_rows) in place of the wrapper, which reads each accumulator of acc once, at the same
// position in its tile, so that it takes the accumulators from registers. Each condition in
// `when` gives `tile` a specialization of its own, with the same tiles.
void schedule_register_tile_into(Halide::Func acc, Halide::Func tile, const Halide::LoopLevel &at,
                                 const Halide::Var &columns, const Halide::Var &rows,
                                 const Halide::Var &tile_columns, const Halide::Var &tile_rows,
                                 const TileReduction &reduction, int vectors, int rows_per_tile,
                                 int vec, const std::vector<TileShape> &shapes = {},
                                 const std::vector<Halide::Expr> &when = {},
                                 TileCopy copy = TileCopy::Unrolled);

// An AMX product (ProjectionStage::amx_tiles, AmxAttention): `out`(x, y, t, ...), the copy of
// `tiles` to memory, computed at `at` in tiles of kAmxTile x kAmxTile over (x, y), the tiles of
// t inside those of y; `tiles` computed per tile in a tile register, its reduction r's blocks
// outside the tile and each block (r.x) one tdpbf16ps. `out` is stored as (x, t, y, ...): a
// tile's rows are then a stride apart that is not its width, the 2-D store that Halide 21 turns
// into tilestored (stored (x, y, t), a tile was one dense run of 256 floats, which it does not).
void schedule_amx_product(Halide::Func out, Halide::Func tiles, const Halide::RDom &r,
                          const Halide::LoopLevel &at);

}  // namespace attngen

#endif  // ATTNGEN_GENERATORS_SCHEDULE_CPU_TILES_H
