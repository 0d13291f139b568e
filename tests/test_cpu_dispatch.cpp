// The run-time choice of CPU variants: the caps of ATTNGEN_CPU_DISPATCH, and the bfloat16 kernels'
// AVX512-BF16 variant (runtime/bf16_dot_probe.h).
#include <HalideRuntime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "bf16_dot_probe.h"
#include "cpu_dispatch.h"

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
    // One core does between a billion and at most a trillion multiply-adds a second: a rate
    // outside means a loop the compiler removed or a clock misread.
    for (double rate : {rates.bf16_dot, rates.fp32_fma}) {
        EXPECT_GT(rate, 1e9);
        EXPECT_LT(rate, 1e12);
    }
    RecordProperty("bf16_dot_madds_per_s", std::to_string(rates.bf16_dot));
    RecordProperty("fp32_fma_madds_per_s", std::to_string(rates.fp32_fma));
}

// Halide's dispatch asks about the bfloat16 kernels' first variant,
// x86-64-linux-avx512_skylake-avx512_zen4, with these feature bits; the answer decides the
// variant every bfloat16 kernel of the process runs.
TEST(CpuDispatch, Bf16VariantIsTakenAsTheEnvironmentAndTheProbeSay) {
    attngen::rt::install_cpu_dispatch_policy();
    constexpr int kWords = (halide_target_feature_end + 63) / 64;
    uint64_t features[kWords] = {};
    for (halide_target_feature_t f :
         {halide_target_feature_avx512_skylake, halide_target_feature_avx512_zen4}) {
        features[f / 64] |= uint64_t(1) << (f % 64);
    }
    const bool cpu_has_them = halide_default_can_use_target_features(kWords, features) != 0;
    const char *env = std::getenv("ATTNGEN_CPU_DISPATCH");
    const std::string cap = env != nullptr ? env : "";
    bool expected = cpu_has_them && attngen::rt::bf16_dot_product_pays();
    if (cap == "avx512" || cap == "avx2" || cap == "sse41" || cap == "baseline") {
        expected = false;
    } else if (cap == "avx512_bf16") {
        expected = cpu_has_them;
    }
    EXPECT_EQ(halide_can_use_target_features(kWords, features) != 0, expected)
        << "ATTNGEN_CPU_DISPATCH=" << cap << ", the CPU has the features: " << cpu_has_them
        << ", vdpbf16ps pays: " << attngen::rt::bf16_dot_product_pays();
    // The AVX-512 variant below it is never refused for bfloat16's sake.
    uint64_t avx512_only[kWords] = {};
    avx512_only[halide_target_feature_avx512_skylake / 64] |=
        uint64_t(1) << (halide_target_feature_avx512_skylake % 64);
    if (cap.empty() || cap == "avx512" || cap == "avx512_bf16") {
        EXPECT_EQ(halide_can_use_target_features(kWords, avx512_only),
                  halide_default_can_use_target_features(kWords, avx512_only));
    }
}

// Each cap of ATTNGEN_CPU_DISPATCH refuses the variants above it (runtime/cpu_dispatch.cpp), on
// either architecture: the feature sets of aarch64's dot-product and float16 variant and of x86's
// AVX-512, AVX2 and SSE4.1 variants (cmake/AttngenHostTargets.cmake). A set the cap leaves is
// answered as the CPU's features answer it.
TEST(CpuDispatch, CapsRefuseTheVariantsAboveThem) {
    attngen::rt::install_cpu_dispatch_policy();
    constexpr int kWords = (halide_target_feature_end + 63) / 64;
    struct Variant {
        std::vector<halide_target_feature_t> features;
        std::vector<std::string> refused_by;  // the caps that refuse it
    };
    const std::vector<Variant> variants = {
        {{halide_target_feature_arm_dot_prod, halide_target_feature_arm_fp16}, {"baseline"}},
        {{halide_target_feature_avx512, halide_target_feature_avx512_skylake},
         {"avx2", "sse41", "baseline"}},
        {{halide_target_feature_avx2, halide_target_feature_fma, halide_target_feature_f16c},
         {"sse41", "baseline"}},
        {{halide_target_feature_sse41}, {"baseline"}},
    };
    const char *env = std::getenv("ATTNGEN_CPU_DISPATCH");
    const std::string cap = env != nullptr ? env : "";
    for (const Variant &v : variants) {
        std::vector<uint64_t> words(kWords, 0);
        for (halide_target_feature_t f : v.features) words[f / 64] |= uint64_t(1) << (f % 64);
        const bool refused =
            std::find(v.refused_by.begin(), v.refused_by.end(), cap) != v.refused_by.end();
        const bool expected =
            !refused && halide_default_can_use_target_features(kWords, words.data()) != 0;
        EXPECT_EQ(halide_can_use_target_features(kWords, words.data()) != 0, expected)
            << "ATTNGEN_CPU_DISPATCH=" << cap << ", first feature " << int(v.features.front());
    }
}

}  // namespace
