// Decoding with a KV cache on GPU handles: the cache in device memory, appended by the GPU's
// projection and scatter kernels, read in place by the cached forward (the flash kernel with
// each item's length as its key mask). Checked against the float64 reference of attention over
// the whole sequence, in every precision, at the flash kernel's query and key block edges, with
// items of different lengths in one call; and every refusal changes nothing.
#include <attngen/attngen.h>
#include <gtest/gtest.h>

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

// The flash kernel's query blocks of 16 and key blocks of 32 (cache positions 31, 32, 33, 64,
// 65), prompts of 15 to 17 rows, and a cache that is not a whole number of the cache's own
// blocks of positions (max_len 70).
TEST_P(DeviceDecode, QueryAndKeyBlockEdges) {
    DecodeAndCheck(Model(16, 4).num_kv_heads(1).rope(ATTNGEN_ROPE_HALF), 66, 30, 70);
    for (int prompt : {15, 16, 17}) DecodeAndCheck(Model(16, 2), prompt + 2, prompt, prompt + 2);
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

// An append that fails changes nothing on the device either: every later forward gives what
// it gave before, bit for bit.
TEST_P(DeviceDecode, OverflowPastMaxLenChangesNothing) {
    DecodeModel model(Model(16, 4).num_kv_heads(2));
    ASSERT_NE(model.handle(), nullptr);
    attngen_kv_cache *raw = nullptr;
    ASSERT_EQ(attngen_kv_cache_create(model.handle(), 2, 4, &raw), ATTNGEN_OK)
        << attngen_last_error();
    CacheHandle cache(raw);
    const std::vector<float> x = model.Tokens(8, 1);
    const int32_t items[2] = {0, 1};
    const auto forward = [&](std::vector<float> *out) {
        out->assign(16, kSentinel);
        return attngen_mha_forward_cached(model.handle(), cache.get(), 1, &items[1], 1, x.data(),
                                          ATTNGEN_CAUSAL_NONE, out->data());
    };
    ASSERT_EQ(
        attngen_kv_cache_append(model.handle(), cache.get(), 1, &items[1], 3, x.data(), x.data()),
        ATTNGEN_OK)
        << attngen_last_error();
    std::vector<float> before, after;
    ASSERT_EQ(forward(&before), ATTNGEN_OK) << attngen_last_error();
    // Item 0 would fit, item 1 not.
    EXPECT_EQ(attngen_kv_cache_append(model.handle(), cache.get(), 2, items, 2, x.data(), x.data()),
              ATTNGEN_ERROR_SHAPE);
    ASSERT_EQ(forward(&after), ATTNGEN_OK) << attngen_last_error();
    EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
    int32_t lengths[2] = {-1, -1};
    ASSERT_EQ(attngen_kv_cache_lengths(cache.get(), lengths), ATTNGEN_OK);
    EXPECT_EQ(lengths[0], 0);
    EXPECT_EQ(lengths[1], 3);
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
