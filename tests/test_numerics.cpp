// The numerical policy (README, "Robustness"):
//   - a NaN in an input reaches exactly the outputs that depend on it, as NaN, and changes no
//     other output by a single bit; +-Inf likewise changes no independent output;
//   - "depends on" is structural: output row i of batch item b (and head h) depends on query row
//     i, and on key and value row j and the additive entry (i, j) for every key j the mask leaves
//     visible to that row (a mask part, or an additive -inf, hides a key whatever its values);
//     a row with every key hidden depends on none of them and is zero;
//   - huge additive logits (+-1e30, +-FLT_MAX) are handled like any other (no NaN, the float64
//     reference's result);
//   - results are bit-identical from run to run and from handle to handle.
#include "../runtime/parallel_chunks.h"
#include "mha_tester.h"
#include "reference.h"
#include "sdpa_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace attngen_test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFloatMax = std::numeric_limits<float>::max();

// What the policy says of one output element after one input element was poisoned.
enum class Expect : uint8_t {
    kSame,       // independent of the poisoned input: bit-identical to the clean run
    kNaN,        // depends on a NaN
    kNonFinite,  // depends on an infinity in a way IEEE arithmetic makes NaN or +-Inf
    kAny,        // depends on an infinity in a way whose value the policy does not fix
};

// Checks every element of got against its expectation; names the first few violations.
::testing::AssertionResult FollowsPolicy(const std::string &what, const std::vector<int64_t> &shape,
                                         const std::vector<float> &got,
                                         const std::vector<float> &clean,
                                         const std::vector<Expect> &expect) {
    size_t violations = 0, dependent = 0;
    std::ostringstream detail;
    for (size_t i = 0; i < got.size(); ++i) {
        bool ok = true;
        const char *wanted = "";
        switch (expect[i]) {
            case Expect::kSame:
                ok = std::memcmp(&got[i], &clean[i], sizeof(float)) == 0;
                wanted = "unchanged";
                break;
            case Expect::kNaN:
                ok = std::isnan(got[i]);
                wanted = "NaN";
                break;
            case Expect::kNonFinite:
                ok = !std::isfinite(got[i]);
                wanted = "NaN or +-Inf";
                break;
            case Expect::kAny:
                break;
        }
        if (expect[i] != Expect::kSame) ++dependent;
        if (ok) continue;
        if (++violations <= 4) {
            detail << "\n  " << what << Coordinates(shape, i) << ": expected " << wanted
                   << " (clean run " << ::testing::PrintToString(clean[i]) << "), got "
                   << ::testing::PrintToString(got[i]);
        }
    }
    if (violations == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << what << ": " << violations << " of " << got.size() << " elements break the policy ("
           << dependent << " depend on the poisoned input):" << detail.str();
}

// True when key j is visible to query i of batch item b in head h: no mask part hides it and its
// additive entry is not -inf.
bool Visible(const attngen_mask *mask, const attngen_ref::SdpaShape &s, int b, int h, int i,
             int j) {
    return !attngen_ref::hard_masked(mask, s, b, i, j) &&
           attngen_ref::additive_at(mask, s, b, h, i, j) !=
               -std::numeric_limits<double>::infinity();
}

bool RowHasVisibleKey(const attngen_mask *mask, const attngen_ref::SdpaShape &s, int b, int h,
                      int i) {
    for (int j = 0; j < s.kv_len; ++j)
        if (Visible(mask, s, b, h, i, j)) return true;
    return false;
}

size_t Index4(const attngen_ref::SdpaShape &s, int b, int h, int i, int last, int last_extent,
              int third_extent) {
    return ((size_t(b) * s.heads + h) * third_extent + i) * last_extent + last;
}

// ---------------------------------------------------------------------------------------------
// attngen_sdpa

// Masks of every kind, so that visibility varies from row to row: bottom-right causal with
// q_len > kv_len (row 0 sees no key), key padding (item 1 keeps 3 keys), a boolean mask and an
// additive mask with -inf entries.
struct SdpaProblem {
    attngen_ref::SdpaShape shape;
    SdpaTester tester;

    // kv_heads 0: one key/value head per query head (attngen_sdpa); otherwise grouped
    // (attngen_sdpa_gqa), where an entry of a key/value head reaches its whole group.
    explicit SdpaProblem(int kv_heads = 0) {
        shape.batch = 2, shape.heads = kv_heads ? 4 : 2, shape.q_len = 7, shape.kv_len = 6;
        shape.dk = 5, shape.dv = 4, shape.kv_heads = kv_heads;
        tester.batch(shape.batch)
            .heads(shape.heads)
            .kv_heads(kv_heads)
            .q_len(shape.q_len)
            .kv_len(shape.kv_len)
            .dk(shape.dk)
            .dv(shape.dv)
            .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
            .kv_lengths({6, 3})
            .bool_mask(1, 0.15)
            .additive(2, 1, 0.2)
            .with_weights(true);
    }
    std::vector<int64_t> out_shape() const {
        return {shape.batch, shape.heads, shape.q_len, shape.dv};
    }
    std::vector<int64_t> weights_shape() const {
        return {shape.batch, shape.heads, shape.q_len, shape.kv_len};
    }
};

// Expectations for the outputs of one SDPA run, all kSame to begin with.
struct SdpaExpectations {
    std::vector<Expect> out, weights;

    SdpaExpectations(const attngen_ref::SdpaShape &s)
        : out(size_t(s.batch) * s.heads * s.q_len * s.dv, Expect::kSame),
          weights(size_t(s.batch) * s.heads * s.q_len * s.kv_len, Expect::kSame) {}

    // Row (b, h, i) depends on the poison: its output columns (all, or just `column`) and the
    // weights of its visible keys; its hidden keys keep weight 0.
    void Row(const attngen_mask *mask, const attngen_ref::SdpaShape &s, int b, int h, int i,
             Expect e, int column = -1) {
        if (!RowHasVisibleKey(mask, s, b, h, i)) return;  // zero whatever the inputs
        for (int c = 0; c < s.dv; ++c)
            if (column < 0 || c == column) out[Index4(s, b, h, i, c, s.dv, s.q_len)] = e;
        if (column >= 0) return;  // a value entry moves no weight
        for (int j = 0; j < s.kv_len; ++j)
            if (Visible(mask, s, b, h, i, j)) weights[Index4(s, b, h, i, j, s.kv_len, s.q_len)] = e;
    }
};

enum class SdpaInput { kQ, kK, kV, kAdditive };

const char *Name(SdpaInput input) {
    switch (input) {
        case SdpaInput::kQ:
            return "q";
        case SdpaInput::kK:
            return "k";
        case SdpaInput::kV:
            return "v";
        case SdpaInput::kAdditive:
            return "additive";
    }
    return "?";
}

// Runs the problem clean and with one input element replaced by `poison`, then checks every
// output element against the policy. for_dependent says what a dependent element must be.
void CheckSdpaPoison(SdpaInput input, float poison, Expect for_dependent, int kv_heads = 0) {
    SdpaProblem p(kv_heads);
    const attngen_ref::SdpaShape &s = p.shape;
    const SdpaTester::Run clean = p.tester.Execute();
    ASSERT_EQ(clean.status, ATTNGEN_OK) << attngen_last_error();

    const size_t count = input == SdpaInput::kQ   ? clean.q.size()
                         : input == SdpaInput::kK ? clean.k.size()
                         : input == SdpaInput::kV ? clean.v.size()
                                                  : clean.masks.additive.size();
    for (size_t at = 0; at < count; ++at) {
        SdpaTester::Run r = p.tester.Prepare();
        SdpaExpectations e(s);
        const attngen_mask *mask = &r.masks.mask;
        // Decode the poisoned element's coordinates; mark what depends on it (from the clean
        // mask: a NaN additive entry unhides its key, which the marking below accounts for).
        if (input == SdpaInput::kQ) {
            r.q[at] = poison;
            const size_t row = at / s.dk;
            const int i = int(row % s.q_len), h = int(row / s.q_len % s.heads),
                      b = int(row / s.q_len / s.heads);
            e.Row(mask, s, b, h, i, for_dependent);
        } else if (input == SdpaInput::kK || input == SdpaInput::kV) {
            const int width = input == SdpaInput::kK ? s.dk : s.dv;
            (input == SdpaInput::kK ? r.k : r.v)[at] = poison;
            const size_t row = at / width;
            const int kv_heads = s.key_heads(), group = s.heads / kv_heads;
            const int j = int(row % s.kv_len), kh = int(row / s.kv_len % kv_heads),
                      b = int(row / s.kv_len / kv_heads);
            const int column = input == SdpaInput::kV ? int(at % width) : -1;
            for (int h = kh * group; h < (kh + 1) * group; ++h)
                for (int i = 0; i < s.q_len; ++i)
                    if (Visible(mask, s, b, h, i, j))
                        e.Row(mask, s, b, h, i, for_dependent, column);
        } else {
            // additive [additive_batch = 2, additive_heads = 1, q_len, kv_len]: every head.
            const int j = int(at % s.kv_len), i = int(at / s.kv_len % s.q_len),
                      b = int(at / s.kv_len / s.q_len);
            r.masks.additive[at] = poison;
            for (int h = 0; h < s.heads; ++h)
                if (!attngen_ref::hard_masked(mask, s, b, i, j))
                    e.Row(mask, s, b, h, i, for_dependent);
        }
        p.tester.Call(r);
        ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
        SCOPED_TRACE(std::string(Name(input)) + "[" + std::to_string(at) +
                     "] = " + ::testing::PrintToString(poison));
        EXPECT_TRUE(FollowsPolicy("out", p.out_shape(), r.out, clean.out, e.out));
        EXPECT_TRUE(
            FollowsPolicy("weights", p.weights_shape(), r.weights, clean.weights, e.weights));
        if (::testing::Test::HasFailure()) return;  // one reported case says enough
    }
}

TEST(NumericsSdpa, NanInQueryReachesItsRowOnly) {
    CheckSdpaPoison(SdpaInput::kQ, kNaN, Expect::kNaN);
}
TEST(NumericsSdpa, NanInKeyReachesTheRowsThatSeeIt) {
    CheckSdpaPoison(SdpaInput::kK, kNaN, Expect::kNaN);
}
TEST(NumericsSdpa, NanInValueReachesItsColumnOfTheRowsThatSeeIt) {
    CheckSdpaPoison(SdpaInput::kV, kNaN, Expect::kNaN);
}
TEST(NumericsSdpa, NanInAdditiveMaskReachesItsRowOnly) {
    CheckSdpaPoison(SdpaInput::kAdditive, kNaN, Expect::kNaN);
}
TEST(NumericsSdpa, InfInValueReachesItsColumnOfTheRowsThatSeeIt) {
    CheckSdpaPoison(SdpaInput::kV, kInf, Expect::kNonFinite);
    CheckSdpaPoison(SdpaInput::kV, -kInf, Expect::kNonFinite);
}
// Grouped heads: an entry of key/value head kh reaches the query heads of its group, and no
// other (the fuzzer found infinite values poisoning the wrong heads, and a read past v).
TEST(NumericsSdpa, GroupedKeyAndValueEntriesReachTheirGroupOnly) {
    CheckSdpaPoison(SdpaInput::kK, kNaN, Expect::kNaN, 2);
    CheckSdpaPoison(SdpaInput::kV, kNaN, Expect::kNaN, 2);
    CheckSdpaPoison(SdpaInput::kV, kInf, Expect::kNonFinite, 2);
    CheckSdpaPoison(SdpaInput::kV, -kInf, Expect::kNonFinite, 2);
}
// An infinite query or key entry makes that row's logits +-Inf or NaN, whose softmax IEEE
// arithmetic defines case by case; the policy fixes only that no other output moves.
TEST(NumericsSdpa, InfInQueryOrKeyChangesNoIndependentOutput) {
    CheckSdpaPoison(SdpaInput::kQ, kInf, Expect::kAny);
    CheckSdpaPoison(SdpaInput::kK, -kInf, Expect::kAny);
}
// +Inf added to a visible logit: the row's maximum is +Inf and its softmax Inf/Inf.
TEST(NumericsSdpa, PlusInfInAdditiveMaskMakesItsRowNonFinite) {
    CheckSdpaPoison(SdpaInput::kAdditive, kInf, Expect::kNonFinite);
}

// ---------------------------------------------------------------------------------------------
// attngen_mha_forward: the projections mix every feature of a row, and the output projection
// every head, so a poisoned row reaches whole output rows.

struct MhaProblem {
    MhaTester tester;
    int batch = 2, q_len = 7, kv_len = 6, heads = 2, d_model = 8;
    MhaProblem() {
        tester.d_model(d_model)
            .num_heads(heads)
            .batch(batch)
            .q_len(q_len)
            .kv_len(kv_len)
            .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
            .kv_lengths({6, 3})
            .bool_mask(1, 0.15)
            .additive(2, 2, 0.2)
            .with_weights(true);
    }
    attngen_ref::SdpaShape shape() const {
        attngen_ref::SdpaShape s;
        s.batch = batch, s.heads = heads, s.q_len = q_len, s.kv_len = kv_len;
        return s;
    }
};

enum class MhaInput { kQuery, kKey, kValue };

void CheckMhaPoison(MhaInput input, float poison) {
    MhaProblem p;
    const attngen_ref::SdpaShape s = p.shape();
    const attngen_mha_config config = p.tester.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    ASSERT_EQ(p.tester.MakeModel().SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    MhaTester::Run clean = p.tester.Prepare(DefaultSeed());
    p.tester.Call(raw, clean);
    ASSERT_EQ(clean.status, ATTNGEN_OK) << attngen_last_error();

    const size_t rows = size_t(p.batch) * (input == MhaInput::kQuery ? p.q_len : p.kv_len);
    for (size_t row = 0; row < rows; ++row) {
        MhaTester::Run r = p.tester.Prepare(DefaultSeed());
        const int len = input == MhaInput::kQuery ? p.q_len : p.kv_len;
        const int b = int(row / len), t = int(row % len);
        // One feature of the row (kdim = vdim = d_model here); which one does not matter.
        std::vector<float> &tensor = input == MhaInput::kQuery ? r.query
                                     : input == MhaInput::kKey ? r.key
                                                               : r.value;
        tensor[row * p.d_model + row % p.d_model] = poison;
        const attngen_mask *mask = &r.masks.mask;
        std::vector<Expect> out(r.out.size(), Expect::kSame), w(r.weights.size(), Expect::kSame);
        for (int i = 0; i < p.q_len; ++i) {
            bool out_row_depends = false;
            for (int h = 0; h < p.heads; ++h) {
                if (!RowHasVisibleKey(mask, s, b, h, i)) continue;
                const bool depends =
                    input == MhaInput::kQuery ? i == t : Visible(mask, s, b, h, i, t);
                if (!depends) continue;
                out_row_depends = true;
                if (input == MhaInput::kValue) continue;  // values move no weight
                for (int j = 0; j < p.kv_len; ++j)
                    if (Visible(mask, s, b, h, i, j))
                        w[Index4(s, b, h, i, j, p.kv_len, p.q_len)] = Expect::kNaN;
            }
            if (out_row_depends) {
                for (int c = 0; c < p.d_model; ++c)
                    out[(size_t(b) * p.q_len + i) * p.d_model + c] = Expect::kNaN;
            }
        }
        p.tester.Call(raw, r);
        ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
        SCOPED_TRACE("poisoned row " + std::to_string(row));
        EXPECT_TRUE(FollowsPolicy("out", {p.batch, p.q_len, p.d_model}, r.out, clean.out, out));
        EXPECT_TRUE(FollowsPolicy("weights", {p.batch, p.heads, p.q_len, p.kv_len}, r.weights,
                                  clean.weights, w));
        if (::testing::Test::HasFailure()) return;
    }
}

TEST(NumericsMha, NanInQueryRowReachesItsOutputRowOnly) {
    CheckMhaPoison(MhaInput::kQuery, kNaN);
}
TEST(NumericsMha, NanInKeyRowReachesTheRowsThatSeeIt) {
    CheckMhaPoison(MhaInput::kKey, kNaN);
}
TEST(NumericsMha, NanInValueRowReachesTheRowsThatSeeIt) {
    CheckMhaPoison(MhaInput::kValue, kNaN);
}

// A tensor passed as more than one of query, key and value is scanned once (nonfinite.cpp). A
// NaN anywhere in such a tensor must still be found: here it sits in a key row that batch item
// 1's key length hides, so no output may change but the poisoned row's own, when the tensor is
// the query too. (Without the scan, the kernel's 0 x NaN for the hidden value makes every row
// of item 1 NaN.) The tensor and the output are 800 KiB, so the scan and the staged output's
// copy run in chunks on the thread pool (parallel_chunks.h); there is a NaN in every chunk.
TEST(NumericsMha, NanInALargeSharedInputIsFound) {
    constexpr int kBatch = 2, kLen = 1600, kModel = 64, kHeads = 2;
    attngen_mha_config config{};
    config.d_model = kModel;
    config.num_heads = kHeads;
    config.use_bias = 1;
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    Rng rng(DefaultSeed());
    const size_t square = size_t(kModel) * kModel;
    const auto wq = rng.Uniform(square, -0.1f, 0.1f), wk = rng.Uniform(square, -0.1f, 0.1f),
               wv = rng.Uniform(square, -0.1f, 0.1f), wo = rng.Uniform(square, -0.1f, 0.1f);
    const auto bias = rng.Uniform(kModel, -0.1f, 0.1f);
    ASSERT_EQ(attngen_mha_set_weights(raw, wq.data(), wk.data(), wv.data(), wo.data(), bias.data(),
                                      bias.data(), bias.data(), bias.data()),
              ATTNGEN_OK)
        << attngen_last_error();
    const int32_t lengths[kBatch] = {500, 300};
    attngen_mask mask{};
    mask.kv_lengths = lengths;
    const size_t elements = size_t(kBatch) * kLen * kModel;
    constexpr attngen::rt::ChunkGrain kScan = attngen::rt::kScanGrain;
    ASSERT_GE(elements, (kScan.min_chunks - 1) * kScan.elements + 1);
    const auto clean = rng.Uniform(elements, -1.0f, 1.0f);
    const auto forward = [&](const std::vector<float> &q, const std::vector<float> &kv) {
        std::vector<float> out = NaNs(elements);
        EXPECT_EQ(attngen_mha_forward(raw, kBatch, kLen, kLen, q.data(), kv.data(), kv.data(),
                                      &mask, out.data(), nullptr),
                  ATTNGEN_OK)
            << attngen_last_error();
        return out;
    };
    const std::vector<float> reference = forward(clean, clean);
    // The last element (row 1599 of item 1), the first of chunks 2 and 3 (rows 448 and 1472 of
    // item 1), and the two elements either side of chunks 0 and 1's boundary (rows 1023 and 1024
    // of item 0): every one past its item's key length.
    constexpr size_t kChunk = kScan.elements;
    for (size_t poisoned : {elements - 1, 2 * kChunk, 3 * kChunk, kChunk - 1, kChunk}) {
        const size_t row = poisoned / kModel;
        ASSERT_GE(row % kLen, size_t(lengths[row / kLen]));
        for (bool query_too : {true, false}) {
            SCOPED_TRACE("element " + std::to_string(poisoned) +
                         (query_too ? ", query = key = value" : ", key = value"));
            std::vector<float> shared = clean;
            shared[poisoned] = std::numeric_limits<float>::quiet_NaN();
            const std::vector<float> out = forward(query_too ? shared : clean, shared);
            for (size_t i = 0; i < out.size(); ++i) {
                if (query_too && i / kModel == row) {
                    ASSERT_TRUE(std::isnan(out[i])) << "output " << i << " is " << out[i];
                } else {
                    ASSERT_EQ(out[i], reference[i]) << "output " << i;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// attngen_linear: y[r, o] depends on row r of x and row o of w.

TEST(NumericsLinear, NanReachesItsRowOrColumnOnly) {
    const int rows = 9, in = 13, out = 11;
    Rng rng(DefaultSeed());
    const std::vector<float> x = rng.Uniform(size_t(rows) * in, -1, 1);
    const std::vector<float> w = rng.Uniform(size_t(out) * in, -1, 1);
    const std::vector<float> bias = rng.Uniform(size_t(out), -1, 1);
    auto run = [&](const std::vector<float> &xs, const std::vector<float> &ws) {
        std::vector<float> y = NaNs(size_t(rows) * out);
        EXPECT_EQ(attngen_linear(rows, in, out, xs.data(), ws.data(), bias.data(), y.data()),
                  ATTNGEN_OK)
            << attngen_last_error();
        return y;
    };
    const std::vector<float> clean = run(x, w);
    for (int r = 0; r < rows; ++r) {
        std::vector<float> xs = x;
        xs[size_t(r) * in + r % in] = kNaN;
        std::vector<Expect> e(clean.size(), Expect::kSame);
        for (int o = 0; o < out; ++o) e[size_t(r) * out + o] = Expect::kNaN;
        EXPECT_TRUE(FollowsPolicy("y", {rows, out}, run(xs, w), clean, e)) << "x row " << r;
    }
    for (int o = 0; o < out; ++o) {
        std::vector<float> ws = w;
        ws[size_t(o) * in + o % in] = kNaN;
        std::vector<Expect> e(clean.size(), Expect::kSame);
        for (int r = 0; r < rows; ++r) e[size_t(r) * out + o] = Expect::kNaN;
        EXPECT_TRUE(FollowsPolicy("y", {rows, out}, run(x, ws), clean, e)) << "w row " << o;
    }
}

// ---------------------------------------------------------------------------------------------
// Fully masked rows.

// A row that sees no key is zero even when its own query, and every key and value, is NaN.
TEST(NumericsMasking, FullyMaskedRowIsZeroWhateverTheInputs) {
    SdpaTester t;
    t.batch(1).heads(2).q_len(4).kv_len(3).dk(3).dv(2).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT);
    SdpaTester::Run r = t.with_weights(true).Prepare();
    std::fill(r.q.begin(), r.q.begin() + 3, kNaN);  // query row 0 of head 0 (sees no key)
    t.Call(r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    for (int c = 0; c < 2; ++c) EXPECT_EQ(r.out[c], 0.0f) << "out[0, 0, 0, " << c << "]";
    for (int j = 0; j < 3; ++j) EXPECT_EQ(r.weights[j], 0.0f) << "weights[0, 0, 0, " << j << "]";
}

// Every key hidden by an additive -inf in one head only: that head's row is zero, the other's not.
TEST(NumericsMasking, AdditiveNegativeInfinityRowIsZeroInItsHeadOnly) {
    const int q_len = 3, kv_len = 5;
    std::vector<float> additive(size_t(2) * q_len * kv_len, 0.0f);
    for (int j = 0; j < kv_len; ++j) additive[size_t(1) * kv_len + j] = -kInf;  // head 0, row 1
    SdpaTester t;
    t.heads(2).q_len(q_len).kv_len(kv_len).dk(4).dv(3).additive_values(1, 2, additive);
    const SdpaTester::Run r = t.with_weights(true).Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(r.out[size_t(1) * 3 + c], 0.0f);
        EXPECT_NE(r.out[(size_t(q_len) + 1) * 3 + c], 0.0f);  // head 1, row 1
    }
    t.Check(r);
}

// ---------------------------------------------------------------------------------------------
// Huge additive logits. Their rounding bound (error_bounds.h) would be as huge as they are, so
// results are compared with fixed tolerances: the exact softmax here is one-hot, uniform over a
// few keys, or the softmax of the small logits alone.

void ExpectMatchesReferenceWithFixedTolerance(const SdpaTester &t, const SdpaTester::Run &r,
                                              const attngen_ref::SdpaShape &s) {
    const attngen_ref::SdpaResult ref =
        attngen_ref::sdpa(s, r.q.data(), r.k.data(), r.v.data(), &r.masks.mask, 0.0);
    for (float x : r.out) ASSERT_TRUE(std::isfinite(x)) << x;
    for (float x : r.weights) ASSERT_TRUE(std::isfinite(x)) << x;
    // Probabilities to 1e-6 (fast exp, float sums); outputs are averages of values in [-1, 1].
    if (!r.weights.empty()) {
        EXPECT_TRUE(AllClose("weights", {s.batch, s.heads, s.q_len, s.kv_len}, ref.weights,
                             r.weights.data(), {{1e-6}, 1e-5, "fixed: probabilities"}));
    }
    EXPECT_TRUE(AllClose("out", {s.batch, s.heads, s.q_len, s.dv}, ref.out, r.out.data(),
                         {{1e-5}, 1e-5, "fixed: averages of values in [-1, 1]"}));
    (void)t;
}

TEST(NumericsExtremeLogits, PlusMinus1e30AndFloatMaxAdditiveEntries) {
    attngen_ref::SdpaShape s;
    s.batch = 1, s.heads = 1, s.q_len = 8, s.kv_len = 6, s.dk = 4, s.dv = 3;
    const float big[] = {1e30f, -1e30f, kFloatMax, -kFloatMax};
    std::vector<float> a(size_t(s.q_len) * s.kv_len, 0.0f);
    auto row = [&](int i) { return a.begin() + size_t(i) * s.kv_len; };
    std::fill(row(0), row(1), 1e30f);   // every key +1e30: the plain softmax
    std::fill(row(1), row(2), -1e30f);  // every key -1e30: the same, not masked
    row(2)[3] = 1e30f;                  // one +1e30 among zeros: one-hot
    row(3)[1] = row(3)[4] = 1e30f;      // two: uniform over them
    for (int j = 0; j < s.kv_len; ++j) row(4)[j] = big[j % 4];  // all four kinds in one row
    std::fill(row(5), row(6), -kFloatMax);                      // HF's finfo.min mask on every key
    row(6)[0] = -kFloatMax, row(6)[5] = -kInf;                  // finfo.min beside -inf
    row(7)[2] = kFloatMax;                                      // +FLT_MAX among zeros: one-hot
    SdpaTester t;
    t.q_len(s.q_len).kv_len(s.kv_len).dk(s.dk).dv(s.dv).additive_values(1, 1, a);
    const SdpaTester::Run r = t.with_weights(true).Execute();
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    ExpectMatchesReferenceWithFixedTolerance(t, r, s);
    // Without the weights output the kernel takes the flash path (key blocks, online softmax),
    // which rounds differently but must meet the same bound.
    const SdpaTester::Run plain = t.with_weights(false).Execute();
    ASSERT_EQ(plain.status, ATTNGEN_OK) << attngen_last_error();
    ASSERT_TRUE(plain.weights.empty());
    ExpectMatchesReferenceWithFixedTolerance(t, plain, s);
}

TEST(NumericsExtremeLogits, MhaWithPlusMinus1e30AdditiveMask) {
    MhaTester t;
    t.d_model(16).num_heads(2).batch(1).q_len(5).kv_len(7).with_weights(true);
    const attngen_mha_config config = t.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const MhaTester::Model model = t.MakeModel();
    ASSERT_EQ(model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    MhaTester::Run r = t.Prepare(DefaultSeed());
    std::vector<float> additive(size_t(2) * 5 * 7, 0.0f);
    for (size_t e = 0; e < additive.size(); ++e)
        additive[e] = e % 3 == 0 ? -1e30f : e % 5 == 0 ? 1e30f : 0.0f;
    r.masks.additive = additive;
    r.masks.mask.additive = r.masks.additive.data();
    r.masks.mask.additive_batch = 1;
    r.masks.mask.additive_heads = 2;
    t.Call(raw, r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    const attngen_ref::MhaResult ref = attngen_ref::mha(
        config, model.ref(), 1, 5, 7, r.query.data(), r.key_ptr, r.value_ptr, &r.masks.mask);
    for (float x : r.out) ASSERT_TRUE(std::isfinite(x)) << x;
    EXPECT_TRUE(AllClose("weights", {1, 2, 5, 7}, ref.weights, r.weights.data(),
                         {{1e-6}, 1e-5, "fixed: probabilities"}));
    EXPECT_TRUE(AllClose("out", {1, 5, 16}, ref.out, r.out.data(),
                         {{1e-5}, 1e-4, "fixed: small weights and inputs"}));
}

// ---------------------------------------------------------------------------------------------
// Determinism: the same call gives the same bits, every time and on every handle, NaNs
// included.

TEST(NumericsDeterminism, SdpaRepeatsBitForBit) {
    SdpaTester t;
    t.batch(2)
        .heads(3)
        .q_len(45)
        .kv_len(50)
        .dk(16)
        .dv(8)
        .causal(ATTNGEN_CAUSAL_TOP_LEFT)
        .additive(2, 3, 0.1)
        .with_weights(true);
    SdpaTester::Run first = t.Prepare();
    first.q[17] = kNaN;
    t.Call(first);
    ASSERT_EQ(first.status, ATTNGEN_OK) << attngen_last_error();
    for (int run = 0; run < 5; ++run) {
        SdpaTester::Run again = t.Prepare();
        again.q[17] = kNaN;
        t.Call(again);
        ASSERT_EQ(again.status, ATTNGEN_OK) << attngen_last_error();
        EXPECT_TRUE(BitIdentical("out", again.out, first.out));
        EXPECT_TRUE(BitIdentical("weights", again.weights, first.weights));
    }
}

TEST(NumericsDeterminism, MhaRepeatsBitForBitAcrossHandles) {
    MhaTester t;
    t.d_model(48)
        .num_heads(6)
        .batch(2)
        .q_len(40)
        .kv_len(33)
        .kv_lengths({33, 20})
        .bool_mask(2, 0.1)
        .with_weights(false);
    const MhaTester::Model model = t.MakeModel();
    std::vector<float> first;
    for (int handle = 0; handle < 3; ++handle) {
        const attngen_mha_config config = t.config();
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle m(raw);
        ASSERT_EQ(model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
        for (int run = 0; run < 2; ++run) {
            MhaTester::Run r = t.Prepare(DefaultSeed());
            t.Call(raw, r);
            ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
            if (first.empty())
                first = r.out;
            else
                EXPECT_TRUE(BitIdentical("out", r.out, first)) << "handle " << handle;
        }
    }
}

}  // namespace
}  // namespace attngen_test
