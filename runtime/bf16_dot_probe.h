// Whether this CPU's bfloat16 dot product (vdpbf16ps) outruns its float32 FMA.
#ifndef ATTNGEN_RUNTIME_BF16_DOT_PROBE_H
#define ATTNGEN_RUNTIME_BF16_DOT_PROBE_H

namespace attngen::rt {

// Multiply-adds per second of the two instructions, one thread, measured back to back.
struct DotProductRates {
    double bf16_dot = 0;  // vdpbf16ps: 32 per instruction
    double fp32_fma = 0;  // vfmadd on 16 floats: 16 per instruction
};

// Zero rates where the CPU lacks AVX512-BF16 (or is not x86). Five short timed loops of each
// instruction (about 0.1-0.2 ms on a 2-3 GHz core, by the rates; not timed), the fastest of
// each kept.
DotProductRates measure_dot_product_rates();

// The rates of the process's one measurement (the first call measures): what
// bf16_dot_product_pays decides from.
const DotProductRates &process_dot_product_rates();

// Whether the bfloat16 kernels' AVX512-BF16 variant pays on this CPU, from
// process_dot_product_rates, so every kernel of the process makes the same choice.
// Where vdpbf16ps does two multiply-adds per float32 lane in an FMA's time (AMD Zen 4: 461
// against 232 GFLOP/s), it does. Where it issues at a quarter of the FMA's rate, half the
// multiply-adds (an Intel Xeon of family 6, model 207: 162-168 against 322-336 GFLOP/s on 2 cores,
// attngen_bench fma_peak_bf16 and fma_peak), the float32 variant, multiplying the same bfloat16
// values as float32 (widened weights, attention's rounded operands), runs the bfloat16 forward
// faster.
bool bf16_dot_product_pays();

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_BF16_DOT_PROBE_H
