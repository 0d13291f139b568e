// attngen_sdpa_device on CUDA or OpenCL (ATTNGEN_TEST_DEVICE) against the float64 reference:
// the shapes at the GPU kernels' tile edges (query blocks of 16, key blocks of 32 and 64), grouped
// heads, every mask kind, fully masked rows and huge logits, each with and without the weights
// output (the flash kernel, and the one that keeps the probabilities), and bad input.
#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_under_test.h"
#include "sdpa_tester.h"
#include "test_util.h"

namespace attngen_test {
namespace {

class DeviceSdpaTest : public DeviceAvailableTest {
  protected:
    static SdpaTester Tester() { return SdpaTester().device(DeviceUnderTest()); }
    static void TestWithAndWithoutWeights(SdpaTester t) {
        t.with_weights(false).Test();
        t.with_weights(true).Test();
    }
};

TEST_F(DeviceSdpaTest, SingleElement) {
    TestWithAndWithoutWeights(Tester().batch(1).heads(1).q_len(1).kv_len(1).dk(1).dv(1));
}
TEST_F(DeviceSdpaTest, PrimeSizes) {
    TestWithAndWithoutWeights(Tester().batch(3).heads(5).q_len(7).kv_len(11).dk(13).dv(3));
}
// Key blocks of 64 at heads of at most 64 features, of 32 past them (kSmallFlashHead).
TEST_F(DeviceSdpaTest, QueryAndKeyBlockEdges) {
    for (int head : {8, 72}) {
        for (int q_len : {15, 16, 17}) {
            for (int kv_len : {31, 32, 33, 63, 64, 65}) {
                TestWithAndWithoutWeights(
                    Tester().batch(1).heads(2).q_len(q_len).kv_len(kv_len).dk(head).dv(head));
            }
        }
    }
}
TEST_F(DeviceSdpaTest, ManyKeyBlocks) {
    TestWithAndWithoutWeights(Tester().batch(2).heads(2).q_len(33).kv_len(257).dk(16).dv(16));
}
TEST_F(DeviceSdpaTest, GroupedHeads) {
    TestWithAndWithoutWeights(
        Tester().batch(2).heads(8).kv_heads(2).q_len(5).kv_len(9).dk(8).dv(6));
    TestWithAndWithoutWeights(
        Tester().batch(1).heads(4).kv_heads(1).q_len(3).kv_len(40).dk(4).dv(4));
}
TEST_F(DeviceSdpaTest, CausalBothAlignments) {
    for (attngen_causal c : {ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
        TestWithAndWithoutWeights(
            Tester().batch(2).heads(2).q_len(9).kv_len(40).dk(8).dv(8).causal(c));
        TestWithAndWithoutWeights(
            Tester().batch(1).heads(1).q_len(40).kv_len(9).dk(8).dv(8).causal(c));
    }
}
TEST_F(DeviceSdpaTest, KvLengthsWithAFullyMaskedItem) {
    TestWithAndWithoutWeights(
        Tester().batch(3).heads(2).q_len(4).kv_len(37).dk(8).dv(8).kv_lengths({37, 0, 5}));
}
TEST_F(DeviceSdpaTest, BoolAndAdditiveMasks) {
    TestWithAndWithoutWeights(
        Tester().batch(2).heads(2).q_len(5).kv_len(34).dk(8).dv(8).bool_mask(2));
    TestWithAndWithoutWeights(
        Tester().batch(2).heads(2).q_len(5).kv_len(34).dk(8).dv(8).bool_mask(1, 0.9));
    TestWithAndWithoutWeights(
        Tester().batch(2).heads(3).q_len(5).kv_len(34).dk(8).dv(8).additive(2, 3, 0.3));
    TestWithAndWithoutWeights(
        Tester().batch(2).heads(3).q_len(5).kv_len(34).dk(8).dv(8).additive(1, 1, 1.0));
}
TEST_F(DeviceSdpaTest, AllMasksCombined) {
    TestWithAndWithoutWeights(Tester()
                                  .batch(2)
                                  .heads(4)
                                  .kv_heads(2)
                                  .q_len(7)
                                  .kv_len(45)
                                  .dk(8)
                                  .dv(5)
                                  .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
                                  .kv_lengths({45, 20})
                                  .bool_mask(2)
                                  .additive(1, 4));
}
// The masks across several key blocks of both flash kernels: heads of 8 run blocks of 64 keys,
// heads of 72 blocks of 32 (kSmallFlashHead).
TEST_F(DeviceSdpaTest, MasksAcrossKeyBlocksOfBothKernels) {
    for (int head : {8, 72}) {
        for (int kv_len : {70, 130}) {
            const SdpaTester base =
                Tester().batch(2).heads(2).q_len(9).kv_len(kv_len).dk(head).dv(head);
            for (attngen_causal c : {ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
                TestWithAndWithoutWeights(SdpaTester(base).causal(c));
            }
            TestWithAndWithoutWeights(SdpaTester(base).kv_lengths({kv_len - 3, 0}));
            TestWithAndWithoutWeights(SdpaTester(base).bool_mask(2));
            TestWithAndWithoutWeights(SdpaTester(base).additive(2, 2, 0.3));
            TestWithAndWithoutWeights(SdpaTester(base).qk_range(-300.0f, 300.0f));
        }
    }
}
TEST_F(DeviceSdpaTest, HugeLogits) {
    TestWithAndWithoutWeights(
        Tester().batch(1).heads(2).q_len(4).kv_len(35).dk(8).dv(8).qk_range(-300.0f, 300.0f));
}
TEST_F(DeviceSdpaTest, ExplicitScale) {
    TestWithAndWithoutWeights(
        Tester().batch(1).heads(2).q_len(4).kv_len(6).dk(8).dv(8).scale(0.5f));
}

// Refused before anything runs, and nothing written: the CPU, null or unknown arguments, a
// mask of the wrong shape, a group that does not divide.
TEST_F(DeviceSdpaTest, BadInputIsRefusedAndWritesNothing) {
    const attngen_device device = DeviceUnderTest();
    SdpaTester t = Tester().batch(2).heads(2).q_len(3).kv_len(4).dk(4).dv(4);
    SdpaTester::Run r = t.Prepare();
    std::vector<uint64_t> addresses;
    const auto upload = [&](const std::vector<float> &host) {
        uint64_t address = 0;
        EXPECT_EQ(attngen_device_alloc(device, host.size() * 4, &address), ATTNGEN_OK);
        EXPECT_EQ(attngen_device_upload(device, address, host.data(), host.size() * 4), ATTNGEN_OK);
        addresses.push_back(address);
        return address;
    };
    const uint64_t q = upload(r.q), k = upload(r.k), v = upload(r.v);
    const uint64_t out = upload(std::vector<float>(r.out.size(), kSentinel));
    const auto call = [&](attngen_device d, int heads, int kv_heads, uint64_t query,
                          const attngen_mask *mask) {
        return attngen_sdpa_device(d, nullptr, 2, heads, kv_heads, 3, 4, 4, 4, query, k, v, mask,
                                   0.0f, out, 0);
    };
    EXPECT_EQ(call(ATTNGEN_DEVICE_CPU, 2, 2, q, nullptr), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attngen_last_error()).find("attngen_sdpa_gqa"), std::string::npos)
        << attngen_last_error();
    EXPECT_EQ(call(attngen_device(7), 2, 2, q, nullptr), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(call(device, 2, 2, 0, nullptr), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attngen_last_error()).find("q"), std::string::npos);
    EXPECT_EQ(call(device, 2, 3, q, nullptr), ATTNGEN_ERROR_SHAPE);
    attngen_mask bad = r.masks.mask;
    const std::vector<int32_t> lengths = {4, 99};
    bad.kv_lengths = lengths.data();
    EXPECT_EQ(call(device, 2, 2, q, &bad), ATTNGEN_ERROR_SHAPE);
    EXPECT_NE(std::string(attngen_last_error()).find("kv_lengths"), std::string::npos)
        << attngen_last_error();
    std::vector<float> written(r.out.size());
    ASSERT_EQ(attngen_device_download(device, written.data(), out, written.size() * 4), ATTNGEN_OK);
    EXPECT_TRUE(Untouched("out", written));
    for (uint64_t a : addresses) attngen_device_free(device, a);
}

}  // namespace
}  // namespace attngen_test
