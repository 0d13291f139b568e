// Every bad input of every C entry point: the exact status, a message naming the argument, and
// output buffers left exactly as they were.
//
// Status mapping (DESIGN.md, attngen.h): ATTNGEN_ERROR_INVALID_ARGUMENT for a null pointer, a
// non-positive size, an unknown enum value, a negative kv_lengths entry and forward before
// set_weights; ATTNGEN_ERROR_SHAPE for shapes that do not fit together (d_model % num_heads,
// mask batch/head counts, kv_lengths > kv_len, a buffer whose element count overflows int32).
#include "mha_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace attngen_test {
namespace {

// True when name occurs in msg as a whole identifier, so that "q" matches "q is NULL" or
// "argument 'q'" but not "query".
bool MentionsIdentifier(const std::string &msg, const std::string &name) {
    auto is_ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = msg.find(name); at != std::string::npos; at = msg.find(name, at + 1)) {
        const bool starts = at == 0 || !is_ident(msg[at - 1]);
        const size_t end = at + name.size();
        const bool ends = end == msg.size() || !is_ident(msg[end]);
        if (starts && ends) return true;
    }
    return false;
}

std::string StatusName(attngen_status s) {
    const char *name = attngen_status_string(s);
    return std::string(name ? name : "(null)") + " (" + std::to_string(int(s)) + ")";
}

// The call failed with one of the statuses in `expected`, and attngen_last_error() is
// non-empty and names one of `names` (any message will do when names is empty).
::testing::AssertionResult FailedWith(attngen_status got,
                                      std::initializer_list<attngen_status> expected,
                                      const std::vector<std::string> &names) {
    const char *raw = attngen_last_error();
    const std::string msg = raw ? raw : "";
    bool status_ok = false;
    for (attngen_status s : expected) status_ok |= got == s;
    if (!status_ok) {
        auto f = ::testing::AssertionFailure() << "status " << StatusName(got) << ", expected";
        for (attngen_status s : expected) f << " " << StatusName(s);
        return f << "; last error: \"" << msg << "\"";
    }
    if (raw == nullptr || msg.empty()) {
        return ::testing::AssertionFailure() << "attngen_last_error() is empty after a failure";
    }
    if (names.empty()) return ::testing::AssertionSuccess();
    for (const std::string &name : names) {
        if (MentionsIdentifier(msg, name)) return ::testing::AssertionSuccess();
    }
    auto f = ::testing::AssertionFailure() << "last error \"" << msg << "\" names none of:";
    for (const std::string &name : names) f << " " << name;
    return f;
}

::testing::AssertionResult FailedWith(attngen_status got, attngen_status expected,
                                      const std::vector<std::string> &names) {
    return FailedWith(got, {expected}, names);
}

constexpr attngen_status kInvalid = ATTNGEN_ERROR_INVALID_ARGUMENT;
constexpr attngen_status kShape = ATTNGEN_ERROR_SHAPE;

// Large enough that two of them multiply past INT32_MAX.
constexpr int32_t kHuge = 65536;
// 46341^2 > INT32_MAX: the smallest square that overflows.
constexpr int32_t kSquareOverflow = 46341;

// The names an overflow message may give: the buffer or a size that made it too large.
const std::vector<std::string> kOverflowNames = {
    "batch",    "heads",     "num_heads", "q_len",       "kv_len",       "dk", "dv", "d_model",
    "query",    "key",       "value",     "out",         "weights",      "q",  "k",  "v",
    "additive", "bool_mask", "rows",      "in_features", "out_features", "x",  "w",  "y",
    "wq",       "wk",        "wv",        "wo",          "head_dim"};

// ---------------------------------------------------------------------------------------------
// Status strings, last error, version, destroy

TEST(StatusString, NamesEveryStatus) {
    const std::pair<attngen_status, const char *> statuses[] = {
        {ATTNGEN_OK, "OK"},
        {ATTNGEN_ERROR_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
        {ATTNGEN_ERROR_SHAPE, "SHAPE"},
        {ATTNGEN_ERROR_UNSUPPORTED, "UNSUPPORTED"},
        {ATTNGEN_ERROR_DEVICE, "DEVICE"},
        {ATTNGEN_ERROR_OUT_OF_MEMORY, "OUT_OF_MEMORY"},
        {ATTNGEN_ERROR_INTERNAL, "INTERNAL"},
    };
    std::set<std::string> seen;
    for (const auto &[status, suffix] : statuses) {
        const char *name = attngen_status_string(status);
        ASSERT_NE(name, nullptr) << int(status);
        EXPECT_NE(std::string(name).find(suffix), std::string::npos) << name;
        EXPECT_TRUE(seen.insert(name).second) << "two statuses share the name " << name;
    }
}

TEST(StatusString, UnknownStatusIsNotNull) {
    for (int unknown : {7, 99, -1, INT_MAX}) {
        const char *name = attngen_status_string(static_cast<attngen_status>(unknown));
        ASSERT_NE(name, nullptr) << unknown;
        EXPECT_GT(std::strlen(name), 0u) << unknown;
    }
}

TEST(LastError, EmptyInAThreadThatMadeNoCall) {
    std::string seen = "(not run)";
    bool was_null = true;
    std::thread([&] {
        const char *e = attngen_last_error();
        was_null = e == nullptr;
        if (e) seen = e;
    }).join();
    EXPECT_FALSE(was_null);
    EXPECT_EQ(seen, "");
}

TEST(LastError, ClearedBySuccessfulCall) {
    const float x = 1, w = 2;
    float y = 0;
    ASSERT_EQ(attngen_linear(0, 1, 1, &x, &w, nullptr, &y), kInvalid);
    ASSERT_STRNE(attngen_last_error(), "");
    ASSERT_EQ(attngen_linear(1, 1, 1, &x, &w, nullptr, &y), ATTNGEN_OK) << attngen_last_error();
    EXPECT_STREQ(attngen_last_error(), "");
    EXPECT_EQ(y, 2.0f);
}

TEST(LastError, ClearedBySuccessfulCreate) {
    ASSERT_EQ(attngen_mha_create(nullptr, nullptr), kInvalid);
    ASSERT_STRNE(attngen_last_error(), "");
    const attngen_mha_config config{
        8, 2,   0, 0, 0, 1, ATTNGEN_DEVICE_CPU, 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
        0, 0.0f};
    attngen_mha *m = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &m), ATTNGEN_OK) << attngen_last_error();
    MhaHandle handle(m);
    EXPECT_STREQ(attngen_last_error(), "");
}

TEST(LastError, IsPerThread) {
    const float x = 1, w = 2;
    float y = 0;
    ASSERT_EQ(attngen_linear(1, 1, 1, &x, &w, nullptr, &y), ATTNGEN_OK);
    std::string other_thread;
    std::thread([&] {
        EXPECT_EQ(attngen_linear(1, -1, 1, &x, &w, nullptr, &y), kInvalid);
        other_thread = attngen_last_error();
    }).join();
    EXPECT_FALSE(other_thread.empty());
    EXPECT_STREQ(attngen_last_error(), "") << "another thread's failure leaked into this one";
}

// Every failure message starts with the name of the entry point that failed.
TEST(LastError, NamesTheFunction) {
    float x = 1;
    EXPECT_EQ(attngen_mha_forward(nullptr, 1, 1, 1, &x, &x, &x, nullptr, &x, nullptr), kInvalid);
    EXPECT_STREQ(attngen_last_error(), "attngen_mha_forward: m is NULL");
    EXPECT_EQ(attngen_mha_set_weights(nullptr, &x, &x, &x, &x, nullptr, nullptr, nullptr, nullptr),
              kInvalid);
    EXPECT_STREQ(attngen_last_error(), "attngen_mha_set_weights: m is NULL");

    const auto starts_with = [](const std::string &function) {
        const std::string message = attngen_last_error();
        if (message.rfind(function + ": ", 0) == 0) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure()
               << "\"" << message << "\" does not start with \"" << function << ": \"";
    };
    EXPECT_EQ(attngen_mha_create(nullptr, nullptr), kInvalid);
    EXPECT_TRUE(starts_with("attngen_mha_create"));
    EXPECT_NE(attngen_mha_forward_device(nullptr, 1, 1, 1, 0, 0, 0, nullptr, 0, 0), ATTNGEN_OK);
    EXPECT_TRUE(starts_with("attngen_mha_forward_device"));
    EXPECT_EQ(attngen_sdpa(0, 1, 1, 1, 1, 1, &x, &x, &x, nullptr, 0, &x, nullptr), kInvalid);
    EXPECT_TRUE(starts_with("attngen_sdpa"));
    EXPECT_EQ(attngen_linear(0, 1, 1, &x, &x, nullptr, &x), kInvalid);
    EXPECT_TRUE(starts_with("attngen_linear"));
    EXPECT_NE(attngen_device_alloc(ATTNGEN_DEVICE_CPU, 16, nullptr), ATTNGEN_OK);
    EXPECT_TRUE(starts_with("attngen_device_alloc"));
}

TEST(Version, IsMajorMinorPatch) {
    const char *v = attngen_version();
    ASSERT_NE(v, nullptr);
    int major = -1, minor = -1, patch = -1, consumed = 0;
    ASSERT_EQ(std::sscanf(v, "%d.%d.%d%n", &major, &minor, &patch, &consumed), 3) << v;
    EXPECT_EQ(size_t(consumed), std::strlen(v)) << v;
    EXPECT_GE(major, 0);
    EXPECT_GE(minor, 0);
    EXPECT_GE(patch, 0);
}

TEST(Destroy, NullIsFine) {
    attngen_mha_destroy(nullptr);
    SUCCEED() << "no crash";
}

// ---------------------------------------------------------------------------------------------
// attngen_mha_create

class CreateErrors : public ::testing::Test {
  protected:
    // Creates from config_; the handle must stay null unless the call succeeds.
    attngen_status Create() {
        attngen_mha *m = nullptr;
        const attngen_status s = attngen_mha_create(&config_, &m);
        if (s != ATTNGEN_OK) {
            // Not destroyed: it may be garbage. Failing here says why the test leaks.
            EXPECT_EQ(m, nullptr) << "a failed create handed out a handle";
            return s;
        }
        handle_.reset(m);
        return s;
    }

    attngen_mha_config config_{
        8, 2,   0, 0, 0, 1, ATTNGEN_DEVICE_CPU, 0, 0, ATTNGEN_PRECISION_F32, ATTNGEN_ROPE_NONE,
        0, 0.0f};
    MhaHandle handle_;
};

TEST_F(CreateErrors, BaselineSucceeds) {
    EXPECT_EQ(Create(), ATTNGEN_OK) << attngen_last_error();
    EXPECT_NE(handle_, nullptr);
}

TEST_F(CreateErrors, NullConfig) {
    attngen_mha *m = nullptr;
    EXPECT_TRUE(FailedWith(attngen_mha_create(nullptr, &m), kInvalid, {"config"}));
    EXPECT_EQ(m, nullptr);
}

TEST_F(CreateErrors, NullOutHandle) {
    EXPECT_TRUE(FailedWith(attngen_mha_create(&config_, nullptr), kInvalid, {"out"}));
}

TEST_F(CreateErrors, NonPositiveDModel) {
    for (int v : {0, -1, INT_MIN}) {
        SCOPED_TRACE(v);
        config_.d_model = v;
        EXPECT_TRUE(FailedWith(Create(), kInvalid, {"d_model"}));
    }
}

TEST_F(CreateErrors, NonPositiveNumHeads) {
    for (int v : {0, -1, -8}) {
        SCOPED_TRACE(v);
        config_.num_heads = v;
        EXPECT_TRUE(FailedWith(Create(), kInvalid, {"num_heads"}));
    }
}

TEST_F(CreateErrors, NegativeKdim) {
    config_.kdim = -1;
    EXPECT_TRUE(FailedWith(Create(), kInvalid, {"kdim"}));
}

TEST_F(CreateErrors, NegativeVdim) {
    config_.vdim = -3;
    EXPECT_TRUE(FailedWith(Create(), kInvalid, {"vdim"}));
}

TEST_F(CreateErrors, NegativeHeadDim) {
    config_.head_dim = -4;
    EXPECT_TRUE(FailedWith(Create(), kInvalid, {"head_dim"}));
}

TEST_F(CreateErrors, UnknownDevice) {
    for (int v : {7, 3, -1}) {
        SCOPED_TRACE(v);
        config_.device = static_cast<attngen_device>(v);
        EXPECT_TRUE(FailedWith(Create(), kInvalid, {"device"}));
    }
}

TEST_F(CreateErrors, DModelNotDivisibleByHeadsWithoutHeadDim) {
    config_.d_model = 10;
    config_.num_heads = 3;
    EXPECT_TRUE(FailedWith(Create(), kShape, {"d_model", "num_heads"}));
}

// With an explicit head_dim, d_model need not divide: the projections map to H*head_dim.
TEST_F(CreateErrors, ExplicitHeadDimNeedsNoDivisibility) {
    config_.d_model = 10;
    config_.num_heads = 3;
    config_.head_dim = 4;
    EXPECT_EQ(Create(), ATTNGEN_OK) << attngen_last_error();
}

// Any nonzero use_bias means "with bias".
TEST_F(CreateErrors, AnyNonzeroUseBiasIsAccepted) {
    config_.use_bias = 7;
    EXPECT_EQ(Create(), ATTNGEN_OK) << attngen_last_error();
}

// wq [d_model, d_model] with d_model 65536 has 2^32 elements. The library may refuse at
// create or at set_weights (which must then refuse before reading the tiny buffers).
TEST_F(CreateErrors, WeightElementCountOverflowsInt32) {
    config_.d_model = kHuge;
    config_.num_heads = 1;
    const attngen_status s = Create();
    if (s != ATTNGEN_OK) {
        EXPECT_TRUE(FailedWith(s, kShape, kOverflowNames));
        return;
    }
    const std::vector<float> tiny(16);
    const float *p = tiny.data();
    EXPECT_TRUE(FailedWith(attngen_mha_set_weights(handle_.get(), p, p, p, p, p, p, p, p), kShape,
                           kOverflowNames));
}

TEST_F(CreateErrors, HeadsTimesHeadDimOverflowsInt32) {
    config_.num_heads = kHuge;
    config_.head_dim = kHuge;
    EXPECT_TRUE(FailedWith(Create(), kShape, kOverflowNames));
}

// A GPU device on a build or machine without it: UNSUPPORTED (target not built) or DEVICE (no
// driver or GPU), at create or at the first forward. Where the device does work, its results
// must match the reference like the CPU's.
void ExpectGpuDeviceWorksOrIsRefused(attngen_device device) {
    MhaTester t;
    t.d_model(16).num_heads(2).batch(2).q_len(3).kv_len(5).device(device).with_weights(true);
    const attngen_mha_config config = t.config();
    attngen_mha *raw = nullptr;
    const attngen_status created = attngen_mha_create(&config, &raw);
    MhaHandle m(raw);
    if (created != ATTNGEN_OK) {
        EXPECT_EQ(raw, nullptr);
        EXPECT_TRUE(FailedWith(created, {ATTNGEN_ERROR_UNSUPPORTED, ATTNGEN_ERROR_DEVICE}, {}));
        std::printf("device %d refused at create: %s\n", int(device), attngen_last_error());
        return;
    }
    const MhaTester::Model model = t.MakeModel();
    const attngen_status set = model.SetWeights(m.get());
    if (set != ATTNGEN_OK) {
        EXPECT_TRUE(FailedWith(set, {ATTNGEN_ERROR_UNSUPPORTED, ATTNGEN_ERROR_DEVICE}, {}));
        std::printf("device %d refused at set_weights: %s\n", int(device), attngen_last_error());
        return;
    }
    MhaTester::Run r = t.Prepare(DefaultSeed());
    std::fill(r.out.begin(), r.out.end(), kSentinel);
    std::fill(r.weights.begin(), r.weights.end(), kSentinel);
    t.Call(m.get(), r);
    if (r.status != ATTNGEN_OK) {
        EXPECT_TRUE(FailedWith(r.status, {ATTNGEN_ERROR_UNSUPPORTED, ATTNGEN_ERROR_DEVICE}, {}));
        EXPECT_TRUE(Untouched("out", r.out));
        EXPECT_TRUE(Untouched("weights", r.weights));
        std::printf("device %d refused at forward: %s\n", int(device), attngen_last_error());
        return;
    }
    t.Check(model, r);
}

TEST(DeviceErrors, CudaWorksOrIsRefused) {
    ExpectGpuDeviceWorksOrIsRefused(ATTNGEN_DEVICE_CUDA);
}

TEST(DeviceErrors, OpenClWorksOrIsRefused) {
    ExpectGpuDeviceWorksOrIsRefused(ATTNGEN_DEVICE_OPENCL);
}

// CUDA takes heads of at most 128 (kMaxCudaHeadSize in runtime/device.h: the flash kernel's
// shared memory). Past it, creating a handle and attngen_sdpa_device refuse the shape with
// UNSUPPORTED and a message that names the limit and both head sizes, before looking for a
// GPU, so the answer is the same on every machine; 128 itself is not refused for its size.
TEST(DeviceErrors, CudaRefusesHeadSizesPast128) {
    struct Heads {
        int32_t head, value_head;
    };
    for (const Heads heads : {Heads{129, 0}, Heads{256, 0}, Heads{128, 129}, Heads{128, 0}}) {
        MhaTester t;
        t.d_model(2 * heads.head).num_heads(2).batch(1).q_len(2).kv_len(2);
        t.device(ATTNGEN_DEVICE_CUDA);
        attngen_mha_config config = t.config();
        config.v_head_dim = heads.value_head;
        attngen_mha *raw = nullptr;
        const attngen_status created = attngen_mha_create(&config, &raw);
        MhaHandle m(raw);
        const std::string message = attngen_last_error();
        const bool refused_for_size = message.find("head sizes up to 128") != std::string::npos;
        if (heads.head <= 128 && heads.value_head <= 128) {
            EXPECT_FALSE(refused_for_size) << message;
            continue;
        }
        EXPECT_EQ(raw, nullptr);
        EXPECT_TRUE(FailedWith(created, ATTNGEN_ERROR_UNSUPPORTED,
                               {std::to_string(std::max(heads.head, heads.value_head))}));
        EXPECT_TRUE(refused_for_size) << message;
    }
    for (const Heads heads : {Heads{129, 64}, Heads{64, 200}}) {
        const attngen_status status =
            attngen_sdpa_device(ATTNGEN_DEVICE_CUDA, nullptr, 1, 2, 2, 3, 4, heads.head,
                                heads.value_head, 0, 0, 0, nullptr, 0.0f, 0, 0);
        EXPECT_TRUE(FailedWith(status, ATTNGEN_ERROR_UNSUPPORTED,
                               {std::to_string(std::max(heads.head, heads.value_head))}));
    }
}

// ---------------------------------------------------------------------------------------------
// attngen_mha_create_in_context and attngen_mha_set_queue on the CPU (the GPU side is in the
// device suite, test_device_app_context.cpp)

TEST(AppContextErrors, CpuHandlesHaveNoGpuContextOrQueue) {
    MhaTester t;
    t.d_model(8).num_heads(2);
    const attngen_mha_config config = t.config();
    int not_a_context = 0;
    const attngen_gpu_context app{&not_a_context, nullptr};
    attngen_mha *raw = nullptr;
    EXPECT_TRUE(FailedWith(attngen_mha_create_in_context(&config, &app, &raw), kInvalid,
                           {"attngen_mha_create_in_context", "CPU"}));
    EXPECT_EQ(raw, nullptr);

    // No context at all is attngen_mha_create.
    const attngen_gpu_context empty{nullptr, nullptr};
    for (const attngen_gpu_context *none :
         {&empty, static_cast<const attngen_gpu_context *>(nullptr)}) {
        ASSERT_EQ(attngen_mha_create_in_context(&config, none, &raw), ATTNGEN_OK)
            << attngen_last_error();
        MhaHandle m(raw);
        raw = nullptr;
        EXPECT_TRUE(FailedWith(attngen_mha_set_queue(m.get(), &not_a_context), kInvalid,
                               {"attngen_mha_set_queue", "attngen_mha_create_in_context"}));
    }
    EXPECT_TRUE(FailedWith(attngen_mha_set_queue(nullptr, nullptr), kInvalid, {"m"}));
    EXPECT_TRUE(
        FailedWith(attngen_mha_create_in_context(nullptr, nullptr, &raw), kInvalid, {"config"}));
}

// ---------------------------------------------------------------------------------------------
// attngen_mha_set_weights

class SetWeightsErrors : public ::testing::Test {
  protected:
    void SetUp() override {
        tester_.d_model(8).num_heads(2).kdim(6).vdim(5).batch(3).q_len(4).kv_len(5);
        const attngen_mha_config config = tester_.config();
        attngen_mha *m = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &m), ATTNGEN_OK) << attngen_last_error();
        handle_.reset(m);
        model_ = tester_.MakeModel();
        w_ = {model_.wq.data(), model_.wk.data(), model_.wv.data(), model_.wo.data(),
              model_.bq.data(), model_.bk.data(), model_.bv.data(), model_.bo.data()};
    }
    attngen_status SetWeights(attngen_mha *m) {
        return attngen_mha_set_weights(m, w_[0], w_[1], w_[2], w_[3], w_[4], w_[5], w_[6], w_[7]);
    }
    // forward on the handle must still refuse: a failed set_weights sets no weights.
    void ExpectStillWithoutWeights() {
        MhaTester::Run r = tester_.Prepare(DefaultSeed());
        tester_.Call(handle_.get(), r);
        EXPECT_TRUE(FailedWith(r.status, kInvalid, {}));
    }

    MhaTester tester_;
    MhaHandle handle_;
    MhaTester::Model model_;
    std::vector<const float *> w_;  // wq, wk, wv, wo, bq, bk, bv, bo
};

TEST_F(SetWeightsErrors, BaselineSucceeds) {
    EXPECT_EQ(SetWeights(handle_.get()), ATTNGEN_OK) << attngen_last_error();
    EXPECT_STREQ(attngen_last_error(), "");
}

TEST_F(SetWeightsErrors, NullHandle) {
    EXPECT_TRUE(FailedWith(SetWeights(nullptr), kInvalid, {}));
}

TEST_F(SetWeightsErrors, EachNullWeight) {
    const char *names[] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"};
    for (size_t i = 0; i < 8; ++i) {
        SCOPED_TRACE(names[i]);
        const float *saved = w_[i];
        w_[i] = nullptr;
        EXPECT_TRUE(FailedWith(SetWeights(handle_.get()), kInvalid, {names[i]}));
        w_[i] = saved;
        ExpectStillWithoutWeights();
    }
}

TEST_F(SetWeightsErrors, NullBiasesAreFineWithoutUseBias) {
    tester_.use_bias(false);
    const attngen_mha_config config = tester_.config();
    attngen_mha *m = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &m), ATTNGEN_OK) << attngen_last_error();
    MhaHandle handle(m);
    EXPECT_EQ(
        attngen_mha_set_weights(m, w_[0], w_[1], w_[2], w_[3], nullptr, nullptr, nullptr, nullptr),
        ATTNGEN_OK)
        << attngen_last_error();
}

// NaN and infinity in any weight or bias, in every precision (float16 had refused 70000 but taken
// +inf): refused with the tensor and element named, and the handle keeps its weights. The last
// element too, where a scan's tail would miss it.
TEST_F(SetWeightsErrors, NonFiniteWeightOrBiasIsRefusedInEveryPrecision) {
    const char *names[] = {"wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"};
    const size_t sizes[] = {model_.wq.size(), model_.wk.size(), model_.wv.size(), model_.wo.size(),
                            model_.bq.size(), model_.bk.size(), model_.bv.size(), model_.bo.size()};
    for (attngen_precision precision :
         {ATTNGEN_PRECISION_F32, ATTNGEN_PRECISION_BF16, ATTNGEN_PRECISION_F16}) {
        attngen_mha_config config = tester_.config();
        config.precision = precision;
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle m(raw);
        for (size_t i = 0; i < 8; ++i) {
            for (float bad :
                 {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()}) {
                SCOPED_TRACE(std::string(names[i]) + " = " + std::to_string(bad) + ", precision " +
                             std::to_string(int(precision)));
                std::vector<float> copy(w_[i], w_[i] + sizes[i]);
                const size_t at = sizes[i] - 1;
                copy[at] = bad;
                const float *saved = w_[i];
                w_[i] = copy.data();
                EXPECT_TRUE(FailedWith(SetWeights(m.get()), kInvalid, {names[i]}));
                const std::string message = attngen_last_error();
                EXPECT_NE(message.find(std::string(names[i]) + "[" + std::to_string(at) + "]"),
                          std::string::npos)
                    << message;
                EXPECT_NE(message.find("not finite"), std::string::npos) << message;
                w_[i] = saved;
            }
        }
        MhaTester::Run r = tester_.Prepare(DefaultSeed());
        tester_.Call(m.get(), r);
        EXPECT_TRUE(FailedWith(r.status, kInvalid, {})) << "a refused set_weights set weights";
    }
}

// Not spelled out by the header, but "nothing happens on error" should hold for the handle too:
// a rejected set_weights leaves the weights that were set before.
TEST_F(SetWeightsErrors, FailedSetWeightsKeepsThePreviousWeights) {
    ASSERT_EQ(SetWeights(handle_.get()), ATTNGEN_OK) << attngen_last_error();
    const std::vector<float> other(64 * 64, 3.0f);
    EXPECT_TRUE(FailedWith(
        attngen_mha_set_weights(handle_.get(), other.data(), other.data(), other.data(),
                                other.data(), other.data(), other.data(), other.data(), nullptr),
        kInvalid, {"bo"}));
    MhaTester::Run r = tester_.Prepare(DefaultSeed());
    tester_.Call(handle_.get(), r);
    ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
    tester_.Check(model_, r);
}

// ---------------------------------------------------------------------------------------------
// attngen_mha_forward

class ForwardErrors : public ::testing::Test {
  protected:
    void SetUp() override {
        tester_.d_model(8).num_heads(2).kdim(6).vdim(5).batch(3).q_len(4).kv_len(5);
        const attngen_mha_config config = tester_.config();
        attngen_mha *m = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &m), ATTNGEN_OK) << attngen_last_error();
        handle_.reset(m);
        model_ = tester_.MakeModel();
        ASSERT_EQ(model_.SetWeights(m), ATTNGEN_OK) << attngen_last_error();

        Rng rng(DefaultSeed());
        query_buf_ = rng.Uniform(3 * 4 * 8, -1, 1);
        key_buf_ = rng.Uniform(3 * 5 * 6, -1, 1);
        value_buf_ = rng.Uniform(3 * 5 * 5, -1, 1);
        query_ = query_buf_.data(), key_ = key_buf_.data(), value_ = value_buf_.data();
        bool_mask_buf_.assign(3 * 4 * 5, 0);
        additive_buf_.assign(3 * 2 * 4 * 5, 0.0f);
    }

    // Runs forward with the current arguments into sentinel-filled out and weights.
    attngen_status Forward(attngen_mha *m) {
        out_buf_.assign(3 * 4 * 8, kSentinel);
        weights_buf_.assign(3 * 2 * 4 * 5, kSentinel);
        return attngen_mha_forward(m, batch_, q_len_, kv_len_, query_, key_, value_, mask_,
                                   out_null_ ? nullptr : out_buf_.data(),
                                   weights_null_ ? nullptr : weights_buf_.data());
    }
    attngen_status Forward() { return Forward(handle_.get()); }

    void ExpectNothingWritten() {
        EXPECT_TRUE(Untouched("out", out_buf_));
        EXPECT_TRUE(Untouched("weights", weights_buf_));
    }

    MhaTester tester_;
    MhaHandle handle_;
    MhaTester::Model model_;
    std::vector<float> query_buf_, key_buf_, value_buf_, out_buf_, weights_buf_, additive_buf_;
    std::vector<uint8_t> bool_mask_buf_;
    int32_t batch_ = 3, q_len_ = 4, kv_len_ = 5;
    const float *query_ = nullptr, *key_ = nullptr, *value_ = nullptr;
    attngen_mask mask_storage_{};
    const attngen_mask *mask_ = &mask_storage_;
    bool out_null_ = false, weights_null_ = false;
};

TEST_F(ForwardErrors, BaselineSucceeds) {
    EXPECT_EQ(Forward(), ATTNGEN_OK) << attngen_last_error();
    EXPECT_STREQ(attngen_last_error(), "");
    mask_ = nullptr;  // NULL mask = none
    EXPECT_EQ(Forward(), ATTNGEN_OK) << attngen_last_error();
    weights_null_ = true;
    EXPECT_EQ(Forward(), ATTNGEN_OK) << attngen_last_error();
}

TEST_F(ForwardErrors, BaselineWithEveryMaskPartSucceeds) {
    const std::vector<int32_t> lengths = {5, 0, 3};
    mask_storage_.causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT;
    mask_storage_.kv_lengths = lengths.data();
    mask_storage_.bool_mask = bool_mask_buf_.data();
    mask_storage_.bool_mask_batch = 3;
    mask_storage_.additive = additive_buf_.data();
    mask_storage_.additive_batch = 3;
    mask_storage_.additive_heads = 2;
    EXPECT_EQ(Forward(), ATTNGEN_OK) << attngen_last_error();
}

TEST_F(ForwardErrors, NullHandle) {
    EXPECT_TRUE(FailedWith(Forward(nullptr), kInvalid, {}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, BeforeSetWeights) {
    const attngen_mha_config config = tester_.config();
    attngen_mha *m = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &m), ATTNGEN_OK) << attngen_last_error();
    MhaHandle fresh(m);
    EXPECT_TRUE(FailedWith(Forward(fresh.get()), kInvalid, {}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, NonPositiveSizes) {
    for (int v : {0, -1, INT_MIN}) {
        SCOPED_TRACE(v);
        batch_ = v;
        EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"batch"}));
        ExpectNothingWritten();
        batch_ = 3, q_len_ = v;
        EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"q_len"}));
        ExpectNothingWritten();
        q_len_ = 4, kv_len_ = v;
        EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"kv_len"}));
        ExpectNothingWritten();
        kv_len_ = 5;
    }
}

TEST_F(ForwardErrors, NullQuery) {
    query_ = nullptr;
    EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"query"}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, NullKey) {
    key_ = nullptr;
    EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"key"}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, NullValue) {
    value_ = nullptr;
    EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"value"}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, NullOut) {
    out_null_ = true;
    EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"out"}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, UnknownCausal) {
    for (int v : {3, 7, -1}) {
        SCOPED_TRACE(v);
        mask_storage_.causal = static_cast<attngen_causal>(v);
        EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"causal"}));
        ExpectNothingWritten();
    }
}

TEST_F(ForwardErrors, NegativeKvLength) {
    const std::vector<int32_t> lengths = {5, -1, 2};
    mask_storage_.kv_lengths = lengths.data();
    EXPECT_TRUE(FailedWith(Forward(), kInvalid, {"kv_lengths"}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, KvLengthBeyondKvLen) {
    const std::vector<int32_t> lengths = {5, 2, 6};
    mask_storage_.kv_lengths = lengths.data();
    EXPECT_TRUE(FailedWith(Forward(), kShape, {"kv_lengths"}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, BoolMaskBatchNeitherOneNorBatch) {
    mask_storage_.bool_mask = bool_mask_buf_.data();
    for (int v : {2, 4}) {
        SCOPED_TRACE(v);
        mask_storage_.bool_mask_batch = v;
        EXPECT_TRUE(FailedWith(Forward(), kShape, {"bool_mask_batch"}));
        ExpectNothingWritten();
    }
}

// 0 and negative counts are "not 1 or batch" (SHAPE) and "non-positive sizes"
// (INVALID_ARGUMENT) at once; the contract does not pick one.
TEST_F(ForwardErrors, BoolMaskBatchNonPositive) {
    mask_storage_.bool_mask = bool_mask_buf_.data();
    for (int v : {0, -1}) {
        SCOPED_TRACE(v);
        mask_storage_.bool_mask_batch = v;
        EXPECT_TRUE(FailedWith(Forward(), {kShape, kInvalid}, {"bool_mask_batch"}));
        ExpectNothingWritten();
    }
}

TEST_F(ForwardErrors, AdditiveBatchNeitherOneNorBatch) {
    mask_storage_.additive = additive_buf_.data();
    mask_storage_.additive_heads = 2;
    mask_storage_.additive_batch = 2;
    EXPECT_TRUE(FailedWith(Forward(), kShape, {"additive_batch"}));
    ExpectNothingWritten();
    mask_storage_.additive_batch = 0;
    EXPECT_TRUE(FailedWith(Forward(), {kShape, kInvalid}, {"additive_batch"}));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, AdditiveHeadsNeitherOneNorNumHeads) {
    mask_storage_.additive = additive_buf_.data();
    mask_storage_.additive_batch = 3;
    mask_storage_.additive_heads = 3;
    EXPECT_TRUE(FailedWith(Forward(), kShape, {"additive_heads"}));
    ExpectNothingWritten();
    mask_storage_.additive_heads = 0;
    EXPECT_TRUE(FailedWith(Forward(), {kShape, kInvalid}, {"additive_heads"}));
    ExpectNothingWritten();
}

// Counts describe a part's buffer, so they only matter where the part is present (our reading:
// "every part that is set applies"; the C++ Mask sends 0 for absent parts).
TEST_F(ForwardErrors, CountsOfAbsentMaskPartsAreIgnored) {
    mask_storage_.bool_mask_batch = 17;
    mask_storage_.additive_batch = -2;
    mask_storage_.additive_heads = 99;
    EXPECT_EQ(Forward(), ATTNGEN_OK) << attngen_last_error();
}

// batch * q_len * d_model = 2^32 * 8: the query and out buffers cannot be indexed in int32.
// The library must refuse before touching the (tiny) buffers.
TEST_F(ForwardErrors, QueryElementCountOverflowsInt32) {
    batch_ = kHuge;
    q_len_ = kHuge;
    kv_len_ = 1;
    weights_null_ = true;
    EXPECT_TRUE(FailedWith(Forward(), kShape, kOverflowNames));
    ExpectNothingWritten();
}

// heads * q_len * kv_len = 2 * 46341^2 > INT32_MAX, with every input buffer of modest size.
TEST_F(ForwardErrors, WeightsElementCountOverflowsInt32) {
    batch_ = 1;
    q_len_ = kSquareOverflow;
    kv_len_ = kSquareOverflow;
    EXPECT_TRUE(FailedWith(Forward(), kShape, kOverflowNames));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, AdditiveElementCountOverflowsInt32) {
    batch_ = 1;
    q_len_ = kSquareOverflow;
    kv_len_ = kSquareOverflow;
    weights_null_ = true;
    mask_storage_.additive = additive_buf_.data();
    mask_storage_.additive_batch = 1;
    mask_storage_.additive_heads = 1;
    EXPECT_TRUE(FailedWith(Forward(), kShape, kOverflowNames));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, BoolMaskElementCountOverflowsInt32) {
    batch_ = 1;
    q_len_ = kSquareOverflow;
    kv_len_ = kSquareOverflow;
    weights_null_ = true;
    mask_storage_.bool_mask = bool_mask_buf_.data();
    mask_storage_.bool_mask_batch = 1;
    EXPECT_TRUE(FailedWith(Forward(), kShape, kOverflowNames));
    ExpectNothingWritten();
}

TEST_F(ForwardErrors, SuccessAfterFailureClearsLastError) {
    query_ = nullptr;
    ASSERT_TRUE(FailedWith(Forward(), kInvalid, {"query"}));
    query_ = query_buf_.data();
    EXPECT_EQ(Forward(), ATTNGEN_OK) << attngen_last_error();
    EXPECT_STREQ(attngen_last_error(), "");
}

// ---------------------------------------------------------------------------------------------
// attngen_sdpa

class SdpaErrors : public ::testing::Test {
  protected:
    void SetUp() override {
        Rng rng(DefaultSeed());
        q_buf_ = rng.Uniform(2 * 2 * 3 * 5, -1, 1);
        k_buf_ = rng.Uniform(2 * 2 * 4 * 5, -1, 1);
        v_buf_ = rng.Uniform(2 * 2 * 4 * 6, -1, 1);
        q_ = q_buf_.data(), k_ = k_buf_.data(), v_ = v_buf_.data();
        bool_mask_buf_.assign(2 * 3 * 4, 0);
        additive_buf_.assign(2 * 2 * 3 * 4, 0.0f);
    }

    attngen_status Sdpa() {
        out_buf_.assign(2 * 2 * 3 * 6, kSentinel);
        weights_buf_.assign(2 * 2 * 3 * 4, kSentinel);
        return attngen_sdpa(batch_, heads_, q_len_, kv_len_, dk_, dv_, q_, k_, v_, mask_, scale_,
                            out_null_ ? nullptr : out_buf_.data(),
                            weights_null_ ? nullptr : weights_buf_.data());
    }

    void ExpectNothingWritten() {
        EXPECT_TRUE(Untouched("out", out_buf_));
        EXPECT_TRUE(Untouched("weights", weights_buf_));
    }

    std::vector<float> q_buf_, k_buf_, v_buf_, out_buf_, weights_buf_, additive_buf_;
    std::vector<uint8_t> bool_mask_buf_;
    int32_t batch_ = 2, heads_ = 2, q_len_ = 3, kv_len_ = 4, dk_ = 5, dv_ = 6;
    const float *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
    attngen_mask mask_storage_{};
    const attngen_mask *mask_ = &mask_storage_;
    float scale_ = 0.0f;
    bool out_null_ = false, weights_null_ = false;
};

TEST_F(SdpaErrors, BaselineSucceeds) {
    EXPECT_EQ(Sdpa(), ATTNGEN_OK) << attngen_last_error();
    EXPECT_STREQ(attngen_last_error(), "");
    mask_ = nullptr;
    weights_null_ = true;
    EXPECT_EQ(Sdpa(), ATTNGEN_OK) << attngen_last_error();
}

TEST_F(SdpaErrors, NonPositiveSizes) {
    struct Size {
        const char *name;
        int32_t *value;
    };
    const Size sizes[] = {{"batch", &batch_},   {"heads", &heads_}, {"q_len", &q_len_},
                          {"kv_len", &kv_len_}, {"dk", &dk_},       {"dv", &dv_}};
    for (const Size &s : sizes) {
        const int32_t saved = *s.value;
        for (int v : {0, -1}) {
            SCOPED_TRACE(::testing::Message() << s.name << " = " << v);
            *s.value = v;
            EXPECT_TRUE(FailedWith(Sdpa(), kInvalid, {s.name}));
            ExpectNothingWritten();
        }
        *s.value = saved;
    }
}

TEST_F(SdpaErrors, NullInputsAndOutput) {
    q_ = nullptr;
    EXPECT_TRUE(FailedWith(Sdpa(), kInvalid, {"q"}));
    ExpectNothingWritten();
    q_ = q_buf_.data(), k_ = nullptr;
    EXPECT_TRUE(FailedWith(Sdpa(), kInvalid, {"k"}));
    ExpectNothingWritten();
    k_ = k_buf_.data(), v_ = nullptr;
    EXPECT_TRUE(FailedWith(Sdpa(), kInvalid, {"v"}));
    ExpectNothingWritten();
    v_ = v_buf_.data(), out_null_ = true;
    EXPECT_TRUE(FailedWith(Sdpa(), kInvalid, {"out"}));
    ExpectNothingWritten();
}

TEST_F(SdpaErrors, UnknownCausal) {
    mask_storage_.causal = static_cast<attngen_causal>(7);
    EXPECT_TRUE(FailedWith(Sdpa(), kInvalid, {"causal"}));
    ExpectNothingWritten();
}

TEST_F(SdpaErrors, KvLengths) {
    const std::vector<int32_t> negative = {-1, 4}, too_long = {4, 5};
    mask_storage_.kv_lengths = negative.data();
    EXPECT_TRUE(FailedWith(Sdpa(), kInvalid, {"kv_lengths"}));
    ExpectNothingWritten();
    mask_storage_.kv_lengths = too_long.data();
    EXPECT_TRUE(FailedWith(Sdpa(), kShape, {"kv_lengths"}));
    ExpectNothingWritten();
}

TEST_F(SdpaErrors, BoolMaskBatch) {
    batch_ = 2;
    mask_storage_.bool_mask = bool_mask_buf_.data();
    mask_storage_.bool_mask_batch = 3;
    EXPECT_TRUE(FailedWith(Sdpa(), kShape, {"bool_mask_batch"}));
    ExpectNothingWritten();
}

// additive_heads refers to sdpa's `heads`.
TEST_F(SdpaErrors, AdditiveCounts) {
    mask_storage_.additive = additive_buf_.data();
    mask_storage_.additive_batch = 3;
    mask_storage_.additive_heads = 2;
    EXPECT_TRUE(FailedWith(Sdpa(), kShape, {"additive_batch"}));
    ExpectNothingWritten();
    mask_storage_.additive_batch = 2;
    mask_storage_.additive_heads = 4;
    EXPECT_TRUE(FailedWith(Sdpa(), kShape, {"additive_heads"}));
    ExpectNothingWritten();
}

TEST_F(SdpaErrors, QElementCountOverflowsInt32) {
    batch_ = kHuge;
    heads_ = kHuge;
    EXPECT_TRUE(FailedWith(Sdpa(), kShape, kOverflowNames));
    ExpectNothingWritten();
}

TEST_F(SdpaErrors, WeightsElementCountOverflowsInt32) {
    batch_ = 1;
    heads_ = 1;
    q_len_ = kSquareOverflow;
    kv_len_ = kSquareOverflow;
    dk_ = 1;
    dv_ = 1;
    EXPECT_TRUE(FailedWith(Sdpa(), kShape, kOverflowNames));
    ExpectNothingWritten();
}

// ---------------------------------------------------------------------------------------------
// attngen_linear

class LinearErrors : public ::testing::Test {
  protected:
    attngen_status Linear() {
        y_buf_.assign(5 * 3, kSentinel);
        return attngen_linear(rows_, in_, out_, x_, w_, bias_, y_null_ ? nullptr : y_buf_.data());
    }

    std::vector<float> x_buf_ = std::vector<float>(5 * 4, 0.5f);
    std::vector<float> w_buf_ = std::vector<float>(3 * 4, 0.25f);
    std::vector<float> b_buf_ = std::vector<float>(3, 1.0f);
    std::vector<float> y_buf_;
    int32_t rows_ = 5, in_ = 4, out_ = 3;
    const float *x_ = x_buf_.data(), *w_ = w_buf_.data(), *bias_ = b_buf_.data();
    bool y_null_ = false;
};

TEST_F(LinearErrors, BaselineSucceeds) {
    EXPECT_EQ(Linear(), ATTNGEN_OK) << attngen_last_error();
    EXPECT_EQ(y_buf_, std::vector<float>(5 * 3, 1.5f));  // 4 * 0.5 * 0.25 + 1, exact
}

TEST_F(LinearErrors, NonPositiveSizes) {
    for (int v : {0, -1}) {
        SCOPED_TRACE(v);
        rows_ = v;
        EXPECT_TRUE(FailedWith(Linear(), kInvalid, {"rows"}));
        EXPECT_TRUE(Untouched("y", y_buf_));
        rows_ = 5, in_ = v;
        EXPECT_TRUE(FailedWith(Linear(), kInvalid, {"in_features"}));
        EXPECT_TRUE(Untouched("y", y_buf_));
        in_ = 4, out_ = v;
        EXPECT_TRUE(FailedWith(Linear(), kInvalid, {"out_features"}));
        EXPECT_TRUE(Untouched("y", y_buf_));
        out_ = 3;
    }
}

TEST_F(LinearErrors, NullPointers) {
    x_ = nullptr;
    EXPECT_TRUE(FailedWith(Linear(), kInvalid, {"x"}));
    EXPECT_TRUE(Untouched("y", y_buf_));
    x_ = x_buf_.data(), w_ = nullptr;
    EXPECT_TRUE(FailedWith(Linear(), kInvalid, {"w"}));
    EXPECT_TRUE(Untouched("y", y_buf_));
    w_ = w_buf_.data(), y_null_ = true;
    EXPECT_TRUE(FailedWith(Linear(), kInvalid, {"y"}));
}

TEST_F(LinearErrors, NullBiasIsFine) {
    bias_ = nullptr;
    EXPECT_EQ(Linear(), ATTNGEN_OK) << attngen_last_error();
    EXPECT_EQ(y_buf_, std::vector<float>(5 * 3, 0.5f));
}

TEST_F(LinearErrors, ElementCountOverflowsInt32) {
    rows_ = kHuge;
    in_ = kHuge;
    EXPECT_TRUE(FailedWith(Linear(), kShape, kOverflowNames));
    EXPECT_TRUE(Untouched("y", y_buf_));
    rows_ = 5;
    in_ = 4;
    out_ = INT_MAX;  // y is [5, INT_MAX]
    EXPECT_TRUE(FailedWith(Linear(), kShape, kOverflowNames));
    EXPECT_TRUE(Untouched("y", y_buf_));
}

}  // namespace
}  // namespace attngen_test
