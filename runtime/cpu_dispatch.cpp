#include "cpu_dispatch.h"

#include <HalideRuntime.h>

#include "amx_tile_state.h"
#include "bf16_dot_probe.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <utility>

namespace attngen::rt {
namespace {

// Features at or above the cap are refused; an empty list refuses nothing.
const halide_target_feature_t kAboveAvx512[] = {halide_target_feature_avx512_zen4,
                                                halide_target_feature_avx512_zen5,
                                                halide_target_feature_avx512_sapphirerapids};
const halide_target_feature_t kAboveAvx2[] = {halide_target_feature_avx512,
                                              halide_target_feature_avx512_knl,
                                              halide_target_feature_avx512_skylake,
                                              halide_target_feature_avx512_cannonlake,
                                              halide_target_feature_avx512_zen4,
                                              halide_target_feature_avx512_zen5,
                                              halide_target_feature_avx512_sapphirerapids};
const halide_target_feature_t kAboveSse41[] = {
    halide_target_feature_avx,         halide_target_feature_avx2,
    halide_target_feature_fma,         halide_target_feature_f16c,
    halide_target_feature_avx512,      halide_target_feature_avx512_skylake,
    halide_target_feature_avx512_zen4, halide_target_feature_avx512_zen5};
// aarch64's arm_dot_prod and arm_fp16 as well, so that the plain arm-64-linux variant runs there.
const halide_target_feature_t kAboveBaseline[] = {
    halide_target_feature_sse41,          halide_target_feature_avx,
    halide_target_feature_avx2,           halide_target_feature_fma,
    halide_target_feature_f16c,           halide_target_feature_avx512,
    halide_target_feature_avx512_skylake, halide_target_feature_avx512_zen4,
    halide_target_feature_avx512_zen5,    halide_target_feature_arm_dot_prod,
    halide_target_feature_arm_fp16};

// ATTNGEN_CPU_DISPATCH=avx512_bf16 refuses the AMX variant above the AVX512-BF16 one.
const halide_target_feature_t kAboveAvx512Bf16[] = {halide_target_feature_avx512_sapphirerapids};

// The features whose Halide targets multiply bfloat16 pairs with vdpbf16ps: only the bfloat16
// kernels' Zen 4 variant names one (generators/CMakeLists.txt).
const halide_target_feature_t kBf16DotProduct[] = {halide_target_feature_avx512_zen4,
                                                   halide_target_feature_avx512_zen5};

const halide_target_feature_t *refused_begin = nullptr;
const halide_target_feature_t *refused_end = nullptr;
// ATTNGEN_CPU_DISPATCH=avx512_bf16: the AVX512-BF16 variant wherever the CPU has it, without
// asking whether it pays (bf16_dot_product_pays), so that it is tested on any such CPU.
bool bf16_dot_product_forced = false;

bool has_feature(int count, const uint64_t *features, halide_target_feature_t f) {
    const int word = int(f) / 64;
    return word < count && ((features[word] >> (int(f) % 64)) & 1) != 0;
}

template <size_t N>
bool has_any_feature(int count, const uint64_t *features,
                     const halide_target_feature_t (&list)[N]) {
    for (halide_target_feature_t f : list) {
        if (has_feature(count, features, f)) return true;
    }
    return false;
}

int attngen_can_use_target_features(int count, const uint64_t *features) {
    for (const halide_target_feature_t *f = refused_begin; f != refused_end; ++f) {
        if (has_feature(count, features, *f)) return 0;
    }
    // The bfloat16 kernels' AMX variant (generators/CMakeLists.txt) needs Linux's grant of the
    // tile state, asked here, before any of its kernels runs. Halide's own check of the feature
    // reads AVX-512's, AVX-VNNI's and AVX512-BF16's CPUID bits, not AMX's nor whether the
    // kernel enabled its state: a CPU that lists AMX with the state off would take the variant
    // and die of SIGILL at its first tile instruction.
    if (has_feature(count, features, halide_target_feature_avx512_sapphirerapids)) {
        return amx_tile_state_granted() && halide_default_can_use_target_features(count, features)
                   ? 1
                   : 0;
    }
    // The CPU's features first, so that CPUs without the variant's features never run the probe.
    if (!halide_default_can_use_target_features(count, features)) return 0;
    if (!bf16_dot_product_forced && has_any_feature(count, features, kBf16DotProduct)) {
        return bf16_dot_product_pays() ? 1 : 0;
    }
    return 1;
}

template <size_t N>
void refuse(const halide_target_feature_t (&list)[N]) {
    refused_begin = list;
    refused_end = list + N;
}

// ATTNGEN_CPU_DISPATCH (cpu_dispatch.h), read once for the kernels' policy and the runtime's
// own loops alike.
enum class Cap { kNone, kAvx512Bf16, kAvx512, kAvx2, kSse41, kBaseline };

Cap dispatch_cap() {
    static const Cap cap = [] {
        const char *env = std::getenv("ATTNGEN_CPU_DISPATCH");
        if (env == nullptr) return Cap::kNone;
        const std::pair<const char *, Cap> names[] = {{"avx512_bf16", Cap::kAvx512Bf16},
                                                      {"avx512", Cap::kAvx512},
                                                      {"avx2", Cap::kAvx2},
                                                      {"sse41", Cap::kSse41},
                                                      {"baseline", Cap::kBaseline}};
        for (const auto &[name, value] : names) {
            if (std::strcmp(env, name) == 0) return value;
        }
        return Cap::kNone;
    }();
    return cap;
}

}  // namespace

RuntimeVectors runtime_vectors() {
    static const RuntimeVectors vectors = [] {
#if defined(__x86_64__) && defined(__GNUC__)
        const Cap cap = dispatch_cap();
        if (cap == Cap::kSse41 || cap == Cap::kBaseline) return RuntimeVectors::kBaseline;
        __builtin_cpu_init();
        // GCC's and Clang's checks include the operating system's saving of the registers.
        if (cap != Cap::kAvx2 && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw")) {
            return RuntimeVectors::kAvx512;
        }
        if (__builtin_cpu_supports("avx2")) return RuntimeVectors::kAvx2;
#endif
        return RuntimeVectors::kBaseline;
    }();
    return vectors;
}

CpuVariant cpu_kernels_variant(bool bfloat16_kernels) {
#ifdef ATTNGEN_CPU_KERNELS_AVX512_FIRST
    install_cpu_dispatch_policy();
    const auto usable = [](halide_target_feature_t feature) {
        constexpr int kWords = (int(halide_target_feature_end) + 63) / 64;
        uint64_t features[kWords] = {};
        features[int(feature) / 64] = uint64_t(1) << (int(feature) % 64);
        return attngen_can_use_target_features(kWords, features) != 0;
    };
    // The policy is fixed for the process, so each is asked once; the bfloat16 kernels' variants
    // only for them (the AVX512-BF16 one measures whether it pays, bf16_dot_product_pays).
    static const bool avx512 = usable(halide_target_feature_avx512_skylake);
    if (!avx512) return CpuVariant::kBelowAvx512;
    if (!bfloat16_kernels) return CpuVariant::kAvx512;
    static const CpuVariant bfloat16 =
        usable(halide_target_feature_avx512_sapphirerapids) ? CpuVariant::kAmx
        : usable(halide_target_feature_avx512_zen4)         ? CpuVariant::kAvx512Bf16
                                                            : CpuVariant::kAvx512;
    return bfloat16;
#else
    (void)bfloat16_kernels;
    return CpuVariant::kBelowAvx512;
#endif
}

void install_cpu_dispatch_policy() {
    static std::once_flag once;
    std::call_once(once, [] {
        switch (dispatch_cap()) {
            case Cap::kAvx512Bf16:
                bf16_dot_product_forced = true;
                refuse(kAboveAvx512Bf16);
                break;
            case Cap::kAvx512:
                refuse(kAboveAvx512);
                break;
            case Cap::kAvx2:
                refuse(kAboveAvx2);
                break;
            case Cap::kSse41:
                refuse(kAboveSse41);
                break;
            case Cap::kBaseline:
                refuse(kAboveBaseline);
                break;
            case Cap::kNone:
                break;
        }
        // Installed once the policy above is set: a kernel that runs from here on asks it.
        halide_set_custom_can_use_target_features(attngen_can_use_target_features);
    });
}

}  // namespace attngen::rt
