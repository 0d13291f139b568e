// The attention path without a weights output works on query blocks and key blocks (an online
// softmax over key blocks; key blocks a causal mask hides from a whole query block are skipped,
// and the block holding the diagonal is computed only up to the query block's last key). These
// tests put q_len, kv_len, the causal diagonal and the key lengths on each side of the block
// sizes a schedule may use (16..128 queries, 64..256 keys), against the float64 reference.
// Every call here asks for no weights: with weights, the kernels take the path that
// materializes the probabilities, which test_sdpa.cpp and test_mha.cpp cover.
#include "mha_tester.h"
#include "sdpa_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace attngen_test {
namespace {

struct BlockCase {
    int q_len, kv_len;
    attngen_causal causal;
};

std::string CaseName(const ::testing::TestParamInfo<BlockCase> &info) {
    const BlockCase &c = info.param;
    const char *causal = c.causal == ATTNGEN_CAUSAL_NONE       ? "NoCausal"
                         : c.causal == ATTNGEN_CAUSAL_TOP_LEFT ? "TopLeft"
                                                               : "BottomRight";
    return std::string(causal) + "_q" + std::to_string(c.q_len) + "_kv" + std::to_string(c.kv_len);
}

std::vector<BlockCase> BlockCases() {
    std::vector<BlockCase> cases;
    for (attngen_causal causal :
         {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
        for (int q_len : {1, 33, 127, 129, 200, 257}) {
            for (int kv_len : {63, 65, 127, 128, 129, 257, 300}) {
                cases.push_back({q_len, kv_len, causal});
            }
        }
    }
    return cases;
}

class FlashBlocks : public ::testing::TestWithParam<BlockCase> {
  protected:
    // The case's shape, without weights (the flash path), two heads of 8.
    static SdpaTester CaseTester(const BlockCase &c) {
        SdpaTester t;
        t.with_weights(false).batch(1).heads(2).q_len(c.q_len).kv_len(c.kv_len).dk(8).dv(8).causal(
            c.causal);
        return t;
    }
};

TEST_P(FlashBlocks, MatchesReference) {
    CaseTester(GetParam()).Test();
}

// The same cases with an additive and a boolean mask, whose reads follow the keys a block
// computes. With the diagonal block's limit unguarded (stages_flash.cpp: at least 1), the
// causal cases here failed.
TEST_P(FlashBlocks, MatchesReferenceWithMasks) {
    CaseTester(GetParam()).additive(1, 2).bool_mask(1).Test();
}

INSTANTIATE_TEST_SUITE_P(QueryAndKeyBlocks, FlashBlocks, ::testing::ValuesIn(BlockCases()),
                         CaseName);

// More queries than keys with a bottom-right causal mask: the first query blocks see no key at
// all, and their key blocks are never visited. The fuzzer found a case where bounds inference
// still sized those blocks from their negative limit and read the additive mask before key 0.
TEST(FlashBlocks, QueryBlocksThatSeeNoKeys) {
    for (int kv_len : {1, 10, 16, 17}) {
        SCOPED_TRACE(kv_len);
        SdpaTester()
            .with_weights(false)
            .batch(2)
            .heads(3)
            .q_len(56)
            .kv_len(kv_len)
            .dk(3)
            .dv(3)
            .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
            .additive(1, 1)
            .Test();
        MhaTester()
            .with_weights(false)
            .d_model(9)
            .num_heads(3)
            .batch(2)
            .q_len(56)
            .kv_len(kv_len)
            .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
            .additive(1, 1)
            .Test();
    }
}

// Key lengths that end just before, at and just after a key block (64, 128 or 256 keys), and
// zero, with a causal mask in the same batch.
TEST(FlashBlocks, KeyLengthsAtBlockEdges) {
    for (attngen_causal causal : {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
        SCOPED_TRACE(int(causal));
        SdpaTester()
            .with_weights(false)
            .batch(10)
            .heads(1)
            .q_len(70)
            .kv_len(300)
            .dk(8)
            .dv(8)
            .causal(causal)
            .kv_lengths({0, 1, 63, 64, 127, 128, 129, 255, 256, 257})
            .Test();
    }
}

// A row whose largest logit is in a late key block: every earlier block's partial result must
// be rescaled by the new maximum, by a factor that underflows to exactly 0.
TEST(FlashBlocks, MaximumInTheLastKeyBlock) {
    const int q_len = 3, kv_len = 300;
    std::vector<float> additive(size_t(q_len) * kv_len, 0.0f);
    for (int i = 0; i < q_len; ++i) additive[size_t(i) * kv_len + kv_len - 1 - i] = 200.0f;
    SdpaTester()
        .with_weights(false)
        .q_len(q_len)
        .kv_len(kv_len)
        .dk(4)
        .dv(4)
        .additive_values(1, 1, additive)
        .Test();
}

// Long and head_dim 64, as the benchmarks' long shapes, with both causal kinds.
TEST(FlashBlocks, LongCausalHeadDim64) {
    for (attngen_causal causal : {ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
        SCOPED_TRACE(int(causal));
        SdpaTester()
            .with_weights(false)
            .batch(1)
            .heads(2)
            .q_len(385)
            .kv_len(515)
            .dk(64)
            .dv(64)
            .causal(causal)
            .Test();
    }
}

// Keys and values past kLongKeyValueBytes per head (1100 keys of 64 + 64 floats, 563 KB): the
// long query blocks apply, 128 queries without a causal mask and 32 (twice the tuned
// query_block) with one; q_len sits one past each and one short of the causal one.
TEST(FlashBlocks, LongKeysUseLongQueryBlocks) {
    for (attngen_causal causal :
         {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
        for (int q_len : {31, 33, 129}) {
            SCOPED_TRACE(testing::Message() << "causal " << int(causal) << ", q_len " << q_len);
            SdpaTester()
                .with_weights(false)
                .batch(1)
                .heads(1)
                .q_len(q_len)
                .kv_len(1100)
                .dk(64)
                .dv(64)
                .causal(causal)
                .Test();
        }
    }
}

// Keys past the tuned key_block (768 on x86) are split into blocks of an equal share rounded up
// to whole kKeyBlockGrains (stages_flash.cpp): 769 keys as 448 + 321, 1536 as 768 + 768, 1537 as
// 576 + 576 + 385. Each side of those edges, every causal kind, and an item whose keys end about
// half-way.
TEST(FlashBlocks, KeysSplitIntoEvenBlocks) {
    for (attngen_causal causal :
         {ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_TOP_LEFT, ATTNGEN_CAUSAL_BOTTOM_RIGHT}) {
        for (int kv_len : {767, 768, 769, 1536, 1537}) {
            SCOPED_TRACE(testing::Message() << "causal " << int(causal) << ", kv_len " << kv_len);
            SdpaTester()
                .with_weights(false)
                .batch(2)
                .heads(2)
                .q_len(40)
                .kv_len(kv_len)
                .dk(8)
                .dv(8)
                .causal(causal)
                .kv_lengths({kv_len, kv_len / 2 + 1})
                .Test();
        }
    }
}

// Value heads past 32 KiB (stages.cpp: kValuesInPlaceBytes) that a probs x values tile spans
// only part of (AVX2 tiles of 16 features, SSE4.1 of 8, AVX-512 of 64: dv 128) are read from
// panels of a tile's features; heads that are not whole tiles (40 and 72 on AVX2 and AVX-512)
// pad their last panel.
// Both paths (with weights, the materialized one), grouped heads, an item short of its keys.
TEST(FlashBlocks, ValueHeadsInPanels) {
    for (int dv : {40, 64, 72, 128}) {
        for (bool weights : {false, true}) {
            SCOPED_TRACE(testing::Message() << "dv " << dv << ", weights " << weights);
            SdpaTester()
                .with_weights(weights)
                .batch(2)
                .heads(4)
                .kv_heads(2)
                .q_len(37)
                .kv_len(300)
                .dk(24)
                .dv(dv)
                .kv_lengths({300, 131})
                .Test();
        }
    }
}

}  // namespace
}  // namespace attngen_test
