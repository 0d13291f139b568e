// Sizes past what a kernel can index, and allocations that fail: a clear SHAPE or
// OUT_OF_MEMORY status with a message, nothing written, never a crash or a wrong answer. Huge
// shapes come with tiny buffers: the library must refuse before touching them (the sanitized
// suite turns any touch into a failure).
#include "mha_tester.h"
#include "test_util.h"

#include <HalideRuntime.h>
#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

namespace attngen_test {
namespace {

constexpr attngen_status kShape = ATTNGEN_ERROR_SHAPE;

// Buffers far smaller than any shape below describes.
struct TinyBuffers {
    std::vector<float> in = std::vector<float>(64, 0.25f);
    std::vector<float> out = std::vector<float>(64, kSentinel);
    std::vector<float> weights = std::vector<float>(64, kSentinel);
};

::testing::AssertionResult RefusedWithMessage(attngen_status got,
                                              std::initializer_list<attngen_status> allowed) {
    const std::string message = attngen_last_error();
    for (attngen_status s : allowed) {
        if (got == s && !message.empty()) return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "status " << attngen_status_string(got) << ", message \"" << message << "\"";
}

// Each size argument of attngen_sdpa at INT32_MAX in turn (the others small): some tensor
// exceeds 2^31 - 1 bytes.
TEST(Limits, SdpaRefusesEveryHugeSizeBeforeTouchingMemory) {
    for (int which = 0; which < 6; ++which) {
        SCOPED_TRACE("size argument " + std::to_string(which));
        int32_t sizes[6] = {2, 2, 3, 3, 4, 4};  // batch, heads, q_len, kv_len, dk, dv
        sizes[which] = INT32_MAX;
        TinyBuffers t;
        const float *p = t.in.data();
        for (bool with_weights : {false, true}) {
            const attngen_status s = attngen_sdpa(sizes[0], sizes[1], sizes[2], sizes[3], sizes[4],
                                                  sizes[5], p, p, p, nullptr, 0.0f, t.out.data(),
                                                  with_weights ? t.weights.data() : nullptr);
            EXPECT_TRUE(RefusedWithMessage(s, {kShape}));
            EXPECT_TRUE(Untouched("out", t.out));
            EXPECT_TRUE(Untouched("weights", t.weights));
        }
    }
}

TEST(Limits, MhaForwardRefusesEveryHugeSizeBeforeTouchingMemory) {
    MhaTester tester;
    tester.d_model(8).num_heads(2);
    const attngen_mha_config config = tester.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    ASSERT_EQ(tester.MakeModel().SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    for (int which = 0; which < 3; ++which) {
        SCOPED_TRACE("size argument " + std::to_string(which));
        int32_t sizes[3] = {1, 2, 2};  // batch, q_len, kv_len
        sizes[which] = INT32_MAX;
        TinyBuffers t;
        const float *p = t.in.data();
        for (bool with_weights : {false, true}) {
            const attngen_status s =
                attngen_mha_forward(raw, sizes[0], sizes[1], sizes[2], p, p, p, nullptr,
                                    t.out.data(), with_weights ? t.weights.data() : nullptr);
            EXPECT_TRUE(RefusedWithMessage(s, {kShape}));
            EXPECT_TRUE(Untouched("out", t.out));
            EXPECT_TRUE(Untouched("weights", t.weights));
        }
    }
}

TEST(Limits, CreateRefusesEveryHugeSize) {
    for (int which = 0; which < 7; ++which) {
        SCOPED_TRACE("config field " + std::to_string(which));
        attngen_mha_config c{
            8, 2,   0, 0, 0, 1, ATTNGEN_DEVICE_CPU, 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
            0, 0.0f};
        int32_t *fields[7] = {&c.d_model,  &c.num_heads,  &c.kdim,        &c.vdim,
                              &c.head_dim, &c.v_head_dim, &c.num_kv_heads};
        *fields[which] = INT32_MAX;
        attngen_mha *m = nullptr;
        EXPECT_TRUE(RefusedWithMessage(attngen_mha_create(&c, &m), {kShape}));
        EXPECT_EQ(m, nullptr);
    }
}

// The kernels take at most 65536 heads and features per head. A head_dim beyond that with a
// tiny d_model passes the weights' size checks; its rotary table alone took gigabytes (found by
// the fuzzer), whether or not the handle rotates.
TEST(Limits, CreateRefusesHeadSizesBeyondTheKernels) {
    const auto refused = [](attngen_mha_config config) {
        attngen_mha *raw = nullptr;
        const attngen_status s = attngen_mha_create(&config, &raw);
        MhaHandle m(raw);
        return RefusedWithMessage(s, {kShape});
    };
    attngen_mha_config config{};
    config.d_model = 2;
    config.num_heads = 1;
    config.use_bias = 1;
    config.head_dim = (1 << 16) + 2;
    EXPECT_TRUE(refused(config));
    config.head_dim = 0;
    config.rotary_dim = 1 << 17;  // without rotation
    EXPECT_TRUE(refused(config));
    config.rotary_dim = 0;
    config.v_head_dim = (1 << 16) + 1;
    EXPECT_TRUE(refused(config));
}

// A KV cache is sized in the elements it stores: keys of 65568 positions of a 8192-wide head
// are 2^31 + 2^20 bytes in float32, refused, and 1 GiB in bfloat16 or float16, which a kernel
// can address (they had been counted at 4 bytes each in every precision).
TEST(Limits, HalfPrecisionCacheIsSizedByItsElements) {
    const auto create = [](attngen_precision p, int32_t max_batch) {
        attngen_mha_config config{};
        config.d_model = 64;
        config.num_heads = 1;
        config.head_dim = 8192;
        config.v_head_dim = 32;
        config.precision = p;
        attngen_mha *raw = nullptr;
        EXPECT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle m(raw);
        attngen_kv_cache *cache = nullptr;
        const attngen_status s =
            attngen_kv_cache_create(m.get(), max_batch, (1 << 16) + 32, &cache);
        EXPECT_EQ(cache == nullptr, s != ATTNGEN_OK);
        attngen_kv_cache_destroy(cache);
        return s;
    };
    EXPECT_TRUE(RefusedWithMessage(create(ATTNGEN_PRECISION_F32, 1), {kShape}));
    EXPECT_EQ(create(ATTNGEN_PRECISION_BF16, 1), ATTNGEN_OK) << attngen_last_error();
    // Twice the items pass the limit again; float16's elements are as large as bfloat16's (not
    // allocated here: a second GiB).
    EXPECT_TRUE(RefusedWithMessage(create(ATTNGEN_PRECISION_BF16, 2), {kShape}));
    EXPECT_TRUE(RefusedWithMessage(create(ATTNGEN_PRECISION_F16, 2), {kShape}));
}

// Every input fits, but a weights output or a mask of [batch, heads, q_len, kv_len] would have
// 3.2e9 elements: no kernel can index them, so the call is refused before anything is read
// (the weights and mask pointers here hold 64 floats). Without them the same shape runs
// (SdpaPastTwoToThe31LogitsWithoutWeights).
TEST(Limits, WeightsOrMaskBeyondInt32AreRefusedUpFront) {
    const int32_t len = 40000, d_model = 8, heads = 2;
    std::vector<float> x(size_t(len) * d_model, 0.5f);
    std::vector<float> out(x.size(), kSentinel);
    TinyBuffers t;
    MhaTester tester;
    tester.d_model(d_model).num_heads(heads);
    const attngen_mha_config config = tester.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    ASSERT_EQ(tester.MakeModel().SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    const float *p = x.data();
    EXPECT_TRUE(RefusedWithMessage(
        attngen_mha_forward(raw, 1, len, len, p, p, p, nullptr, out.data(), t.weights.data()),
        {kShape}));
    EXPECT_NE(std::string(attngen_last_error()).find("weights"), std::string::npos)
        << attngen_last_error();
    EXPECT_TRUE(RefusedWithMessage(attngen_sdpa(1, heads, len, len, 4, 4, p, p, p, nullptr, 0.0f,
                                                out.data(), t.weights.data()),
                                   {kShape}));
    attngen_mask mask{};
    mask.additive = t.in.data();
    mask.additive_batch = 1;
    mask.additive_heads = heads;
    EXPECT_TRUE(RefusedWithMessage(
        attngen_mha_forward(raw, 1, len, len, p, p, p, &mask, out.data(), nullptr), {kShape}));
    EXPECT_NE(std::string(attngen_last_error()).find("mask.additive"), std::string::npos)
        << attngen_last_error();
    EXPECT_TRUE(Untouched("out", out));
    EXPECT_TRUE(Untouched("weights", t.weights));
}

// Allocation failure inside a kernel (Halide's intermediates) is OUT_OF_MEMORY, with nothing
// written. Halide's allocator is swapped for one that always fails, so no memory is exhausted.
class FailingHalideMalloc : public ::testing::Test {
  protected:
    static void *Fail(void *, size_t) { return nullptr; }
    void SetUp() override { previous_ = halide_set_custom_malloc(Fail); }
    void TearDown() override { halide_set_custom_malloc(previous_); }
    halide_malloc_t previous_ = nullptr;
};

TEST_F(FailingHalideMalloc, EveryEntryPointReportsOutOfMemory) {
    MhaTester tester;
    tester.d_model(16).num_heads(2).batch(2).q_len(40).kv_len(50).with_weights(true);
    const attngen_mha_config config = tester.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    ASSERT_EQ(tester.MakeModel().SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    for (bool with_weights : {false, true}) {
        MhaTester::Run r = tester.with_weights(with_weights).Prepare(DefaultSeed());
        std::fill(r.out.begin(), r.out.end(), kSentinel);
        std::fill(r.weights.begin(), r.weights.end(), kSentinel);
        tester.Call(raw, r);
        EXPECT_TRUE(RefusedWithMessage(r.status, {ATTNGEN_ERROR_OUT_OF_MEMORY}));
        EXPECT_TRUE(Untouched("out", r.out));
        EXPECT_TRUE(Untouched("weights", r.weights));
    }
    std::vector<float> x(size_t(2) * 2 * 40 * 16, 0.5f), out(x.size(), kSentinel);
    EXPECT_TRUE(RefusedWithMessage(attngen_sdpa(2, 2, 40, 40, 16, 16, x.data(), x.data(), x.data(),
                                                nullptr, 0.0f, out.data(), nullptr),
                                   {ATTNGEN_ERROR_OUT_OF_MEMORY}));
    EXPECT_TRUE(Untouched("out", out));
    std::vector<float> w(size_t(16) * 16, 0.25f), y(size_t(160) * 16, kSentinel);
    EXPECT_TRUE(
        RefusedWithMessage(attngen_linear(160, 16, 16, x.data(), w.data(), nullptr, y.data()),
                           {ATTNGEN_ERROR_OUT_OF_MEMORY}));
    EXPECT_TRUE(Untouched("y", y));
}

// The failure leaves nothing behind: with the allocator back, the same handle works.
TEST_F(FailingHalideMalloc, HandleWorksAgainAfterwards) {
    MhaTester tester;
    tester.d_model(16).num_heads(2).batch(1).q_len(9).kv_len(11);
    const attngen_mha_config config = tester.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const MhaTester::Model model = tester.MakeModel();
    ASSERT_EQ(model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    MhaTester::Run failed = tester.Prepare(DefaultSeed());
    tester.Call(raw, failed);
    ASSERT_EQ(failed.status, ATTNGEN_ERROR_OUT_OF_MEMORY) << attngen_last_error();
    halide_set_custom_malloc(previous_);
    MhaTester::Run r = tester.Prepare(DefaultSeed());
    tester.Call(raw, r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    tester.Check(model, r);
}

// Halide's allocations watched through forwards: none may come once the call has written its
// output, since any allocation can fail, and a failure must leave the output as it was. A CPU
// forward writes its output in place where its output projection allocates nothing
// (runtime/mha.cpp, output_in_place), so this fails if a kernel that is written in place
// allocates after it starts its output. Shapes for the projections' CPU paths (a few rows, panels
// of features as tasks, blocks of rows, taller ones for many outputs; heads x v_head_dim above
// kDirectMaxInFeatures, whose output projection allocates per task and is staged; on AMX,
// heads x v_head_dim past a whole number of kAmxBlock, whose tail sums are allocated per task),
// in every precision, with and without the weights; ctest runs it again under each CPU variant
// (ATTNGEN_CPU_DISPATCH). Then a call whose last allocation fails: OUT_OF_MEMORY, with its
// outputs untouched.
class WatchedHalideMalloc : public ::testing::Test {
  protected:
    static void *Allocate(void *user_context, size_t bytes) {
        // A kernel takes null for zero bytes as success (Halide allocates empty buffers too).
        if (bytes > 0) {
            const int n = ++calls_;
            size_t largest = largest_;
            while (bytes > largest && !largest_.compare_exchange_weak(largest, bytes)) {
            }
            int none = 0;
            if (OutputWritten()) first_after_output_.compare_exchange_strong(none, n);
            if (n == fail_at_) return nullptr;
        }
        return underlying_(user_context, bytes);
    }
    // Read while the kernel's threads write it: as volatile bits, each word whole.
    static bool OutputWritten() {
        const volatile uint32_t *bits = watched_;
        if (bits == nullptr) return false;
        uint32_t sentinel;
        std::memcpy(&sentinel, &kSentinel, sizeof sentinel);
        for (size_t i = 0; i < watched_size_; ++i) {
            if (bits[i] != sentinel) return true;
        }
        return false;
    }
    void SetUp() override { underlying_ = halide_set_custom_malloc(Allocate); }
    void TearDown() override { halide_set_custom_malloc(underlying_); }
    static void Reset(int fail_at) {
        calls_ = 0;
        largest_ = 0;
        fail_at_ = fail_at;
        first_after_output_ = 0;
    }
    static void Watch(std::vector<float> *out) {
        watched_size_ = out ? out->size() : 0;
        watched_ = out ? reinterpret_cast<const uint32_t *>(out->data()) : nullptr;
    }
    static inline std::atomic<int> calls_{0}, fail_at_{0}, first_after_output_{0};
    static inline std::atomic<size_t> largest_{0};  // this call's largest allocation
    static inline std::atomic<const uint32_t *> watched_{nullptr};
    static inline size_t watched_size_ = 0;
    static inline halide_malloc_t underlying_ = nullptr;
};

TEST_F(WatchedHalideMalloc, MhaForwardNeverAllocatesOnceItsOutputIsWritten) {
    struct Shape {
        const char *path;
        int d_model, num_heads, head_dim, batch, q_len, kv_len;  // head_dim 0: d_model / heads
        bool weights_too;  // the forward with the weights output as well (its own kernel)
    };
    const Shape shapes[] = {
        {"few rows", 64, 2, 0, 1, 3, 5, true},
        {"panels of features", 64, 2, 0, 2, 40, 37, true},
        {"blocks of rows", 256, 4, 0, 1, 661, 661, true},
        {"tall blocks of rows (2048 outputs)", 2048, 16, 16, 1, 641, 641, false},
        {"blocked output projection", 1088, 17, 0, 1, 150, 150, true},
        {"features past AMX's last block", 48, 3, 0, 2, 40, 37, true}};
#ifdef ATTNGEN_TEST_EMULATED
    // Under an emulator (aarch64: no kernel there writes in place) the small shapes only: the
    // larger ones took 2.6 min of qemu.
    const size_t shape_count = 2;
#else
    const size_t shape_count = std::size(shapes);
#endif
    for (attngen_precision precision :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        for (size_t s = 0; s < shape_count; ++s) {
            const Shape &shape = shapes[s];
            for (bool with_weights : {false, true}) {
                if (with_weights && !shape.weights_too) continue;
                SCOPED_TRACE(std::string(shape.path) + ", precision " +
                             std::to_string(int(precision)) + (with_weights ? ", weights" : ""));
                MhaTester tester;
                tester.d_model(shape.d_model).num_heads(shape.num_heads).precision(precision);
                if (shape.head_dim > 0) tester.head_dim(shape.head_dim);
                tester.batch(shape.batch).q_len(shape.q_len).kv_len(shape.kv_len);
                tester.self_attention(shape.q_len == shape.kv_len).with_weights(with_weights);
                const MhaHandle m = tester.Open(tester.MakeModel());
                ASSERT_TRUE(m);

                MhaTester::Run watched = tester.Prepare(DefaultSeed());
                std::fill(watched.out.begin(), watched.out.end(), kSentinel);
                Reset(0);
                Watch(&watched.out);
                tester.Call(m.get(), watched);
                Watch(nullptr);
                ASSERT_EQ(watched.status, ATTNGEN_OK) << attngen_last_error();
                const int allocations = calls_;
                ASSERT_GT(allocations, 0);
                EXPECT_EQ(first_after_output_, 0)
                    << "allocation " << first_after_output_ << " of " << allocations
                    << " came after the output was written";

                MhaTester::Run failed = tester.Prepare(DefaultSeed());
                std::fill(failed.out.begin(), failed.out.end(), kSentinel);
                std::fill(failed.weights.begin(), failed.weights.end(), kSentinel);
                Reset(allocations);
                tester.Call(m.get(), failed);
                Reset(0);
                EXPECT_TRUE(RefusedWithMessage(failed.status, {ATTNGEN_ERROR_OUT_OF_MEMORY}));
                EXPECT_TRUE(Untouched("out", failed.out));
                EXPECT_TRUE(Untouched("weights", failed.weights));
            }
        }
    }
}

// A forward's buffers are linear in its lengths: none of q_len x kv_len without the weights
// output, and no intermediate sized by a bound that Halide could not narrow. (Their sum is not:
// each query block's task allocates its key block's buffers.) The AMX variant's copies of keys
// and values once read their projections through a tile index whose bound lost its division by
// the run-time tile count; the projections were then computed, and their rows rounded, over
// about kv_len^2 / 16 rows: bfloat16 bert-512 took 54 ms against 3 for torch, and the long
// shapes failed (a 2.2 GB buffer past Halide's 2^31 limit). Four times the lengths may take a
// largest buffer four times the size, not sixteen; grouped key/value heads and a batch of two,
// since both enter that index. ctest runs it under every CPU variant.
TEST_F(WatchedHalideMalloc, MhaForwardWorkspaceGrowsLinearlyWithItsLengths) {
    constexpr int kShort = 128, kGrowth = 4;
    constexpr double kLinearAllowance = 1.5;  // rounding to tiles and vectors
    for (attngen_precision precision :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        SCOPED_TRACE("precision " + std::to_string(int(precision)));
        size_t bytes[2] = {0, 0};
        for (int step = 0; step < 2; ++step) {
            const int len = step == 0 ? kShort : kShort * kGrowth;
            MhaTester tester;
            tester.d_model(64).num_heads(4).num_kv_heads(2).precision(precision);
            tester.batch(2).q_len(len).kv_len(len).self_attention(true).with_weights(false);
            const MhaHandle m = tester.Open(tester.MakeModel());
            ASSERT_TRUE(m);
            MhaTester::Run r = tester.Prepare(DefaultSeed());
            Reset(0);
            tester.Call(m.get(), r);
            ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
            bytes[step] = largest_;
        }
        ASSERT_GT(bytes[0], 0u);
        EXPECT_LE(double(bytes[1]), kLinearAllowance * kGrowth * double(bytes[0]))
            << "largest buffer " << bytes[0] << " bytes at " << kShort << " queries and keys, "
            << bytes[1] << " at " << kShort * kGrowth;
    }
}

// More than 2^31 - 1 logits without a weights output: no buffer of that shape exists (flash
// attention; mask parts are passed as the memory they occupy), so the call runs. Rows at both
// ends and in the middle against a float64 softmax. Under an emulator it would take minutes.
TEST(Limits, SdpaPastTwoToThe31LogitsWithoutWeights) {
#ifdef ATTNGEN_TEST_EMULATED
    GTEST_SKIP() << "2^31 logits take minutes under an emulator";
#endif
    const int32_t q_len = 32768, kv_len = 65537, dk = 2, dv = 2;
    ASSERT_GT(int64_t(q_len) * kv_len, int64_t(INT32_MAX));
    Rng rng(DefaultSeed());
    const std::vector<float> q = rng.Uniform(size_t(q_len) * dk, -1.0f, 1.0f);
    const std::vector<float> k = rng.Uniform(size_t(kv_len) * dk, -1.0f, 1.0f);
    const std::vector<float> v = rng.Uniform(size_t(kv_len) * dv, -1.0f, 1.0f);
    std::vector<float> out(size_t(q_len) * dv, kSentinel);
    attngen_mask mask{};
    mask.causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT;  // half the logits: row i sees kv_len - q_len + i
    ASSERT_EQ(attngen_sdpa(1, 1, q_len, kv_len, dk, dv, q.data(), k.data(), v.data(), &mask, 0.0f,
                           out.data(), nullptr),
              ATTNGEN_OK)
        << attngen_last_error();
    const double scale = 1.0 / std::sqrt(double(dk));
    for (int32_t i : {0, 1, 12345, q_len - 1}) {
        const int32_t visible = kv_len - q_len + i + 1;
        std::vector<double> logit(visible);
        double top = -INFINITY;
        for (int32_t j = 0; j < visible; ++j) {
            logit[j] = scale * (double(q[size_t(i) * dk]) * k[size_t(j) * dk] +
                                double(q[size_t(i) * dk + 1]) * k[size_t(j) * dk + 1]);
            top = std::max(top, logit[j]);
        }
        double sum = 0, acc[2] = {0, 0};
        for (int32_t j = 0; j < visible; ++j) {
            const double p = std::exp(logit[j] - top);
            sum += p;
            for (int c = 0; c < dv; ++c) acc[c] += p * v[size_t(j) * dv + c];
        }
        for (int c = 0; c < dv; ++c) {
            // Averages of tens of thousands of values in [-1, 1]: float32 sums keep ~1e-5.
            EXPECT_NEAR(out[size_t(i) * dv + c], acc[c] / sum, 1e-4)
                << "row " << i << " feature " << c;
        }
    }
}

}  // namespace
}  // namespace attngen_test
