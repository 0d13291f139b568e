// GPU handles that run in the application's own context and queue
// (attngen_mha_create_in_context, attngen_mha_set_queue), on memory the application allocated
// itself, against a handle in attngen's own context on the same device. Part of the device
// suite: ATTNGEN_TEST_DEVICE picks CUDA or OpenCL (device_under_test.h).
#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "app_gpu.h"
#include "device_under_test.h"
#include "mha_tester.h"
#include "sdpa_tester.h"
#include "test_util.h"

namespace attngen_test {
namespace {

class AppContextTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string why_not;
        gpu_ = AppGpu::Create(DeviceUnderTest(), &why_not);
        if (gpu_ != nullptr) return;
        if (DeviceRequired()) FAIL() << "the device is required but unavailable: " << why_not;
        GTEST_SKIP() << why_not;
    }
    void TearDown() override { gpu_.reset(); }

    // A handle in the application's context with the model's weights, or null (failure
    // recorded).
    MhaHandle CreateInAppContext(const MhaTester &t, const MhaTester::Model &model) {
        const attngen_mha_config config = t.config();
        const attngen_gpu_context app{gpu_->context(), gpu_->queue()};
        attngen_mha *raw = nullptr;
        EXPECT_EQ(attngen_mha_create_in_context(&config, &app, &raw), ATTNGEN_OK)
            << attngen_last_error();
        MhaHandle m(raw);
        if (m != nullptr) {
            EXPECT_EQ(model.SetWeights(m.get()), ATTNGEN_OK) << attngen_last_error();
        }
        return m;
    }

    std::unique_ptr<AppGpu> gpu_;
};

MhaTester Shape() {
    MhaTester t;
    t.device(DeviceUnderTest()).d_model(12).num_heads(3).batch(2).q_len(5).kv_len(7);
    return t.causal(ATTNGEN_CAUSAL_TOP_LEFT).with_weights(true);
}

// The application's memory, context and queue give the same bits as attngen's own context
// with attngen's memory (same kernels, same device), which the tester checks against the
// float64 reference; switching the queue changes nothing but where the work is queued.
TEST_F(AppContextTest, ForwardOnApplicationMemoryContextAndQueue) {
    const MhaTester t = Shape();
    const MhaTester::Model model = t.MakeModel();
    MhaTester::Run expected = t.Prepare(DefaultSeed());
    {
        const attngen_mha_config config = t.config();
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle own(raw);
        ASSERT_EQ(model.SetWeights(own.get()), ATTNGEN_OK) << attngen_last_error();
        t.Call(own.get(), expected);
        ASSERT_EQ(expected.status, ATTNGEN_OK) << attngen_last_error();
        t.Check(model, expected);
    }

    MhaHandle m = CreateInAppContext(t, model);
    ASSERT_NE(m, nullptr);
    AppBuffer query(*gpu_, expected.query), key(*gpu_, expected.key), value(*gpu_, expected.value);
    AppBuffer out(*gpu_, std::vector<float>(expected.out.size(), kSentinel));
    AppBuffer weights(*gpu_, std::vector<float>(expected.weights.size(), kSentinel));
    for (const AppBuffer *b : {&query, &key, &value, &out, &weights}) ASSERT_NE(b->address(), 0u);
    const attngen_mask *mask = &expected.masks.mask;
    for (void *queue : {gpu_->queue(), gpu_->second_queue()}) {
        SCOPED_TRACE(queue == gpu_->queue() ? "first queue" : "second queue");
        ASSERT_EQ(attngen_mha_set_queue(m.get(), queue), ATTNGEN_OK) << attngen_last_error();
        ASSERT_EQ(
            attngen_mha_forward_device(m.get(), 2, 5, 7, query.address(), key.address(),
                                       value.address(), mask, out.address(), weights.address()),
            ATTNGEN_OK)
            << attngen_last_error();
        gpu_->Finish();
        EXPECT_TRUE(BitIdentical("out", out.Download(), expected.out));
        EXPECT_TRUE(BitIdentical("weights", weights.Download(), expected.weights));
    }

    // Host pointers work on such a handle too: attngen copies through the application's queue.
    MhaTester::Run host = t.Prepare(DefaultSeed());
    t.Call(m.get(), host);
    ASSERT_EQ(host.status, ATTNGEN_OK) << attngen_last_error();
    EXPECT_TRUE(BitIdentical("out (host pointers)", host.out, expected.out));
}

// attngen_sdpa_device in the application's context and on its memory gives the bits it gives
// in attngen's own (checked against the reference there), grouped heads and a causal mask.
TEST_F(AppContextTest, SdpaOnApplicationMemoryContextAndQueue) {
    // What the calls leave in the context (kernels; on CUDA also the freed scratch that Halide's
    // runtime keeps for reuse) goes back before TearDown destroys the context, however the test
    // ends: without it, compute-sanitizer on an H200 saw Halide's allocator free that scratch in
    // later tests, after its context was gone (CUDA_ERROR_INVALID_VALUE). Once, after both calls:
    // a second release of a context unloads a null module for each kernel the first one unloaded
    // and nobody loaded again (Halide 21's compilation cache; README, "Targets").
    struct ReleaseOnExit {
        attngen_gpu_context app;
        ~ReleaseOnExit() {
            EXPECT_EQ(attngen_gpu_context_release(DeviceUnderTest(), &app), ATTNGEN_OK)
                << attngen_last_error();
        }
    } release{{gpu_->context(), gpu_->queue()}};
    for (bool with_weights : {false, true}) {
        SCOPED_TRACE(with_weights ? "with weights" : "without weights");
        const SdpaTester t = SdpaTester()
                                 .device(DeviceUnderTest())
                                 .batch(2)
                                 .heads(4)
                                 .kv_heads(2)
                                 .q_len(6)
                                 .kv_len(35)
                                 .dk(8)
                                 .dv(5)
                                 .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
                                 .with_weights(with_weights);
        SdpaTester::Run expected = t.Prepare();
        t.Call(expected);
        ASSERT_EQ(expected.status, ATTNGEN_OK) << attngen_last_error();
        t.Check(expected);

        AppBuffer q(*gpu_, expected.q), k(*gpu_, expected.k), v(*gpu_, expected.v);
        AppBuffer out(*gpu_, std::vector<float>(expected.out.size(), kSentinel));
        AppBuffer weights(
            *gpu_, std::vector<float>(std::max<size_t>(expected.weights.size(), 1), kSentinel));
        const attngen_gpu_context app{gpu_->context(), gpu_->queue()};
        ASSERT_EQ(attngen_sdpa_device(DeviceUnderTest(), &app, 2, 4, 2, 6, 35, 8, 5, q.address(),
                                      k.address(), v.address(), &expected.masks.mask, 0.0f,
                                      out.address(), with_weights ? weights.address() : 0),
                  ATTNGEN_OK)
            << attngen_last_error();
        gpu_->Finish();
        EXPECT_TRUE(BitIdentical("out", out.Download(), expected.out));
        if (with_weights) {
            EXPECT_TRUE(BitIdentical("weights", weights.Download(), expected.weights));
        }
    }
}

// What attngen holds in the application's context (the weights, compiled kernels) it gives
// back in attngen_mha_destroy, so the application may then destroy the context. OpenCL counts
// the references to a context; CUDA has no such count.
TEST_F(AppContextTest, DestroyReleasesWhatTheHandleHeldInTheContext) {
    const int before = gpu_->SettledContextReferences();
    if (before < 0) GTEST_SKIP() << "this API counts no references to a context";
    const MhaTester t = Shape();
    MhaHandle m = CreateInAppContext(t, t.MakeModel());
    ASSERT_NE(m, nullptr);
    MhaTester::Run r = t.Prepare(DefaultSeed());
    t.Call(m.get(), r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    EXPECT_GT(gpu_->ContextReferences(), before)
        << "the weights and kernels live in the application's context";
    m.reset();
    EXPECT_EQ(gpu_->ContextReferencesOnceAt(before), before);
}

// attngen_sdpa_device has no handle to destroy: the kernels it loaded into the application's
// context stay there until attngen_gpu_context_release gives them back (OpenCL counts the
// references; CUDA has no such count).
TEST_F(AppContextTest, SdpaKernelsAreGivenBackOnRequest) {
    const int before = gpu_->ContextReferences();
    if (before < 0) GTEST_SKIP() << "this API counts no references to a context";
    const SdpaTester t = SdpaTester().batch(1).heads(2).q_len(3).kv_len(5).dk(4).dv(4);
    SdpaTester::Run r = t.Prepare();
    AppBuffer q(*gpu_, r.q), k(*gpu_, r.k), v(*gpu_, r.v), out(*gpu_, r.out);
    const int with_buffers = gpu_->SettledContextReferences();
    const attngen_gpu_context app{gpu_->context(), gpu_->queue()};
    ASSERT_EQ(attngen_sdpa_device(DeviceUnderTest(), &app, 1, 2, 2, 3, 5, 4, 4, q.address(),
                                  k.address(), v.address(), nullptr, 0.0f, out.address(), 0),
              ATTNGEN_OK)
        << attngen_last_error();
    gpu_->Finish();
    EXPECT_GT(gpu_->ContextReferences(), with_buffers) << "the kernels loaded in the context";
    ASSERT_EQ(attngen_gpu_context_release(DeviceUnderTest(), &app), ATTNGEN_OK)
        << attngen_last_error();
    EXPECT_EQ(gpu_->ContextReferencesOnceAt(with_buffers), with_buffers);

    const attngen_gpu_context none{nullptr, nullptr};
    EXPECT_EQ(attngen_gpu_context_release(DeviceUnderTest(), &none),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_gpu_context_release(DeviceUnderTest(), nullptr),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(attngen_gpu_context_release(ATTNGEN_DEVICE_CPU, &app),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
}

TEST_F(AppContextTest, BadContextsAndQueuesAreRefused) {
    const MhaTester t = Shape();
    attngen_mha_config config = t.config();
    attngen_mha *raw = nullptr;

    // No queue: CUDA takes the context's default stream; OpenCL has none.
    const attngen_gpu_context no_queue{gpu_->context(), nullptr};
    const attngen_status no_queue_status = attngen_mha_create_in_context(&config, &no_queue, &raw);
    MhaHandle made(raw);
    if (DeviceUnderTest() == ATTNGEN_DEVICE_OPENCL) {
        EXPECT_EQ(no_queue_status, ATTNGEN_ERROR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(attngen_last_error()).find("queue"), std::string::npos)
            << attngen_last_error();
        EXPECT_EQ(made, nullptr);
    } else {
        EXPECT_EQ(no_queue_status, ATTNGEN_OK) << attngen_last_error();
    }

    // A queue without a context.
    const attngen_gpu_context no_context{nullptr, gpu_->queue()};
    raw = nullptr;
    EXPECT_EQ(attngen_mha_create_in_context(&config, &no_context, &raw),
              ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(raw, nullptr);

    // The CPU has no GPU context.
    config.device = ATTNGEN_DEVICE_CPU;
    const attngen_gpu_context app{gpu_->context(), gpu_->queue()};
    EXPECT_EQ(attngen_mha_create_in_context(&config, &app, &raw), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(raw, nullptr);

    // A handle in attngen's own context has no queue of the application's to replace.
    config = t.config();
    ASSERT_EQ(attngen_mha_create_in_context(&config, nullptr, &raw), ATTNGEN_OK)
        << attngen_last_error();
    MhaHandle own(raw);
    EXPECT_EQ(attngen_mha_set_queue(own.get(), gpu_->queue()), ATTNGEN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attngen_last_error()).find("attngen_mha_create_in_context"),
              std::string::npos)
        << attngen_last_error();
    EXPECT_EQ(attngen_mha_set_queue(nullptr, gpu_->queue()), ATTNGEN_ERROR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace attngen_test
