// A projection weight as the fused kernels take it: transposed to [in, out] with out
// zero-padded (see layout.h), plus its padded bias. Header-only: installed (attngen/detail/)
// for kernels made by attngen_add_library.
#ifndef ATTNGEN_RUNTIME_PACKED_PROJECTION_H
#define ATTNGEN_RUNTIME_PACKED_PROJECTION_H

#include <attngen/attngen.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "layout.h"

namespace attngen::rt {

struct PackedProjection {
    int32_t in = 0, out = 0, padded_out = 0;
    std::vector<float> weight;  // [in, padded_out]
    std::vector<float> bias;    // [padded_out]

    // w is [out_features, in_features] as torch.nn.Linear stores it; b may be NULL.
    void pack(const float *w, const float *b, int32_t out_features, int32_t in_features,
              attngen_device device = ATTNGEN_DEVICE_CPU) {
        in = in_features;
        out = out_features;
        padded_out = round_up(out_features, kWeightPadding) +
                     (device == ATTNGEN_DEVICE_CPU ? 0 : kGpuExtraWeightPadding);
        weight.assign(size_t(in) * padded_out, 0.0f);
        bias.assign(padded_out, 0.0f);
        for (int32_t o = 0; o < out; ++o) {
            for (int32_t i = 0; i < in; ++i) {
                weight[size_t(i) * padded_out + o] = w[size_t(o) * in + i];
            }
            if (b != nullptr) bias[o] = b[o];
        }
    }
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_PACKED_PROJECTION_H
