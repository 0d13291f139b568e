// Cases the half-precision suites share: the CPU's (test_precision.cpp) and the GPU's
// (test_device_precision.cpp) run them on a tester that carries their device and precision.
#ifndef ATTNGEN_TESTS_HALF_PRECISION_CASES_H
#define ATTNGEN_TESTS_HALF_PRECISION_CASES_H

#include <attngen/attngen.h>

#include <utility>
#include <vector>

#include "mha_tester.h"

namespace attngen_test {

inline MhaTester ModelOf(const MhaTester &base, int d_model, int heads) {
    MhaTester t = base;
    t.d_model(d_model).num_heads(heads);
    return t;
}

// Every mask kind, a fully masked item (kv_length 0) and huge logits.
inline void CheckMasksAndHugeLogits(const MhaTester &base) {
    for (const auto &[q_len, kv_len] : std::vector<std::pair<int, int>>{{4, 7}, {7, 4}}) {
        for (attngen_causal causal : {ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
            ModelOf(base, 12, 2).batch(3).q_len(q_len).kv_len(kv_len).causal(causal).Test();
        }
        MhaTester t = ModelOf(base, 12, 2);
        t.batch(3).q_len(q_len).kv_len(kv_len).kv_lengths({kv_len, 0, kv_len / 2});
        t.bool_mask(3, 0.3).additive(3, 2, 0.15).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT);
        t.TestWithAndWithoutWeights();
    }
    ModelOf(base, 16, 2).batch(1).q_len(6).kv_len(9).input_scale(30.0f).TestWithAndWithoutWeights();
}

// Grouped heads (GQA and MQA), both rotary layouts (one partial) and a value head size of its
// own; 3 heads of 5 value features merge into an odd count, whose last bfloat16 pair the output
// projection pads on CPUs (a GPU's bfloat16 weights are not paired).
inline void CheckGroupedHeadsRotaryAndValueHeadSize(const MhaTester &base) {
    ModelOf(base, 32, 8).num_kv_heads(2).batch(2).q_len(5).kv_len(9).TestWithAndWithoutWeights();
    ModelOf(base, 32, 4).num_kv_heads(1).batch(1).q_len(7).kv_len(7).Test();
    ModelOf(base, 32, 4).rope(ATTNGEN_ROPE_HALF).batch(2).q_len(3).kv_len(8).Test();
    ModelOf(base, 32, 4).rope(ATTNGEN_ROPE_INTERLEAVED, 4).batch(1).q_len(8).kv_len(5).Test();
    ModelOf(base, 24, 4).num_kv_heads(2).v_head_dim(5).batch(2).q_len(4).kv_len(6).Test();
    ModelOf(base, 24, 3).v_head_dim(5).batch(2).q_len(3).kv_len(4).TestWithAndWithoutWeights();
}

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_HALF_PRECISION_CASES_H
