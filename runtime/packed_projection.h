// A projection weight as the fused kernels take it: transposed, with out zero-padded, in
// panels of outputs (see layout.h), plus its padded bias. Header-only: installed (attngen/detail/)
// for kernels made by attngen_add_library.
#ifndef ATTNGEN_RUNTIME_PACKED_PROJECTION_H
#define ATTNGEN_RUNTIME_PACKED_PROJECTION_H

#include <attngen/attngen.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "half_precision.h"
#include "huge_pages.h"
#include "layout.h"

namespace attngen::rt {

struct PackedProjection {
    int32_t in = 0, out = 0, padded_out = 0;
    attngen_precision precision = ATTNGEN_PRECISION_F32;
    bool pairs = false;  // bfloat16 for a CPU (layout.h, weights_in_pairs)
    // On huge pages where large (huge_pages.h): a decoding step streams every weight once.
    std::vector<float, HugePageAllocator<float>> weight;  // float32, [panels, in, kWeightPadding]
    // Otherwise the bits: float16 and a GPU's bfloat16 likewise; a CPU's bfloat16 in pairs of
    // input features, [panels, ceil(in / 2), kPairPanelOutputs, 2], the odd count's last pair
    // completed with 0 (the projections reduce each pair in one lane of vdpbf16ps:
    // ProjectionStage::paired).
    std::vector<uint16_t, HugePageAllocator<uint16_t>> weight_bits;
    std::vector<float> bias;  // [padded_out], float32 in every precision

    // w is [out_features, in_features] as torch.nn.Linear stores it; b may be NULL. Weights are
    // rounded to nearest in `p`; a float16 weight beyond its range becomes infinite, so callers
    // refuse those first (first_beyond_float16).
    void pack(const float *w, const float *b, int32_t out_features, int32_t in_features,
              attngen_device device = ATTNGEN_DEVICE_CPU,
              attngen_precision p = ATTNGEN_PRECISION_F32) {
        in = in_features;
        out = out_features;
        precision = p;
        pairs = weights_in_pairs(p == ATTNGEN_PRECISION_BF16, device != ATTNGEN_DEVICE_CPU);
        padded_out = round_up(out_features, kWeightPadding) +
                     (device == ATTNGEN_DEVICE_CPU ? 0 : kGpuExtraWeightPadding);
        const size_t size = size_t(stored_rows()) * stored_columns();
        if (p == ATTNGEN_PRECISION_F32) {
            weight.assign(size, 0.0f);
        } else {
            weight_bits.assign(size, 0);  // +0 in both formats
        }
        bias.assign(padded_out, 0.0f);
        for (int32_t o = 0; o < out; ++o) {
            for (int32_t i = 0; i < in; ++i) {
                const float x = w[size_t(o) * in + i];
                if (p == ATTNGEN_PRECISION_F32) {
                    weight[stored_index(o, i)] = x;
                } else if (pairs) {
                    weight_bits[stored_index(2 * o + i % 2, i / 2)] = to_bfloat16(x);
                } else {
                    weight_bits[stored_index(o, i)] =
                        p == ATTNGEN_PRECISION_BF16 ? to_bfloat16(x) : to_float16(x);
                }
            }
            if (b != nullptr) bias[o] = b[o];
        }
    }

    // Weight rows (input features, or pairs of them) and columns (outputs, or both features of
    // a pair of each), as the kernels index them.
    int32_t stored_rows() const { return stored_weight_rows(in, pairs); }
    int32_t stored_columns() const { return pairs ? 2 * padded_out : padded_out; }
    // Stored in panels of weight_panel_outputs outputs (layout.h). The fused kernels take the
    // weights as a 3-D buffer [panels x rows, panel outputs, pair elements] (kernel_shape),
    // attngen_linear's packed form as a 2-D one [panels, rows x panel columns].
    int32_t panel_columns() const { return weight_panel_columns(pairs); }
    std::array<int32_t, 3> kernel_shape() const {
        const int32_t elements = pairs ? kWeightPairs : 1;
        return {panels() * stored_rows(), panel_columns() / elements, elements};
    }
    int32_t panels() const { return stored_columns() / panel_columns(); }
    int32_t panel_size() const { return stored_rows() * panel_columns(); }
    size_t stored_index(int32_t column, int32_t row) const {
        return (size_t(column / panel_columns()) * stored_rows() + row) * panel_columns() +
               column % panel_columns();
    }

    // Bytes the packed weights and bias occupy.
    size_t bytes() const {
        return weight.size() * sizeof(float) + weight_bits.size() * sizeof(uint16_t) +
               bias.size() * sizeof(float);
    }
};

// The index of the first finite element of x[0..n) that float16 cannot hold (|x| > 65504
// rounds to infinity), or -1.
inline int64_t first_beyond_float16(const float *x, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (std::fabs(x[i]) >= 65520.0f && std::isfinite(x[i])) return int64_t(i);
    }
    return -1;
}

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_PACKED_PROJECTION_H
