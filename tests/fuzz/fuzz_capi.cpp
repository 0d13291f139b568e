// libFuzzer target over the attngen C API: attngen_mha_create / set_weights / forward / destroy,
// attngen_sdpa, attngen_linear and attngen_set_num_threads, with arbitrary configurations,
// bounded shapes, masks and data (NaN, +-Inf, huge and subnormal values included).
//
// Every call is checked against the contract (validity.h, written independently of the
// runtime):
//   - the status is allowed by the verdict (valid calls succeed, invalid ones fail), a failure
//     leaves a message in attngen_last_error() and a success leaves it empty;
//   - on success every output element was written (outputs start as a sentinel NaN whose bits
//     no computation produces), the outputs are finite when the inputs are finite and too small
//     to overflow, and with tame data they match the float64 reference (tests/reference.h);
//   - on error nothing was written (the sentinel bytes are intact);
//   - inputs are never modified.
// A violated check aborts, which libFuzzer reports as a crash with the input that caused it.
#include <attngen/attngen.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "reference.h"
#include "validity.h"

using namespace attngen_fuzz;

namespace {

// A NaN with a payload that arithmetic never creates (x86 produces 0xffc00000, and NaN inputs
// propagate their own payloads with the quiet bit set, which this one lacks).
constexpr uint32_t kSentinelBits = 0x7fa5a5a5u;
// Valid calls whose buffers would exceed this many floats are skipped: fuzzing wants many
// small calls per second, and huge valid calls only test the allocator.
constexpr size_t kMaxElements = size_t(1) << 22;
// Calls predicted to fail get buffers of this many elements: a library that wrongly accepted
// them would read or write out of bounds, which the sanitizers or a crash report.
constexpr size_t kTinyElements = 16;

[[noreturn]] void Fail(const std::string &what, const Verdict &verdict) {
    std::fprintf(stderr, "attngen fuzz check failed: %s\n  verdict: may_succeed %d, reasons: %s\n",
                 what.c_str(), int(verdict.may_succeed), verdict.reasons.c_str());
    std::abort();
}

float SentinelFloat() {
    float f;
    std::memcpy(&f, &kSentinelBits, sizeof f);
    return f;
}

bool IsSentinel(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits == kSentinelBits;
}

// ---------------------------------------------------------------------------------------------
// Input generation. Sizes and choices come from the fuzzer's bytes; bulk data comes from a
// generator seeded by them, so short inputs describe whole problems.

int32_t PickSize(FuzzedDataProvider &in, int32_t lo, int32_t hi) {
    static const int32_t kSpecial[] = {0,     -1,    -7,      INT32_MIN, INT32_MAX,
                                       46341, 65536, 1 << 20, 1 << 24};
    if (in.ConsumeIntegralInRange(0, 31) == 0) return in.PickValueInArray(kSpecial);
    return in.ConsumeIntegralInRange(lo, hi);
}

float SpecialValue(FuzzedDataProvider &in) {
    static const float kSpecial[] = {std::numeric_limits<float>::quiet_NaN(),
                                     std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity(),
                                     1e30f,
                                     -1e30f,
                                     std::numeric_limits<float>::max(),
                                     -std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::denorm_min(),
                                     -0.0f,
                                     0.0f,
                                     1e4f};
    return in.PickValueInArray(kSpecial);
}

struct DataSource {
    std::mt19937 gen;
    float magnitude;  // values are uniform in [-magnitude, magnitude]
    int specials;     // how many special values each tensor gets at most
};

std::vector<float> MakeTensor(FuzzedDataProvider &in, DataSource &src, size_t n) {
    std::vector<float> t(n);
    std::uniform_real_distribution<float> uniform(-src.magnitude, src.magnitude);
    for (float &x : t) x = uniform(src.gen);
    const int count = n ? in.ConsumeIntegralInRange(0, src.specials) : 0;
    for (int s = 0; s < count; ++s) {
        const size_t at = in.ConsumeIntegralInRange<size_t>(0, n - 1);
        t[at] = SpecialValue(in);
    }
    return t;
}

// Storage of an attngen_mask and what the fuzzer put in it.
struct MaskStorage {
    attngen_mask mask{};
    std::vector<int32_t> kv_lengths;
    std::vector<uint8_t> bool_mask;
    std::vector<float> additive;
    bool present = false;
};

void MakeMask(FuzzedDataProvider &in, DataSource &src, MaskStorage &m, int32_t batch, int32_t heads,
              int32_t q_len, int32_t kv_len, bool sizes_usable) {
    m.present = in.ConsumeBool();
    if (!m.present) return;
    const int causal = in.ConsumeIntegralInRange(0, 7);
    m.mask.causal = causal < 3   ? attngen_causal(causal)
                    : causal < 6 ? ATTNGEN_CAUSAL_NONE
                                 : attngen_causal(in.ConsumeIntegral<int32_t>());
    // Parts are only given with sizes a caller could have allocated for them.
    if (!sizes_usable) {
        // Still exercise the checks that need no memory.
        if (in.ConsumeBool()) {
            m.bool_mask.assign(kTinyElements, 1);
            m.mask.bool_mask = m.bool_mask.data();
            m.mask.bool_mask_batch = PickSize(in, -1, 3);
        }
        return;
    }
    const auto mask_batch = [&](int32_t full) {
        const int pick = in.ConsumeIntegralInRange(0, 5);
        return pick < 2 ? 1 : pick < 4 ? full : PickSize(in, -2, full + 2);
    };
    if (in.ConsumeBool()) {
        m.kv_lengths.resize(size_t(batch));
        for (int32_t &len : m.kv_lengths) {
            len = in.ConsumeIntegralInRange(0, 15) == 0 ? in.ConsumeIntegralInRange(-2, kv_len + 2)
                                                        : in.ConsumeIntegralInRange(0, kv_len);
        }
        m.mask.kv_lengths = m.kv_lengths.data();
    }
    if (in.ConsumeBool()) {
        m.mask.bool_mask_batch = mask_batch(batch);
        const bool count_valid = m.mask.bool_mask_batch == 1 || m.mask.bool_mask_batch == batch;
        const size_t n =
            count_valid ? size_t(m.mask.bool_mask_batch) * q_len * kv_len : kTinyElements;
        const uint32_t density = in.ConsumeIntegralInRange<uint32_t>(0, 16);
        m.bool_mask.resize(n);
        for (uint8_t &b : m.bool_mask) b = (src.gen() % 16) < density ? uint8_t(src.gen()) | 1 : 0;
        m.mask.bool_mask = m.bool_mask.data();
    }
    if (in.ConsumeBool()) {
        m.mask.additive_batch = mask_batch(batch);
        m.mask.additive_heads = mask_batch(heads);
        const bool count_valid = (m.mask.additive_batch == 1 || m.mask.additive_batch == batch) &&
                                 (m.mask.additive_heads == 1 || m.mask.additive_heads == heads);
        const size_t n =
            count_valid ? size_t(m.mask.additive_batch) * m.mask.additive_heads * q_len * kv_len
                        : kTinyElements;
        const uint32_t neg_inf_density = in.ConsumeIntegralInRange<uint32_t>(0, 16);
        const float range = in.ConsumeBool() ? 4.0f : 1e30f;
        std::uniform_real_distribution<float> uniform(-range, range);
        m.additive.resize(n);
        for (float &a : m.additive) {
            a = (src.gen() % 16) < neg_inf_density ? -std::numeric_limits<float>::infinity()
                                                   : uniform(src.gen);
        }
        const int count = in.ConsumeIntegralInRange(0, src.specials);
        for (int s = 0; s < count; ++s)
            m.additive[in.ConsumeIntegralInRange<size_t>(0, n - 1)] = SpecialValue(in);
        m.mask.additive = m.additive.data();
    }
}

const attngen_mask *MaskOrNull(const MaskStorage &m) {
    return m.present ? &m.mask : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Checks.

float MaxAbs(const std::vector<float> &t) {
    float m = 0.0f;
    for (float x : t) m = std::max(m, std::fabs(x));
    return m;
}

bool AllFinite(const std::vector<float> &t) {
    return std::all_of(t.begin(), t.end(), [](float x) { return std::isfinite(x); });
}

// Additive entries that keep results finite: finite ones, and -inf (a mask).
bool AdditiveTame(const MaskStorage &m) {
    return std::all_of(m.additive.begin(), m.additive.end(),
                       [](float a) { return std::isfinite(a) || a < 0; });
}

// Additive entries of at most 4 in magnitude, or -inf: softmax stays well conditioned.
bool AdditiveSmall(const MaskStorage &m) {
    return std::all_of(m.additive.begin(), m.additive.end(),
                       [](float a) { return std::fabs(a) <= 4.0f || a == -INFINITY; });
}

// Outputs of a call, pre-filled with the sentinel.
struct Output {
    std::vector<float> data;
    float *get() { return data.empty() ? nullptr : data.data(); }
};

Output MakeOutput(size_t n, bool given) {
    Output o;
    if (given) o.data.assign(std::max<size_t>(n, 1), SentinelFloat());
    return o;
}

void CheckStatus(attngen_status got, const Verdict &verdict, const char *call) {
    const std::string name = std::string(call) + " returned " + attngen_status_string(got);
    if (!verdict.allows(got)) Fail(name + " (not allowed): " + attngen_last_error(), verdict);
    const bool empty_message = attngen_last_error()[0] == '\0';
    if (got == ATTNGEN_OK && !empty_message) Fail(name + " but left an error message", verdict);
    if (got != ATTNGEN_OK && empty_message) Fail(name + " without a message", verdict);
}

void CheckOutput(const char *name, const Output &o, attngen_status status, bool expect_finite,
                 const Verdict &verdict) {
    for (size_t i = 0; i < o.data.size(); ++i) {
        const float x = o.data[i];
        if (status != ATTNGEN_OK) {
            if (!IsSentinel(x))
                Fail(std::string(name) + "[" + std::to_string(i) + "] written on error", verdict);
        } else if (IsSentinel(x)) {
            Fail(std::string(name) + "[" + std::to_string(i) + "] not written", verdict);
        } else if (expect_finite && !std::isfinite(x)) {
            Fail(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(x) +
                     " is not finite for finite inputs",
                 verdict);
        }
    }
}

void CheckUnchanged(const char *name, const std::vector<float> &before,
                    const std::vector<float> &after, const Verdict &verdict) {
    if (before.size() != after.size() ||
        std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) != 0)
        Fail(std::string(name) + " (an input) was modified", verdict);
}

// |got - ref| <= 1e-3 (1 + |ref|): loose, for tame data only, where honest float32 error is
// below 1e-5; a masking or indexing mistake is off by far more.
void CheckAgainstReference(const char *name, const std::vector<float> &got,
                           const std::vector<double> &ref, const Verdict &verdict) {
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!(std::fabs(double(got[i]) - ref[i]) <= 1e-3 * (1.0 + std::fabs(ref[i])))) {
            Fail(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                     ", reference " + std::to_string(ref[i]),
                 verdict);
        }
    }
}

// Extents up to this keep every element count below (products of four of them fit size_t).
constexpr int32_t kMaxExtent = 1 << 15;

bool AllIn(std::initializer_list<int32_t> extents, int32_t lo, int32_t hi) {
    return std::all_of(extents.begin(), extents.end(),
                       [&](int32_t e) { return e >= lo && e <= hi; });
}

bool Usable(const Verdict &v, size_t elements) {
    return v.may_succeed && elements <= kMaxElements;
}

// ---------------------------------------------------------------------------------------------
// The calls.

void FuzzLinear(FuzzedDataProvider &in, DataSource &src) {
    LinearCall c{};
    c.rows = PickSize(in, 1, 40);
    c.in_features = PickSize(in, 1, 64);
    c.out_features = PickSize(in, 1, 64);
    c.x_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.w_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.y_given = in.ConsumeIntegralInRange(0, 15) != 0;
    const bool with_bias = in.ConsumeBool();
    const Verdict v = linear_verdict(c);
    const size_t nx = size_t(std::max(c.rows, 0)) * std::max(c.in_features, 0);
    const size_t nw = size_t(std::max(c.out_features, 0)) * std::max(c.in_features, 0);
    const size_t ny = size_t(std::max(c.rows, 0)) * std::max(c.out_features, 0);
    const bool real = Usable(v, nx + nw + ny);
    if (v.may_succeed && !real) return;  // valid but too big to run here
    const std::vector<float> x = MakeTensor(in, src, real ? nx : kTinyElements);
    const std::vector<float> w = MakeTensor(in, src, real ? nw : kTinyElements);
    const std::vector<float> b =
        MakeTensor(in, src, real ? size_t(std::max(c.out_features, 1)) : kTinyElements);
    const std::vector<float> x0 = x, w0 = w, b0 = b;
    Output y = MakeOutput(real ? ny : kTinyElements, c.y_given);
    const attngen_status s =
        attngen_linear(c.rows, c.in_features, c.out_features, c.x_given ? x.data() : nullptr,
                       c.w_given ? w.data() : nullptr, with_bias ? b.data() : nullptr, y.get());
    CheckStatus(s, v, "attngen_linear");
    const bool finite = AllFinite(x) && AllFinite(w) && AllFinite(b) &&
                        double(c.in_features) * MaxAbs(x) * MaxAbs(w) + MaxAbs(b) < 1e30;
    CheckOutput("y", y, s, finite, v);
    CheckUnchanged("x", x0, x, v);
    CheckUnchanged("w", w0, w, v);
    CheckUnchanged("bias", b0, b, v);
}

void FuzzSdpa(FuzzedDataProvider &in, DataSource &src) {
    SdpaCall c{};
    c.batch = PickSize(in, 1, 3);
    c.heads = PickSize(in, 1, 4);
    c.q_len = PickSize(in, 1, 70);
    c.kv_len = PickSize(in, 1, 70);
    c.dk = PickSize(in, 1, 40);
    c.dv = PickSize(in, 1, 40);
    c.q_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.k_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.v_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.out_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.weights_given = in.ConsumeBool();
    static const float kScales[] = {0.0f,
                                    1.0f,
                                    -1.0f,
                                    0.125f,
                                    1e-30f,
                                    1e30f,
                                    std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity()};
    c.scale = in.ConsumeIntegralInRange(0, 3) == 0 ? in.PickValueInArray(kScales) : 0.0f;

    auto count = [](std::initializer_list<int32_t> dims) {
        size_t n = 1;
        for (int32_t d : dims) n *= size_t(std::max(d, 0));
        return n;
    };
    const size_t nq = count({c.batch, c.heads, c.q_len, c.dk});
    const size_t nk = count({c.batch, c.heads, c.kv_len, c.dk});
    const size_t nv = count({c.batch, c.heads, c.kv_len, c.dv});
    const size_t no = count({c.batch, c.heads, c.q_len, c.dv});
    const size_t nw = count({c.batch, c.heads, c.q_len, c.kv_len});
    const bool sizes_small =
        AllIn({c.batch, c.heads, c.q_len, c.kv_len, c.dk, c.dv}, 1, kMaxExtent) &&
        nq + nk + nv + no + 3 * nw <= kMaxElements;
    MaskStorage mask;
    MakeMask(in, src, mask, c.batch, c.heads, c.q_len, c.kv_len, sizes_small);
    c.mask = MaskOrNull(mask);
    const Verdict v = sdpa_verdict(c);
    const bool real = sizes_small && v.may_succeed;
    if (v.may_succeed && !real) return;

    const std::vector<float> q = MakeTensor(in, src, real ? nq : kTinyElements);
    const std::vector<float> k = MakeTensor(in, src, real ? nk : kTinyElements);
    const std::vector<float> val = MakeTensor(in, src, real ? nv : kTinyElements);
    const std::vector<float> q0 = q, k0 = k, v0 = val;
    Output out = MakeOutput(real ? no : kTinyElements, c.out_given);
    Output weights = MakeOutput(real ? nw : kTinyElements, c.weights_given);
    const attngen_status s =
        attngen_sdpa(c.batch, c.heads, c.q_len, c.kv_len, c.dk, c.dv,
                     c.q_given ? q.data() : nullptr, c.k_given ? k.data() : nullptr,
                     c.v_given ? val.data() : nullptr, c.mask, c.scale, out.get(), weights.get());
    CheckStatus(s, v, "attngen_sdpa");

    const double scale = c.scale != 0.0f ? std::fabs(double(c.scale)) : 1.0 / std::sqrt(c.dk);
    const double logit_bound = double(c.dk) * MaxAbs(q) * MaxAbs(k) * scale;
    const bool finite = AllFinite(q) && AllFinite(k) && AllFinite(val) && AdditiveTame(mask) &&
                        logit_bound < 1e30 && MaxAbs(val) < 1e30;
    CheckOutput("out", out, s, finite, v);
    CheckOutput("weights", weights, s, finite, v);
    CheckUnchanged("q", q0, q, v);
    CheckUnchanged("k", k0, k, v);
    CheckUnchanged("v", v0, val, v);

    // Tame data: compare with the float64 reference.
    const bool tame = finite && MaxAbs(q) <= 1.0f && MaxAbs(k) <= 1.0f && MaxAbs(val) <= 1.0f &&
                      std::fabs(c.scale) <= 1.0f && AdditiveSmall(mask);
    if (s == ATTNGEN_OK && tame) {
        attngen_ref::SdpaShape shape;
        shape.batch = c.batch, shape.heads = c.heads, shape.q_len = c.q_len;
        shape.kv_len = c.kv_len, shape.dk = c.dk, shape.dv = c.dv;
        const attngen_ref::SdpaResult ref =
            attngen_ref::sdpa(shape, q.data(), k.data(), val.data(), c.mask, c.scale);
        if (c.out_given) CheckAgainstReference("out", out.data, ref.out, v);
        if (c.weights_given) CheckAgainstReference("weights", weights.data, ref.weights, v);
    }
}

// One MHA handle through its life: create, then a few set_weights and forward calls, destroy.
void FuzzMha(FuzzedDataProvider &in, DataSource &src) {
    attngen_mha_config config{};
    config.d_model = PickSize(in, 1, 48);
    config.num_heads = PickSize(in, 1, 6);
    config.kdim = in.ConsumeBool() ? 0 : PickSize(in, 1, 40);
    config.vdim = in.ConsumeBool() ? 0 : PickSize(in, 1, 40);
    config.head_dim = in.ConsumeBool() ? 0 : PickSize(in, 1, 20);
    config.use_bias = in.ConsumeIntegralInRange(0, 2);  // any nonzero means "with bias"
    const int device = in.ConsumeIntegralInRange(0, 15);
    config.device = device < 13   ? ATTNGEN_DEVICE_CPU
                    : device < 15 ? attngen_device(device - 12)
                                  : attngen_device(in.ConsumeIntegral<int32_t>());
    const bool null_config = in.ConsumeIntegralInRange(0, 31) == 0;
    const bool null_out_handle = in.ConsumeIntegralInRange(0, 31) == 0;
    Verdict cv = create_verdict(config);
    // A NULL config or out pointer must be refused whatever the config says.
    if (null_config || null_out_handle)
        cv = Verdict(), cv.invalid(ATTNGEN_ERROR_INVALID_ARGUMENT, "NULL argument");
    attngen_mha *m = nullptr;
    const attngen_status created =
        attngen_mha_create(null_config ? nullptr : &config, null_out_handle ? nullptr : &m);
    CheckStatus(created, cv, "attngen_mha_create");
    if (created != ATTNGEN_OK) {
        if (m != nullptr) Fail("create failed but set the handle", cv);
        return;
    }
    std::unique_ptr<attngen_mha, void (*)(attngen_mha *)> handle(m, attngen_mha_destroy);
    // GPU handles run on PoCL or a real device where one exists: too slow to fuzz here.
    if (device >= 13) return;

    const int32_t d_model = config.d_model;
    const int32_t kdim = config.kdim ? config.kdim : d_model;
    const int32_t vdim = config.vdim ? config.vdim : d_model;
    const int32_t head_dim = config.head_dim ? config.head_dim : d_model / config.num_heads;
    const size_t inner = size_t(config.num_heads) * head_dim;
    const size_t weight_elements = inner * (size_t(d_model) * 2 + kdim + vdim + 4);
    if (weight_elements > kMaxElements) return;  // valid, but too big to fill here

    std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo;
    bool weights_set = false;
    bool weights_finite = true;
    float max_w = 0.0f, max_b = 0.0f;
    const int actions = in.ConsumeIntegralInRange(1, 4);
    for (int a = 0; a < actions && in.remaining_bytes() > 0; ++a) {
        const int action = in.ConsumeIntegralInRange(0, 7);
        if (action == 0) {  // set_weights
            // The handle keeps its previous weights when this call fails.
            std::vector<float> nwq = MakeTensor(in, src, inner * d_model);
            std::vector<float> nwk = MakeTensor(in, src, inner * kdim);
            std::vector<float> nwv = MakeTensor(in, src, inner * vdim);
            std::vector<float> nwo = MakeTensor(in, src, size_t(d_model) * inner);
            std::vector<float> nbq = MakeTensor(in, src, inner), nbk = MakeTensor(in, src, inner);
            std::vector<float> nbv = MakeTensor(in, src, inner);
            std::vector<float> nbo = MakeTensor(in, src, size_t(d_model));
            const int missing = in.ConsumeIntegralInRange(0, 15);  // < 8: that pointer is NULL
            const float *w[8] = {nwq.data(), nwk.data(), nwv.data(), nwo.data(),
                                 nbq.data(), nbk.data(), nbv.data(), nbo.data()};
            if (missing < 8) w[missing] = nullptr;
            const bool no_biases = in.ConsumeIntegralInRange(0, 3) == 0;
            if (no_biases) w[4] = w[5] = w[6] = w[7] = nullptr;
            const bool h_null = in.ConsumeIntegralInRange(0, 31) == 0;
            const bool weight_missing = missing < 4;
            const bool bias_missing = no_biases || (missing >= 4 && missing < 8);
            const Verdict v = set_weights_verdict(config, !h_null, !weight_missing, !bias_missing);
            const attngen_status s = attngen_mha_set_weights(h_null ? nullptr : m, w[0], w[1], w[2],
                                                             w[3], w[4], w[5], w[6], w[7]);
            CheckStatus(s, v, "attngen_mha_set_weights");
            if (s == ATTNGEN_OK) {
                wq.swap(nwq), wk.swap(nwk), wv.swap(nwv), wo.swap(nwo);
                bq.swap(nbq), bk.swap(nbk), bv.swap(nbv), bo.swap(nbo);
                weights_set = true;
                const bool bias = config.use_bias != 0;
                weights_finite =
                    AllFinite(wq) && AllFinite(wk) && AllFinite(wv) && AllFinite(wo) &&
                    (!bias || (AllFinite(bq) && AllFinite(bk) && AllFinite(bv) && AllFinite(bo)));
                max_w = std::max({MaxAbs(wq), MaxAbs(wk), MaxAbs(wv), MaxAbs(wo)});
                max_b = bias ? std::max({MaxAbs(bq), MaxAbs(bk), MaxAbs(bv), MaxAbs(bo)}) : 0.0f;
            }
        } else if (action == 1) {  // the thread pool's size, any value
            const int32_t n = in.ConsumeIntegralInRange(0, 3) == 0
                                  ? in.ConsumeIntegral<int32_t>()
                                  : in.ConsumeIntegralInRange(0, 3);
            const Verdict v = set_num_threads_verdict(n);
            const attngen_status s = attngen_set_num_threads(n);
            CheckStatus(s, v, "attngen_set_num_threads");
            if (attngen_get_num_threads() < 1) Fail("attngen_get_num_threads() < 1", v);
        } else {  // forward
            ForwardCall f{};
            f.batch = PickSize(in, 1, 3);
            f.q_len = PickSize(in, 1, 70);
            f.kv_len = PickSize(in, 1, 70);
            f.have_handle = in.ConsumeIntegralInRange(0, 31) != 0;
            f.weights_were_set = weights_set;
            f.query_given = in.ConsumeIntegralInRange(0, 15) != 0;
            f.key_given = in.ConsumeIntegralInRange(0, 15) != 0;
            f.value_given = in.ConsumeIntegralInRange(0, 15) != 0;
            f.out_given = in.ConsumeIntegralInRange(0, 15) != 0;
            f.weights_given = in.ConsumeBool();
            const auto rows = [&](int32_t len) {
                return size_t(std::max(f.batch, 0)) * size_t(std::max(len, 0));
            };
            const size_t nq = rows(f.q_len) * d_model, nk = rows(f.kv_len) * kdim;
            const size_t nv = rows(f.kv_len) * vdim, no = rows(f.q_len) * d_model;
            const size_t nw = rows(f.q_len) * size_t(config.num_heads) * std::max(f.kv_len, 0);
            const bool sizes_small = AllIn({f.batch, f.q_len, f.kv_len}, 1, kMaxExtent) &&
                                     nq + nk + nv + no + 3 * nw <= kMaxElements;
            MaskStorage mask;
            MakeMask(in, src, mask, f.batch, config.num_heads, f.q_len, f.kv_len, sizes_small);
            f.mask = MaskOrNull(mask);
            const Verdict v = forward_verdict(config, f);
            const bool real = sizes_small && v.may_succeed;
            if (v.may_succeed && !real) continue;
            const std::vector<float> query = MakeTensor(in, src, real ? nq : kTinyElements);
            const std::vector<float> key = MakeTensor(in, src, real ? nk : kTinyElements);
            const std::vector<float> value = MakeTensor(in, src, real ? nv : kTinyElements);
            const std::vector<float> query0 = query, key0 = key, value0 = value;
            Output out = MakeOutput(real ? no : kTinyElements, f.out_given);
            Output weights = MakeOutput(real ? nw : kTinyElements, f.weights_given);
            const attngen_status s = attngen_mha_forward(
                f.have_handle ? m : nullptr, f.batch, f.q_len, f.kv_len,
                f.query_given ? query.data() : nullptr, f.key_given ? key.data() : nullptr,
                f.value_given ? value.data() : nullptr, f.mask, out.get(), weights.get());
            CheckStatus(s, v, "attngen_mha_forward");
            // Magnitude bounds of each stage: nothing overflows float when they stay < 1e30.
            const double in_width = std::max({d_model, kdim, vdim});
            const double max_x = std::max({MaxAbs(query), MaxAbs(key), MaxAbs(value)});
            const double projected = in_width * max_x * max_w + max_b;
            const double logit = double(head_dim) * projected * projected / std::sqrt(head_dim);
            const double output = double(inner) * projected * max_w + max_b;
            const bool finite = weights_finite && AllFinite(query) && AllFinite(key) &&
                                AllFinite(value) && AdditiveTame(mask) && logit < 1e30 &&
                                output < 1e30;
            CheckOutput("out", out, s, finite, v);
            CheckOutput("weights", weights, s, finite, v);
            CheckUnchanged("query", query0, query, v);
            CheckUnchanged("key", key0, key, v);
            CheckUnchanged("value", value0, value, v);

            const bool tame =
                finite && max_x <= 1.0f && max_w <= 1.0f && max_b <= 1.0f && AdditiveSmall(mask);
            if (s == ATTNGEN_OK && tame) {
                attngen_ref::MhaWeights w;
                w.wq = wq.data(), w.wk = wk.data(), w.wv = wv.data(), w.wo = wo.data();
                w.bq = bq.data(), w.bk = bk.data(), w.bv = bv.data(), w.bo = bo.data();
                const attngen_ref::MhaResult ref =
                    attngen_ref::mha(config, w, f.batch, f.q_len, f.kv_len, query.data(),
                                     key.data(), value.data(), f.mask);
                if (f.out_given) CheckAgainstReference("out", out.data, ref.out, v);
                if (f.weights_given) CheckAgainstReference("weights", weights.data, ref.weights, v);
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    DataSource src;
    src.gen.seed(in.ConsumeIntegral<uint32_t>());
    static const float kMagnitudes[] = {1.0f, 1.0f, 1.0f, 100.0f, 1e4f, 1e20f};
    src.magnitude = in.PickValueInArray(kMagnitudes);
    src.specials = in.ConsumeIntegralInRange(0, 3) == 0 ? in.ConsumeIntegralInRange(1, 4) : 0;
    switch (in.ConsumeIntegralInRange(0, 2)) {
        case 0:
            FuzzMha(in, src);
            break;
        case 1:
            FuzzSdpa(in, src);
            break;
        default:
            FuzzLinear(in, src);
            break;
    }
    return 0;
}
