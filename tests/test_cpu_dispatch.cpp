// The run-time choice of CPU variants: the caps of ATTNGEN_CPU_DISPATCH, and the bfloat16 kernels'
// AVX512-BF16 variant (runtime/bf16_dot_probe.h).
#include <HalideRuntime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "amx_tile_state.h"
#include "bf16_dot_probe.h"
#include "cpu_dispatch.h"

namespace {

// A set of Halide target features as the bit words its dispatch asks about, and the asking:
// the policy's answer (halide_can_use_target_features) or the CPU's alone.
class FeatureSet {
  public:
    FeatureSet(std::initializer_list<halide_target_feature_t> features) : words_(kWords, 0) {
        for (halide_target_feature_t f : features) words_[f / 64] |= uint64_t(1) << (f % 64);
    }
    bool taken() const {
        attngen::rt::install_cpu_dispatch_policy();
        return halide_can_use_target_features(kWords, words_.data()) != 0;
    }
    bool cpu_has() const {
        return halide_default_can_use_target_features(kWords, words_.data()) != 0;
    }

  private:
    static constexpr int kWords = (halide_target_feature_end + 63) / 64;
    std::vector<uint64_t> words_;
};

// ATTNGEN_CPU_DISPATCH, or "" without it.
std::string DispatchCap() {
    const char *env = std::getenv("ATTNGEN_CPU_DISPATCH");
    return env != nullptr ? env : "";
}

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
    const FeatureSet bf16_variant{halide_target_feature_avx512_skylake,
                                  halide_target_feature_avx512_zen4};
    const bool cpu_has_them = bf16_variant.cpu_has();
    const std::string cap = DispatchCap();
    bool expected = cpu_has_them && attngen::rt::bf16_dot_product_pays();
    if (cap == "avx512" || cap == "avx2" || cap == "sse41" || cap == "baseline") {
        expected = false;
    } else if (cap == "avx512_bf16") {
        expected = cpu_has_them;
    }
    EXPECT_EQ(bf16_variant.taken(), expected)
        << "ATTNGEN_CPU_DISPATCH=" << cap << ", the CPU has the features: " << cpu_has_them
        << ", vdpbf16ps pays: " << attngen::rt::bf16_dot_product_pays();
    // The AVX-512 variant below it, never refused for bfloat16's sake:
    // CapsRefuseTheVariantsAboveThem.
}

// The bfloat16 forward's first variant on x86, x86-64-linux-avx512_skylake-avx512_sapphirerapids:
// taken where Linux grants AMX's tile state, Halide's check of the feature passes, and no cap
// refuses it; the grant itself is CPUID's AMX bits and the kernel's answer, recorded beside the
// test.
TEST(CpuDispatch, AmxVariantIsTakenWhereLinuxGrantsTheTileState) {
    const FeatureSet amx_variant{halide_target_feature_avx512_skylake,
                                 halide_target_feature_avx512_sapphirerapids};
    const std::string cap = DispatchCap();
    const bool refused = cap == "avx512_bf16" || cap == "avx512" || cap == "avx2" ||
                         cap == "sse41" || cap == "baseline";
    const bool granted = attngen::rt::amx_tile_state_granted();
    RecordProperty("amx_tile_state_granted", granted ? "yes" : "no");
    EXPECT_EQ(amx_variant.taken(), !refused && granted && amx_variant.cpu_has())
        << "ATTNGEN_CPU_DISPATCH=" << cap << ", tile state granted: " << granted;
#if defined(__x86_64__)
    // The grant needs the instructions: without AMX-BF16 there is none to give.
    if (!__builtin_cpu_supports("avx512bf16")) {
        EXPECT_FALSE(granted);
    }
#endif
}

// Each cap of ATTNGEN_CPU_DISPATCH refuses the variants above it (runtime/cpu_dispatch.cpp), on
// either architecture: the feature sets of aarch64's dot-product and float16 variant and of x86's
// AVX-512, AVX2 and SSE4.1 variants (cmake/AttngenHostTargets.cmake). A set the cap leaves is
// answered as the CPU's features answer it.
TEST(CpuDispatch, CapsRefuseTheVariantsAboveThem) {
    struct Variant {
        FeatureSet features;
        std::vector<std::string> refused_by;  // the caps that refuse it
        const char *name;
    };
    const std::vector<Variant> variants = {
        {{halide_target_feature_arm_dot_prod, halide_target_feature_arm_fp16},
         {"baseline"},
         "aarch64 dot product and float16"},
        {{halide_target_feature_avx512_skylake}, {"avx2", "sse41", "baseline"}, "AVX-512"},
        {{halide_target_feature_avx2, halide_target_feature_fma, halide_target_feature_f16c},
         {"sse41", "baseline"},
         "AVX2"},
        {{halide_target_feature_sse41}, {"baseline"}, "SSE4.1"},
    };
    const std::string cap = DispatchCap();
    for (const Variant &v : variants) {
        const bool refused =
            std::find(v.refused_by.begin(), v.refused_by.end(), cap) != v.refused_by.end();
        EXPECT_EQ(v.features.taken(), !refused && v.features.cpu_has())
            << "ATTNGEN_CPU_DISPATCH=" << cap << ", the " << v.name << " variant";
    }
}

// The runtime's own loops (the finite scans) follow the same caps: the widest vectors the CPU
// has, AVX2 at most under avx2, the compiler's baseline under sse41 and baseline (and always off
// x86-64). The suite's runs under each cap then test each compilation of the scans
// (test_finite_scan.cpp).
TEST(CpuDispatch, RuntimeLoopsFollowTheCap) {
    using attngen::rt::RuntimeVectors;
    const std::string cap = DispatchCap();
    RuntimeVectors want = RuntimeVectors::kBaseline;
#if defined(__x86_64__)
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    if (cap != "sse41" && cap != "baseline") {
        if (avx512 && cap != "avx2") {
            want = RuntimeVectors::kAvx512;
        } else if (__builtin_cpu_supports("avx2")) {
            want = RuntimeVectors::kAvx2;
        }
    }
#endif
    EXPECT_EQ(int(attngen::rt::runtime_vectors()), int(want)) << "ATTNGEN_CPU_DISPATCH=" << cap;
}

}  // namespace
