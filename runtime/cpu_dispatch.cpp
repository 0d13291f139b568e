#include "cpu_dispatch.h"

#include <HalideRuntime.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>

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
const halide_target_feature_t kAboveBaseline[] = {
    halide_target_feature_sse41,          halide_target_feature_avx,
    halide_target_feature_avx2,           halide_target_feature_fma,
    halide_target_feature_f16c,           halide_target_feature_avx512,
    halide_target_feature_avx512_skylake, halide_target_feature_avx512_zen4,
    halide_target_feature_avx512_zen5};

const halide_target_feature_t *refused_begin = nullptr;
const halide_target_feature_t *refused_end = nullptr;

bool has_feature(int count, const uint64_t *features, halide_target_feature_t f) {
    const int word = int(f) / 64;
    return word < count && ((features[word] >> (int(f) % 64)) & 1) != 0;
}

int capped_can_use_target_features(int count, const uint64_t *features) {
    for (const halide_target_feature_t *f = refused_begin; f != refused_end; ++f) {
        if (has_feature(count, features, *f)) return 0;
    }
    return halide_default_can_use_target_features(count, features);
}

template <size_t N>
void refuse(const halide_target_feature_t (&list)[N]) {
    refused_begin = list;
    refused_end = list + N;
    halide_set_custom_can_use_target_features(capped_can_use_target_features);
}

}  // namespace

void install_cpu_dispatch_policy() {
    static std::once_flag once;
    std::call_once(once, [] {
        const char *cap = std::getenv("ATTNGEN_CPU_DISPATCH");
        if (cap == nullptr) return;
        if (std::strcmp(cap, "avx512") == 0)
            refuse(kAboveAvx512);
        else if (std::strcmp(cap, "avx2") == 0)
            refuse(kAboveAvx2);
        else if (std::strcmp(cap, "sse41") == 0)
            refuse(kAboveSse41);
        else if (std::strcmp(cap, "baseline") == 0)
            refuse(kAboveBaseline);
    });
}

}  // namespace attngen::rt
