// The GPU suite: the fused forward on CUDA or OpenCL against the float64 reference, through
// host pointers and through device addresses. One binary serves both APIs; the environment
// picks which (ATTNGEN_TEST_DEVICE=cuda|opencl). Where no such device or driver exists every
// test is skipped with the reason, unless ATTNGEN_TEST_REQUIRE_DEVICE=1 makes that a failure
// (CI sets it for OpenCL, which PoCL provides on any machine).
#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_under_test.h"
#include "mha_tester.h"
#include "test_util.h"

namespace attngen_test {
namespace {

class DeviceTest : public DeviceAvailableTest {
  protected:
    static MhaTester Tester() { return MhaTester().device(DeviceUnderTest()); }
};

// Shapes at the GPU schedule's tile edges: query blocks of 16, key blocks of 32 (64 at small
// heads: FlashKernelChosenByHeadSize), projection blocks of 64 features by 16 rows and 4 x 2
// register tiles (blocks of 64 rows staged in shared memory past 2^20 outputs:
// ShortProjectionLimits), each hit exactly and missed by one.
TEST_F(DeviceTest, SingleElement) {
    Tester().d_model(1).num_heads(1).batch(1).q_len(1).kv_len(1).TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, HeadDimOne) {
    Tester().d_model(5).num_heads(5).batch(2).q_len(3).kv_len(2).TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, PrimeSizes) {
    Tester()
        .d_model(21)
        .num_heads(3)
        .kdim(11)
        .vdim(13)
        .batch(3)
        .q_len(7)
        .kv_len(11)
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, QueryBlockPlusOne) {
    Tester().d_model(16).num_heads(2).batch(1).q_len(17).kv_len(9).TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, KeyTileEdges) {
    for (int kv : {15, 16, 17, 31, 32, 33})
        Tester().d_model(8).num_heads(1).q_len(5).kv_len(kv).TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, ProjectionBlockEdges) {
    for (int d : {63, 64, 65})
        Tester().d_model(d).num_heads(1).q_len(33).kv_len(3).TestWithAndWithoutWeights();
}
// Projections of at most 8 rows (q_len x batch, kv_len x batch) take the few-rows path, whose
// threads split each output's input features 32 ways: rows at the limit and one past it, with
// feature counts one short of, at and one past a multiple of the split, and groups narrower
// than it (keys of 11 features, values of 13, heads of 11 and 13).
TEST_F(DeviceTest, FewRowsPathAtItsLimits) {
    for (int d : {31, 33, 64}) {
        for (int rows : {8, 9}) {
            Tester().d_model(d).num_heads(1).batch(1).q_len(rows).kv_len(rows).Test();
        }
    }
    Tester().d_model(33).num_heads(3).kdim(11).batch(2).q_len(4).kv_len(3).Test();
    Tester().d_model(39).num_heads(3).vdim(13).batch(3).q_len(3).kv_len(5).Test();
    // Wide enough that a loose bound on the weights' region passes their padding (an H100 run
    // once refused 768 features: "wv_t is accessed at 1471, which is beyond the max (831)").
    Tester().d_model(200).num_heads(4).batch(2).q_len(1).kv_len(3).Test();
}
// The flash kernels' register tiles (schedule_flash_attention_gpu). Heads past 64 features run
// blocks of 32 keys, per thread 2 queries x 2 keys of scores and 2 value features x 2 queries of
// probs x values, value features in steps of 32 (16 threads x 2); heads of at most 64 run blocks
// of 64 keys and 4 value features, steps of 64 (kSmallFlashHead). Heads one short of and one
// past a step, odd query counts (the last thread's second query lies past the end), keys past
// one key block, each without a mask and with both causal alignments (top-left skips the first
// query block's second key block and cuts the diagonal block short; bottom-right cuts only the
// last block).
TEST_F(DeviceTest, FlashRegisterTileEdges) {
    for (int head : {31, 33, 63, 65, 95, 97}) {
        const int block_keys = head <= 64 ? 64 : 32;
        for (int q_len : {15, 17}) {
            for (attngen_causal causal :
                 {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
                Tester()
                    .d_model(2 * head)
                    .num_heads(2)
                    .batch(2)
                    .q_len(q_len)
                    .kv_len(block_keys + 3)
                    .causal(causal)
                    .with_weights(false)
                    .Test();
            }
        }
    }
}
// Calls whose key and value heads both have at most 64 features run the flash kernel of
// 64-key blocks and 2 x 4 tiles, others the one of 32-key blocks and 2 x 2 (kSmallFlashHead,
// generators.cpp's attention()): heads on either side of the limit, each of the two head sizes
// alone past it, and key counts around one and two blocks of 64. On CUDA the cases with a head
// of 128 also check the choice: the 64-key kernel asks for more shared memory there than a
// launch may have.
TEST_F(DeviceTest, FlashKernelChosenByHeadSize) {
    struct Heads {
        int head, v_head;
    };
    const auto run = [](Heads s, int kv_len, attngen_causal causal) {
        Tester()
            .d_model(2 * s.head)
            .num_heads(2)
            .v_head_dim(s.v_head)
            .batch(1)
            .q_len(17)
            .kv_len(kv_len)
            .causal(causal)
            .with_weights(false)
            .Test();
    };
    for (Heads s : {Heads{64, 64}, Heads{16, 64}}) {
        for (int kv_len : {63, 64, 65, 127, 128, 129}) {
            for (attngen_causal causal :
                 {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
                run(s, kv_len, causal);
            }
        }
    }
    for (Heads s : {Heads{65, 65}, Heads{64, 65}, Heads{65, 64}, Heads{128, 64}, Heads{64, 128},
                    Heads{128, 128}}) {
        for (int kv_len : {65, 129}) {
            for (attngen_causal causal : {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
                run(s, kv_len, causal);
            }
        }
    }
}
// Projections of more than 8 rows and at most 2^20 outputs (rows x output features) take
// tiles of 4 x 2 in blocks of 16 rows, larger ones the staged path: blocks of 64 rows, chunks of
// 32 input features in shared memory, 4 x 4 tiles (schedule_projection_gpu): rows just past the
// few-rows path and odd counts within a tile and a block; 2^20 outputs against one row more
// (the query and output projections on either side, the keys' and values' on the few-rows
// path); the staged path at whole blocks (33 x 64 rows), at a prime row count with 65 features
// (a panel and one more, two chunks and one feature) in float32 and bfloat16, and over heads of
// 50 features (the output projection's chunks cross heads) in float16.
TEST_F(DeviceTest, ShortProjectionLimits) {
    for (int rows : {9, 15, 17, 33}) {
        Tester().d_model(20).num_heads(2).batch(1).q_len(rows).kv_len(rows + 2).Test();
    }
    Tester().d_model(512).num_heads(8).batch(2).q_len(1024).kv_len(3).with_weights(false).Test();
    Tester().d_model(512).num_heads(8).batch(1).q_len(2049).kv_len(3).with_weights(false).Test();
    Tester().d_model(512).num_heads(8).batch(1).q_len(2112).kv_len(3).with_weights(false).Test();
    for (attngen_precision p : {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16}) {
        Tester()
            .d_model(65)
            .num_heads(1)
            .batch(1)
            .q_len(16139)
            .kv_len(3)
            .precision(p)
            .with_weights(false)
            .Test();
    }
    Tester()
        .d_model(150)
        .num_heads(3)
        .batch(1)
        .q_len(7001)
        .kv_len(3)
        .precision(ATTNGEN_PRECISION_F16)
        .with_weights(false)
        .Test();
}
TEST_F(DeviceTest, LongerRowsThanOneBlock) {
    Tester().d_model(32).num_heads(4).batch(2).q_len(40).kv_len(70).with_weights(false).Test();
}
// Many query blocks: the threads of a block must not grow with q_len. (A staged tile of
// probabilities once had q_len x 32 threads: CUDA refused to launch it past 1024, at
// q_len 40 on an H100, and PoCL past its work-group limit of 4096.)
TEST_F(DeviceTest, ThreadsPerBlockDoNotGrowWithQueries) {
    Tester().d_model(16).num_heads(2).q_len(300).kv_len(70).with_weights(false).Test();
    Tester().d_model(16).num_heads(2).q_len(300).kv_len(70).with_weights(true).Test();
}
TEST_F(DeviceTest, GroupedHeadsValueHeadSizeAndRotaryPositions) {
    Tester()
        .d_model(32)
        .num_heads(8)
        .num_kv_heads(2)
        .v_head_dim(6)
        .q_len(5)
        .kv_len(9)
        .TestWithAndWithoutWeights();
    Tester()
        .d_model(32)
        .num_heads(4)
        .num_kv_heads(1)
        .rope(ATTNGEN_ROPE_HALF)
        .q_len(3)
        .kv_len(7)
        .with_weights(false)
        .Test();
    Tester()
        .d_model(24)
        .num_heads(4)
        .rope(ATTNGEN_ROPE_INTERLEAVED, 4)
        .q_len(6)
        .kv_len(6)
        .causal(ATTNGEN_CAUSAL_TOP_LEFT)
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, WithoutBias) {
    Tester()
        .d_model(12)
        .num_heads(3)
        .use_bias(false)
        .q_len(4)
        .kv_len(6)
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, ExplicitHeadDim) {
    Tester().d_model(10).num_heads(3).head_dim(7).q_len(4).kv_len(5).TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, SelfAttention) {
    Tester()
        .d_model(16)
        .num_heads(4)
        .q_len(9)
        .kv_len(9)
        .self_attention(true)
        .TestWithAndWithoutWeights();
}

// Every mask kind, on q_len != kv_len, and combined.
TEST_F(DeviceTest, CausalTopLeft) {
    Tester()
        .d_model(8)
        .num_heads(2)
        .batch(2)
        .q_len(6)
        .kv_len(9)
        .causal(ATTNGEN_CAUSAL_TOP_LEFT)
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, CausalBottomRight) {
    Tester()
        .d_model(8)
        .num_heads(2)
        .batch(2)
        .q_len(9)
        .kv_len(6)
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, KvLengthsWithAFullyMaskedItem) {
    Tester()
        .d_model(8)
        .num_heads(2)
        .batch(3)
        .q_len(4)
        .kv_len(7)
        .kv_lengths({7, 0, 3})
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, BoolMaskPerItemAndBroadcast) {
    Tester()
        .d_model(8)
        .num_heads(2)
        .batch(2)
        .q_len(5)
        .kv_len(6)
        .bool_mask(2)
        .TestWithAndWithoutWeights();
    Tester()
        .d_model(8)
        .num_heads(2)
        .batch(2)
        .q_len(5)
        .kv_len(6)
        .bool_mask(1, 0.9)
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, AdditiveMaskWithNegativeInfinity) {
    Tester()
        .d_model(8)
        .num_heads(2)
        .batch(2)
        .q_len(5)
        .kv_len(6)
        .additive(2, 2, 0.3)
        .TestWithAndWithoutWeights();
    Tester()
        .d_model(8)
        .num_heads(2)
        .batch(2)
        .q_len(5)
        .kv_len(6)
        .additive(1, 1, 1.0)
        .TestWithAndWithoutWeights();
}
TEST_F(DeviceTest, AllMasksCombined) {
    Tester()
        .d_model(12)
        .num_heads(3)
        .batch(2)
        .q_len(7)
        .kv_len(10)
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .kv_lengths({10, 4})
        .bool_mask(2)
        .additive(1, 3)
        .TestWithAndWithoutWeights();
    // Heads past 64 features (the 32-key flash kernel), keys past two of its blocks.
    Tester()
        .d_model(2 * 72)
        .num_heads(2)
        .batch(2)
        .q_len(7)
        .kv_len(70)
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .kv_lengths({70, 40})
        .bool_mask(2)
        .additive(1, 2)
        .with_weights(false)
        .Test();
}
TEST_F(DeviceTest, HugeLogits) {
    Tester()
        .d_model(8)
        .num_heads(1)
        .q_len(4)
        .kv_len(5)
        .input_scale(300.0f)
        .TestWithAndWithoutWeights();
}

// The device-address entry point gives bit for bit what the host-pointer one gives, and
// writes nothing when it fails.
class DeviceBuffer {
  public:
    DeviceBuffer(attngen_device device, const std::vector<float> &host) : device_(device) {
        bytes_ = host.size() * sizeof(float);
        status_ = attngen_device_alloc(device, bytes_, &address_);
        if (status_ == ATTNGEN_OK)
            status_ = attngen_device_upload(device, address_, host.data(), bytes_);
    }
    ~DeviceBuffer() { attngen_device_free(device_, address_); }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    attngen_status status() const { return status_; }
    uint64_t address() const { return address_; }
    std::vector<float> Download() const {
        std::vector<float> host(bytes_ / sizeof(float));
        EXPECT_EQ(attngen_device_download(device_, host.data(), address_, bytes_), ATTNGEN_OK)
            << attngen_last_error();
        return host;
    }

  private:
    attngen_device device_;
    uint64_t bytes_ = 0, address_ = 0;
    attngen_status status_;
};

// In every precision: a half-precision handle's weights live on the device in the format.
void CheckDeviceAddressesMatchHostPointers(attngen_precision precision);

TEST_F(DeviceTest, DeviceAddressesMatchHostPointers) {
    for (attngen_precision p :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        SCOPED_TRACE("precision " + std::to_string(int(p)));
        CheckDeviceAddressesMatchHostPointers(p);
    }
}

void CheckDeviceAddressesMatchHostPointers(attngen_precision precision) {
    const attngen_device device = DeviceUnderTest();
    MhaTester t = MhaTester().device(device).precision(precision);
    t.d_model(12).num_heads(3).batch(2).q_len(5).kv_len(7).causal(ATTNGEN_CAUSAL_TOP_LEFT);
    const attngen_mha_config config = t.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const MhaTester::Model model = t.MakeModel();
    ASSERT_EQ(model.SetWeights(m.get()), ATTNGEN_OK) << attngen_last_error();
    MhaTester::Run r = t.Prepare(DefaultSeed());
    t.Call(m.get(), r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    t.Check(model, r);

    DeviceBuffer query(device, r.query), key(device, r.key), value(device, r.value);
    DeviceBuffer out(device, std::vector<float>(r.out.size(), kSentinel));
    DeviceBuffer weights(device, std::vector<float>(r.weights.size(), kSentinel));
    for (const DeviceBuffer *b : {&query, &key, &value, &out, &weights}) {
        ASSERT_EQ(b->status(), ATTNGEN_OK) << attngen_last_error();
    }
    ASSERT_EQ(attngen_mha_forward_device(m.get(), 2, 5, 7, query.address(), key.address(),
                                         value.address(), &r.masks.mask, out.address(),
                                         weights.address()),
              ATTNGEN_OK)
        << attngen_last_error();
    EXPECT_TRUE(BitIdentical("out", out.Download(), r.out));
    EXPECT_TRUE(BitIdentical("weights", weights.Download(), r.weights));

    // A mask of the wrong batch fails validation: the device outputs keep their contents.
    DeviceBuffer untouched_out(device, std::vector<float>(r.out.size(), kSentinel));
    attngen_mask bad = r.masks.mask;
    const std::vector<int32_t> lengths = {7, 99};
    bad.kv_lengths = lengths.data();
    EXPECT_EQ(attngen_mha_forward_device(m.get(), 2, 5, 7, query.address(), key.address(),
                                         value.address(), &bad, untouched_out.address(), 0),
              ATTNGEN_ERROR_SHAPE);
    EXPECT_NE(std::string(attngen_last_error()).find("kv_lengths"), std::string::npos)
        << attngen_last_error();
    EXPECT_TRUE(Untouched("out", untouched_out.Download()));
}

TEST_F(DeviceTest, DeviceMemoryErrorsAreReported) {
    const attngen_device device = DeviceUnderTest();
    uint64_t address = 0;
    EXPECT_EQ(attngen_device_alloc(device, 0, &address), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_device_alloc(device, 16, nullptr), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_device_free(device, 0x1234), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attngen_last_error()).find("attngen_device_alloc"), std::string::npos);
    ASSERT_EQ(attngen_device_alloc(device, 16, &address), ATTNGEN_OK) << attngen_last_error();
    float host[8] = {};
    EXPECT_EQ(attngen_device_upload(device, address, host, sizeof(host)),
              ATTNGEN_ERROR_INVALID_ARGUMENT)
        << "32 bytes into a 16-byte allocation";
    EXPECT_NE(std::string(attngen_last_error()).find("16 bytes"), std::string::npos)
        << attngen_last_error();
    EXPECT_EQ(attngen_device_free(device, address), ATTNGEN_OK);
    EXPECT_EQ(attngen_device_free(device, address), ATTNGEN_ERROR_INVALID_ARGUMENT)
        << "double free is refused";
    EXPECT_EQ(attngen_device_free(device, 0), ATTNGEN_OK);
}

// The weights output is one buffer (and its kernel keeps every score in device memory): shapes
// whose weights Halide cannot index are refused before anything is read (the inputs here are
// far smaller than the shape says). Without weights the same shape is not refused up front.
TEST_F(DeviceTest, WeightsBeyondIndexingAreRefused) {
    const attngen_mha_config config{
        8, 2,   0, 0, 0, 1, DeviceUnderTest(), 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
        0, 0.0f};
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const std::vector<float> w(64, 0.1f), b(8, 0.0f), x(8, 1.0f);
    ASSERT_EQ(attngen_mha_set_weights(m.get(), w.data(), w.data(), w.data(), w.data(), b.data(),
                                      b.data(), b.data(), b.data()),
              ATTNGEN_OK);
    std::vector<float> out(8, kSentinel), weights(8, kSentinel);
    EXPECT_EQ(attngen_mha_forward(m.get(), 1, 32768, 32768, x.data(), x.data(), x.data(), nullptr,
                                  out.data(), weights.data()),
              ATTNGEN_ERROR_SHAPE);
    EXPECT_NE(std::string(attngen_last_error()).find("weights"), std::string::npos)
        << attngen_last_error();
    EXPECT_TRUE(Untouched("out", out));
    EXPECT_TRUE(Untouched("weights", weights));
}

// Without weights the GPU kernel is flash attention: key blocks streamed through a block's
// shared memory, many of them here, with the causal limit and key lengths inside them.
TEST_F(DeviceTest, ManyKeyBlocksWithoutWeights) {
    Tester()
        .d_model(16)
        .num_heads(4)
        .num_kv_heads(2)
        .batch(2)
        .q_len(37)
        .kv_len(1000)
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .kv_lengths({1000, 517})
        .with_weights(false)
        .Test();
}

TEST_F(DeviceTest, CpuHandleRefusesDeviceAddresses) {
    const attngen_mha_config config{
        8, 2,   0, 0, 0, 1, ATTNGEN_DEVICE_CPU, 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
        0, 0.0f};
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK);
    MhaHandle m(raw);
    EXPECT_EQ(attngen_mha_forward_device(m.get(), 1, 1, 1, 8, 8, 8, nullptr, 8, 0),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attngen_last_error()).find("CPU"), std::string::npos);
}

}  // namespace
}  // namespace attngen_test
