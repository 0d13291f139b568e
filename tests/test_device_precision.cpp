// Half-precision handles on the GPU (ATTNGEN_PRECISION_BF16 and F16): the fused forward against
// the float64 reference with the precision's bounds (error_bounds.h), at the GPU schedule's tile
// edges, and against a CPU handle of the same precision. The GPU kernels take the weights as
// their bits and round operands in integer arithmetic (generators/stages.h), but for float16 on
// CUDA, which rounds with cvt.rn.f16.f32 (generators/layout.h); the CPU kernels round by
// Halide's casts, so the two must round every operand alike.
#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "device_under_test.h"
#include "half_precision_cases.h"
#include "mha_tester.h"

namespace attngen_test {
namespace {

class DevicePrecision : public DeviceAvailableTest,
                        public ::testing::WithParamInterface<attngen_precision> {
  protected:
    static MhaTester Model(int d_model, int heads) {
        MhaTester t;
        t.device(DeviceUnderTest()).precision(GetParam()).d_model(d_model).num_heads(heads);
        return t;
    }
};

// Query blocks of 16, key tiles of 32, projection blocks of 64 features, each hit and missed by
// one (a GPU's bfloat16 weights are one feature per row, as float16's).
TEST_P(DevicePrecision, TileEdges) {
    Model(1, 1).batch(1).q_len(1).kv_len(1).TestWithAndWithoutWeights();
    Model(21, 3).kdim(11).vdim(13).batch(3).q_len(7).kv_len(11).TestWithAndWithoutWeights();
    Model(16, 2).batch(1).q_len(17).kv_len(9).TestWithAndWithoutWeights();
    for (int kv : {15, 16, 17, 31, 32, 33})
        Model(8, 1).q_len(5).kv_len(kv).TestWithAndWithoutWeights();
    for (int d : {63, 64, 65}) Model(d, 1).q_len(33).kv_len(3).TestWithAndWithoutWeights();
    Model(32, 4).use_bias(false).batch(2).q_len(40).kv_len(70).with_weights(false).Test();
}

TEST_P(DevicePrecision, MasksAndHugeLogits) {
    CheckMasksAndHugeLogits(MhaTester().device(DeviceUnderTest()).precision(GetParam()));
}

TEST_P(DevicePrecision, GroupedHeadsRotaryAndValueHeadSize) {
    CheckGroupedHeadsRotaryAndValueHeadSize(
        MhaTester().device(DeviceUnderTest()).precision(GetParam()));
}

// The tutorials' MHA shapes (tests/test_tutorial.cpp).
TEST_P(DevicePrecision, TutorialShapes) {
    Model(512, 8).batch(1).q_len(62).kv_len(60).same_key_value(true).with_weights(true).Test();
    Model(320, 8).kdim(768).vdim(768).use_bias(false).batch(2).q_len(64).kv_len(77).Test();
}

// The largest |a - b| over two runs' outputs (NaN where either is not finite but they differ).
double LargestDifference(const std::vector<float> &a, const std::vector<float> &b) {
    double largest = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isfinite(a[i]) != std::isfinite(b[i])) return std::nan("");
        if (std::isfinite(a[i])) largest = std::max(largest, std::fabs(double(a[i]) - b[i]));
    }
    return largest;
}

// Bounds alone would pass a kernel that rounded differently from the CPU's (or not at all):
// a GPU handle must land much nearer the CPU handle of its precision than the float32 handle
// does. Where a sum's last bit differs, an operand may round the other way, so not bit for bit.
// Input scales: ordinary; float16's subnormal operands (1e-6); float16's saturation at 65504 (1e5).
TEST_P(DevicePrecision, RoundsAsTheCpuHandleOfItsPrecision) {
    for (float scale : {1.0f, 1e-6f, 1e5f}) {
        SCOPED_TRACE("input scale " + std::to_string(scale));
        MhaTester gpu = Model(64, 4).use_bias(false).batch(2).q_len(9).kv_len(13);
        gpu.input_scale(scale).with_weights(true);
        MhaTester cpu = gpu, f32 = gpu;
        cpu.device(ATTNGEN_DEVICE_CPU);
        f32.device(ATTNGEN_DEVICE_CPU).precision(ATTNGEN_PRECISION_F32);
        const MhaTester::Run on_gpu = gpu.Execute(), on_cpu = cpu.Execute(),
                             unrounded = f32.Execute();
        for (const MhaTester::Run *r : {&on_gpu, &on_cpu, &unrounded}) {
            ASSERT_EQ(r->status, ATTNGEN_OK) << attngen_last_error();
        }
        const double apart = LargestDifference(on_gpu.out, on_cpu.out);
        const double rounding = LargestDifference(unrounded.out, on_cpu.out);
        ASSERT_GT(rounding, 0.0) << "the float32 handle gave the half-precision outputs";
        EXPECT_LT(apart, 0.1 * rounding)
            << "GPU against CPU " << apart << ", float32 against CPU " << rounding;
        if (scale == 1.0f) {  // larger scales give probabilities of 0 and 1 in every precision
            EXPECT_LT(LargestDifference(on_gpu.weights, on_cpu.weights),
                      0.1 * LargestDifference(unrounded.weights, on_cpu.weights));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Precisions, DevicePrecision,
                         ::testing::Values(ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16),
                         [](const ::testing::TestParamInfo<attngen_precision> &info) {
                             return info.param == ATTNGEN_PRECISION_BF16 ? "bf16" : "f16";
                         });

}  // namespace
}  // namespace attngen_test
