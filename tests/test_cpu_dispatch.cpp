// The run-time choice of the bfloat16 kernels' AVX512-BF16 variant (runtime/bf16_dot_probe.h).
#include <gtest/gtest.h>

#include "bf16_dot_probe.h"

namespace {

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

TEST(CpuDispatch, Bf16DotProbeMeasuresBothInstructionsWhereTheCpuHasThem) {
    const attngen::rt::DotProductRates rates = attngen::rt::measure_dot_product_rates();
    if (!cpu_has_avx512_bf16()) {
        EXPECT_EQ(rates.bf16_dot, 0.0);
        EXPECT_EQ(rates.fp32_fma, 0.0);
        EXPECT_FALSE(attngen::rt::bf16_dot_product_pays());
        return;
    }
    // One core does between a billion and a few hundred billion multiply-adds a second: a rate
    // outside means a loop the compiler removed or a clock misread.
    for (double rate : {rates.bf16_dot, rates.fp32_fma}) {
        EXPECT_GT(rate, 1e9);
        EXPECT_LT(rate, 1e12);
    }
    RecordProperty("bf16_dot_madds_per_s", std::to_string(rates.bf16_dot));
    RecordProperty("fp32_fma_madds_per_s", std::to_string(rates.fp32_fma));
}

TEST(CpuDispatch, Bf16DotChoiceIsMadeOncePerProcess) {
    const bool first = attngen::rt::bf16_dot_product_pays();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(attngen::rt::bf16_dot_product_pays(), first);
}

}  // namespace
