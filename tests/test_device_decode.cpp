// Decoding with a KV cache on GPU handles: the cache in device memory, appended by the GPU's
// projection and scatter kernels, read in place by the cached forward (the split-KV kernel,
// each item's length as its key mask). Checked against the float64 reference of attention over
// the whole sequence, in every precision, at the kernel's split and row block edges, with
// items of different lengths in one call; and every refusal changes nothing.
#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "decode_cases.h"
#include "decode_tester.h"
#include "device_under_test.h"

namespace attngen_test {
namespace {

class DeviceDecode : public DeviceAvailableTest,
                     public ::testing::WithParamInterface<attngen_precision> {
  protected:
    static MhaTester Base() {
        MhaTester t;
        t.device(DeviceUnderTest()).precision(GetParam());
        return t;
    }
    static MhaTester Model(int d_model, int heads) { return Shaped(Base(), d_model, heads); }
};

TEST_P(DeviceDecode, StepByStepEqualsCausalAttentionOverTheSequence) {
    CheckStepByStepEqualsCausalAttention(Base());
}

TEST_P(DeviceDecode, GroupedQueryAndMultiQuery) {
    CheckGroupedQueryAndMultiQuery(Base());
}

TEST_P(DeviceDecode, RotaryPositionsBothLayoutsAndPartial) {
    CheckRotaryPositionsBothLayoutsAndPartial(Base());
}

TEST_P(DeviceDecode, ValueHeadSizeOfItsOwn) {
    CheckValueHeadSizeOfItsOwn(Base());
}

TEST_P(DeviceDecode, PromptThenSteps) {
    CheckPromptThenSteps(Base());
}

// Cache positions 31, 32, 33, 64 and 65 (edges of the cache's blocks of 32 positions and of
// the flash kernel's blocks, which served the cached forward before the split-KV kernel),
// prompts of 15 to 17 rows, and a cache that is not a whole number of the cache's own blocks
// of positions (max_len 70).
TEST_P(DeviceDecode, QueryAndKeyBlockEdges) {
    DecodeAndCheck(Model(16, 4).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF), 66, 30, 70);
    for (int prompt : {15, 16, 17}) DecodeAndCheck(Model(16, 2), prompt + 2, prompt, prompt + 2);
    // A prompt whose rows cross one of the cache's blocks of 32 positions.
    DecodeAndCheck(Model(16, 2).num_kv_heads(1), 44, 40, 44);
}

// Value heads at either side of the cache's panels of 32 features (layout.h, kCacheValuePanel),
// the last one padded, which the store writes and the split-KV kernel's threads read across.
TEST_P(DeviceDecode, ValuePanelEdges) {
    for (int dv : {31, 32, 33, 65}) DecodeAndCheck(Model(16, 2).v_head_dim(dv), 7, 3, 7);
    // Value heads over one merge block (32 features) and rows of a group of 5, over 3 splits.
    for (int dv : {33, 65}) {
        DecodeAndCheck(Model(20, 5).num_kv_heads(1).v_head_dim(dv), 263, 257, 263);
    }
}

// The split-KV kernel's splits of 128 keys (gpu_decode_split_keys; steps over caches of 122 to
// 134 positions and of 250 to 262, a prompt of 520 positions: five splits) and its blocks of 4
// rows (3, 4, 5, 8 and 9 query heads over one key/value head at one query: a block short of one
// row, one block, a block and a row, two blocks, two and a row; prompts: many blocks).
TEST_P(DeviceDecode, SplitAndRowBlockEdges) {
    DecodeAndCheck(Model(16, 8).num_kv_heads(1), 134, 122, 134);
    DecodeAndCheck(Model(16, 8).num_kv_heads(1), 262, 250, 262);
    DecodeAndCheck(Model(18, 9).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF), 7, 3, 7);
    for (int heads : {3, 4, 5}) DecodeAndCheck(Model(4 * heads, heads).num_kv_heads(1), 7, 3, 7);
    DecodeAndCheck(Model(16, 2), 522, 520, 530);
}

// A long cache: a merge of 131 and 129 splits, more than its threads' lanes and groups
// (schedule_gpu_decode.cpp), so each lane and group sums several, the last ones a part; one query
// per call, then two.
TEST_P(DeviceDecode, LongCacheMergesManySplits) {
    CheckCrossAttentionAppendsTheMemoryOnce(Base(), 1, 2, 16643);
    CheckCrossAttentionAppendsTheMemoryOnce(Base(), 2, 1, 16385);
}

TEST_P(DeviceDecode, ItemsAtDifferentLengthsInOneCall) {
    CheckItemsAtDifferentLengthsInOneCall(Base());
}

TEST_P(DeviceDecode, AnEmptyItemGivesTheOutputBias) {
    CheckAnEmptyItemGivesTheOutputBias(Base());
}

TEST_P(DeviceDecode, ResetEmptiesAnItemAndItDecodesAgain) {
    CheckResetEmptiesAnItemAndItDecodesAgain(Base());
}

TEST_P(DeviceDecode, CrossAttentionAppendsTheMemoryOnce) {
    CheckCrossAttentionAppendsTheMemoryOnce(Base());
}

// Items of very different lengths in one call: the short item's key blocks past its length are
// visited (the call's key limit is the long item's) and wholly masked.
TEST_P(DeviceDecode, ItemsOfVeryDifferentLengthsAcrossKeyBlocks) {
    CheckItemsAtDifferentLengthsInOneCall(Base(), 67, 3);
}

TEST_P(DeviceDecode, RefusedAppendChangesNothing) {
    CheckRefusedAppendChangesNothing(DeviceUnderTest(), GetParam());
}

// The cache holds the bits a CPU cache of the precision holds: one cached row, attended by a
// query that sees only it (zero query and key weights), comes out through identity value and
// output weights as it is stored. The value bias moves the projected values onto the format's
// rounding ties, past them by a little, into float16's subnormals and up to its largest value.
TEST_P(DeviceDecode, CacheStoresTheBitsACpuCacheStores) {
    constexpr int d = 16;
    const float tie_bf16 = std::ldexp(1.0f, -8), tie_f16 = std::ldexp(1.0f, -11);
    const float sub = std::ldexp(1.0f, -25);  // half float16's smallest subnormal
    const std::vector<float> x = {1, 1, -1, 1, 1, 1, 0, 0, 0, 65504, -65504, 3, 0.1f, 1, 2, 0};
    const std::vector<float> bv = {tie_bf16, 3 * tie_bf16, -3 * tie_bf16, tie_bf16 * 1.001f,
                                   tie_f16,  3 * tie_f16,  sub,           3 * sub,
                                   -5 * sub, 15.9f,        -15.0f,        1e-3f,
                                   1e-5f,    -tie_f16,     3 * tie_bf16,  0.0f};
    std::vector<float> zeros(d * d, 0.0f), identity(d * d, 0.0f), no_bias(d, 0.0f);
    for (int i = 0; i < d; ++i) identity[size_t(i) * d + i] = 1.0f;
    std::vector<float> outputs[2];
    for (int k = 0; k < 2; ++k) {
        attngen_mha_config c{};
        c.d_model = d;
        c.num_heads = 1;
        c.use_bias = 1;
        c.device = k == 0 ? ATTNGEN_DEVICE_CPU : DeviceUnderTest();
        c.precision = GetParam();
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&c, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle m(raw);
        ASSERT_EQ(attngen_mha_set_weights(m.get(), zeros.data(), zeros.data(), identity.data(),
                                          identity.data(), no_bias.data(), no_bias.data(),
                                          bv.data(), no_bias.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        attngen_kv_cache *cache_raw = nullptr;
        ASSERT_EQ(attngen_kv_cache_create(m.get(), 1, 1, &cache_raw), ATTNGEN_OK)
            << attngen_last_error();
        CacheHandle cache(cache_raw);
        ASSERT_EQ(attngen_kv_cache_append(m.get(), cache.get(), 1, nullptr, 1, x.data(), x.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        outputs[k].assign(d, kSentinel);
        ASSERT_EQ(attngen_mha_forward_cached(m.get(), cache.get(), 1, nullptr, 1, x.data(),
                                             ATTNGEN_CAUSAL_BOTTOM_RIGHT, outputs[k].data()),
                  ATTNGEN_OK)
            << attngen_last_error();
    }
    for (int f = 0; f < d; ++f) {
        EXPECT_EQ(outputs[1][size_t(f)], outputs[0][size_t(f)])
            << "feature " << f << ": x " << x[size_t(f)] << " + bias " << bv[size_t(f)];
    }
    // Where the format rounds, the ties went to even: 1 + 2^-8 is 1 in bfloat16, 1 + 2^-11 is 1
    // in float16 (and float32 keeps both).
    if (GetParam() == ATTNGEN_PRECISION_BF16) {
        EXPECT_EQ(outputs[1][0], 1.0f);
    }
    if (GetParam() == ATTNGEN_PRECISION_F16) {
        EXPECT_EQ(outputs[1][4], 1.0f);
    }
}

INSTANTIATE_TEST_SUITE_P(Precisions, DeviceDecode,
                         ::testing::Values(ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16,
                                           ATTNGEN_PRECISION_F16),
                         [](const ::testing::TestParamInfo<attngen_precision> &info) {
                             switch (info.param) {
                                 case ATTNGEN_PRECISION_BF16:
                                     return std::string("bf16");
                                 case ATTNGEN_PRECISION_F16:
                                     return std::string("f16");
                                 default:
                                     return std::string("f32");
                             }
                         });

// The float16 range check runs on the rows the device computed, before its scatter.
class DeviceDecodeErrors : public DeviceAvailableTest {};

TEST_F(DeviceDecodeErrors, Float16CacheRefusesKeysBeyondItsRangeAndAppendsNothing) {
    CheckFloat16CacheRefusesKeysBeyondItsRange(DeviceUnderTest());
}

}  // namespace
}  // namespace attngen_test
