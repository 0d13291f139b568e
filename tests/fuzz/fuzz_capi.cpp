// libFuzzer target over the attngen C API: attngen_mha_create / set_weights / forward / destroy,
// attngen_sdpa, attngen_linear and attngen_set_num_threads, with arbitrary configurations,
// bounded shapes, masks and data (NaN, +-Inf, huge and subnormal values included). Inputs that
// start with the byte 0x02 add the 0.2 API: grouped key/value heads, a value head size,
// precision and rotary positions in the config, attngen_sdpa_gqa, and KV caches
// (attngen_kv_cache_create / append / lengths / reset / destroy, attngen_mha_forward_cached)
// driven through sequences of calls, two caches per handle and a second handle.
//
// Every call is checked against the contract (validity.h, written independently of the
// runtime):
//   - the status is allowed by the verdict (valid calls succeed, invalid ones fail), a failure
//     leaves a message in attngen_last_error() and a success leaves it empty;
//   - on success every output element was written (outputs start as a sentinel NaN whose bits
//     no computation produces), the outputs are finite when the inputs are finite and too small
//     to overflow, and with tame data they match the float64 reference (support/reference.h;
//     for the 0.2 inputs within the rounding bounds of tests/error_bounds.h);
//   - on error nothing was written (the sentinel bytes are intact), and a cache call that fails
//     appends to no item: after every cache call the lengths attngen_kv_cache_lengths reports
//     equal the fuzzer's model of the cache, whose rows the reference then attends to;
//   - a cached forward is causal attention of its queries over the item's positions, aligned
//     bottom-right, with keys and values projected by the weights of their append; a query that
//     sees no position gets exactly the output bias;
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

#include "error_bounds.h"
#include "reference.h"
#include "test_util.h"
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

// |got - ref| <= bound + kRelTol |ref|: the rounding bounds of tests/error_bounds.h, the
// tolerance of the test suite.
void CheckAgainstBounds(const std::string &name, const float *got, const std::vector<double> &ref,
                        const std::vector<double> &bound, const Verdict &verdict) {
    for (size_t i = 0; i < ref.size(); ++i) {
        const double allowed = bound[i] + attngen_test::kRelTol * std::fabs(ref[i]);
        if (!(std::fabs(double(got[i]) - ref[i]) <= allowed)) {
            Fail(name + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", reference " +
                     std::to_string(ref[i]) + ", allowed error " + std::to_string(allowed),
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

// attngen_sdpa, or (0.2) attngen_sdpa_gqa with grouped key/value heads.
void FuzzSdpa(FuzzedDataProvider &in, DataSource &src, bool v2) {
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
    if (v2) {
        c.grouped = in.ConsumeIntegralInRange(0, 3) != 0;
        // Mostly a divisor of heads (1 = MQA), sometimes anything.
        if (in.ConsumeIntegralInRange(0, 3) != 0 && c.heads >= 1 && c.heads <= 64) {
            std::vector<int32_t> divisors;
            for (int32_t k = 1; k <= c.heads; ++k)
                if (c.heads % k == 0) divisors.push_back(k);
            c.kv_heads = divisors[in.ConsumeIntegralInRange<size_t>(0, divisors.size() - 1)];
        } else {
            c.kv_heads = PickSize(in, 1, 4);
        }
    }
    const int32_t kv_heads = c.grouped ? c.kv_heads : c.heads;

    auto count = [](std::initializer_list<int32_t> dims) {
        size_t n = 1;
        for (int32_t d : dims) n *= size_t(std::max(d, 0));
        return n;
    };
    const size_t nq = count({c.batch, c.heads, c.q_len, c.dk});
    const size_t nk = count({c.batch, kv_heads, c.kv_len, c.dk});
    const size_t nv = count({c.batch, kv_heads, c.kv_len, c.dv});
    const size_t no = count({c.batch, c.heads, c.q_len, c.dv});
    const size_t nw = count({c.batch, c.heads, c.q_len, c.kv_len});
    const bool sizes_small =
        AllIn({c.batch, c.heads, kv_heads, c.q_len, c.kv_len, c.dk, c.dv}, 1, kMaxExtent) &&
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
    const float *qp = c.q_given ? q.data() : nullptr, *kp = c.k_given ? k.data() : nullptr;
    const float *vp = c.v_given ? val.data() : nullptr;
    const attngen_status s =
        c.grouped ? attngen_sdpa_gqa(c.batch, c.heads, c.kv_heads, c.q_len, c.kv_len, c.dk, c.dv,
                                     qp, kp, vp, c.mask, c.scale, out.get(), weights.get())
                  : attngen_sdpa(c.batch, c.heads, c.q_len, c.kv_len, c.dk, c.dv, qp, kp, vp,
                                 c.mask, c.scale, out.get(), weights.get());
    CheckStatus(s, v, c.grouped ? "attngen_sdpa_gqa" : "attngen_sdpa");

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
        shape.kv_heads = c.grouped ? c.kv_heads : 0;
        const attngen_ref::SdpaResult ref =
            attngen_ref::sdpa(shape, q.data(), k.data(), val.data(), c.mask, c.scale);
        if (!v2) {  // the 0.1 inputs keep their check
            if (c.out_given) CheckAgainstReference("out", out.data, ref.out, v);
            if (c.weights_given) CheckAgainstReference("weights", weights.data, ref.weights, v);
            return;
        }
        const std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end());
        const std::vector<double> vd(val.begin(), val.end());
        const attngen_test::AttentionBounds bounds = attngen_test::AttentionErrorBounds(
            shape, qd.data(), kd.data(), vd.data(), nullptr, nullptr, nullptr, scale, ref);
        if (c.out_given) CheckAgainstBounds("out", out.data.data(), ref.out, bounds.out, v);
        if (c.weights_given)
            CheckAgainstBounds("weights", weights.data.data(), ref.weights, bounds.weights, v);
    }
}

// ---------------------------------------------------------------------------------------------
// An MHA handle through its life, and (0.2) its KV caches.

// The weights a handle was given, as the fuzzer keeps them for the reference.
struct Weights {
    std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo;
    bool finite = true;  // every weight (and bias, with use_bias) is finite
    float max_w = 0.0f, max_b = 0.0f;
};

// Keys and values projected with `kv`, everything else with `current`: what a cache item holds
// is projected when it is appended, with the weights of that moment.
attngen_ref::MhaWeights RefWeights(const Weights &current, const Weights &kv) {
    attngen_ref::MhaWeights w;
    w.wq = current.wq.data(), w.wo = current.wo.data();
    w.bq = current.bq.data(), w.bo = current.bo.data();
    w.wk = kv.wk.data(), w.wv = kv.wv.data();
    w.bk = kv.bk.data(), w.bv = kv.bv.data();
    return w;
}

// The fuzzer's model of one cache item: the rows appended to it, and what it can say about
// their projections.
struct CacheItem {
    int32_t len = 0;
    std::vector<float> keys, values;         // [len, kdim], [len, vdim]
    std::shared_ptr<const Weights> weights;  // what its rows were projected with (one set)
    bool mixed = false;                      // rows projected with different weights: no reference
    double projected = 0.0;  // bound on |a projected (rotated) key or value element|
    bool finite = true;      // every projection surely finite
    bool tame = true;        // rows and their weights of magnitude <= 1
};

struct CacheSlot {
    std::unique_ptr<attngen_kv_cache, void (*)(attngen_kv_cache *)> cache{nullptr,
                                                                          attngen_kv_cache_destroy};
    int32_t max_batch = 0, max_len = 0;
    std::vector<CacheItem> items;

    std::vector<int32_t> Lengths() const {
        std::vector<int32_t> n;
        for (const CacheItem &item : items) n.push_back(item.len);
        return n;
    }
};

constexpr int32_t kSentinelLength = 0x7fa5a5a5;
// Buffers of one cache call stay below this many floats: decoding-sized calls are small, and
// the fuzzer wants many of them per second.
constexpr size_t kMaxCacheCallElements = size_t(1) << 18;
// Caches hold at most this many floats (and items), for the same reason.
constexpr size_t kMaxCacheElements = size_t(1) << 20;
constexpr int32_t kMaxCacheBatch = 64;
// Item numbers of a call with no cache: items of an imagined cache of this many.
constexpr int32_t kNoCacheBatch = 4;

struct Session {
    attngen_mha_config config{};
    attngen_ref::MhaDims d;
    attngen_mha *m = nullptr;
    std::shared_ptr<const Weights> weights;  // NULL until a set_weights succeeded
    bool v2 = false;                         // the 0.2 calls are fuzzed
    // A second handle of the same config and weights: a cache of `m` must refuse it.
    std::unique_ptr<attngen_mha, void (*)(attngen_mha *)> other{nullptr, attngen_mha_destroy};
    CacheSlot caches[2];  // destroyed before the handles (members go in reverse order)

    // Bound on |projected element| of rows of width `width` and magnitude `max_x`, rotated
    // pairs included (a rotation mixes two elements: at most their sum).
    double Projected(double width, double max_x, const Weights &w) const {
        const double p = width * max_x * w.max_w + w.max_b;
        return d.rope != ATTNGEN_ROPE_NONE ? 2 * p : p;
    }
    // Rotation angles are finite (a NaN or negative base gives NaN angles).
    bool RopeFinite() const { return d.rope == ATTNGEN_ROPE_NONE || d.rope_theta > 0; }
    // Angles small enough that float32 and float64 compute the same rotation: the base is at
    // least 1, so no angle exceeds its position.
    bool RopeTame() const {
        return d.rope == ATTNGEN_ROPE_NONE || (d.rope_theta >= 1.0 && std::isfinite(d.rope_theta));
    }
};

// A C caller may store any int in an enum field; C++ must not load it as the enum type.
template <typename Enum>
int32_t RawEnum(const Enum &field) {
    int32_t value;
    std::memcpy(&value, &field, sizeof value);
    return value;
}

// The 0.2 config fields: mostly valid (a divisor of num_heads, an even rotary size, a usual
// base), sometimes anything.
void Pick02Fields(FuzzedDataProvider &in, attngen_mha_config &c) {
    const int kv = in.ConsumeIntegralInRange(0, 7);
    if (kv < 3 || c.num_heads <= 0 || c.num_heads > 64) {
        c.num_kv_heads = kv < 3 ? 0 : PickSize(in, 1, 6);
    } else if (kv < 7) {
        std::vector<int32_t> divisors;
        for (int32_t k = 1; k <= c.num_heads; ++k)
            if (c.num_heads % k == 0) divisors.push_back(k);
        c.num_kv_heads = divisors[in.ConsumeIntegralInRange<size_t>(0, divisors.size() - 1)];
    } else {
        c.num_kv_heads = PickSize(in, 1, 6);
    }
    c.v_head_dim = in.ConsumeBool() ? 0 : PickSize(in, 1, 20);
    const int precision = in.ConsumeIntegralInRange(0, 15);
    c.precision = precision < 14    ? ATTNGEN_PRECISION_F32
                  : precision == 14 ? attngen_precision(in.ConsumeIntegralInRange(1, 2))
                                    : attngen_precision(in.ConsumeIntegral<int32_t>());
    const int rope = in.ConsumeIntegralInRange(0, 15);
    c.rope = rope < 5    ? ATTNGEN_ROPE_NONE
             : rope < 10 ? ATTNGEN_ROPE_HALF
             : rope < 15 ? ATTNGEN_ROPE_INTERLEAVED
                         : attngen_rope(in.ConsumeIntegral<int32_t>());
    const int rotary = in.ConsumeIntegralInRange(0, 7);
    c.rotary_dim = rotary < 4   ? 0
                   : rotary < 7 ? 2 * in.ConsumeIntegralInRange(1, 10)
                                : PickSize(in, -2, 24);
    static const float kThetas[] = {0.0f, 10000.0f, 500000.0f, 2.0f, 100.0f, 1e6f};
    static const float kOddThetas[] = {std::numeric_limits<float>::quiet_NaN(),
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       -1.0f,
                                       0.5f,
                                       1.0f,
                                       std::nextafter(1.0f, 2.0f),
                                       std::numeric_limits<float>::denorm_min(),
                                       std::numeric_limits<float>::max()};
    c.rope_theta = in.ConsumeIntegralInRange(0, 15) < 14 ? in.PickValueInArray(kThetas)
                                                         : in.PickValueInArray(kOddThetas);
}

void SetWeightsAction(FuzzedDataProvider &in, DataSource &src, Session &s) {
    const attngen_ref::MhaDims &d = s.d;
    // The handle keeps its previous weights when this call fails.
    auto w = std::make_shared<Weights>();
    w->wq = MakeTensor(in, src, size_t(d.inner()) * d.d_model);
    w->wk = MakeTensor(in, src, size_t(d.kv_inner()) * d.kdim);
    w->wv = MakeTensor(in, src, size_t(d.v_inner()) * d.vdim);
    w->wo = MakeTensor(in, src, size_t(d.d_model) * d.out_inner());
    w->bq = MakeTensor(in, src, size_t(d.inner()));
    w->bk = MakeTensor(in, src, size_t(d.kv_inner()));
    w->bv = MakeTensor(in, src, size_t(d.v_inner()));
    w->bo = MakeTensor(in, src, size_t(d.d_model));
    const int missing = in.ConsumeIntegralInRange(0, 15);  // < 8: that pointer is NULL
    const float *p[8] = {w->wq.data(), w->wk.data(), w->wv.data(), w->wo.data(),
                         w->bq.data(), w->bk.data(), w->bv.data(), w->bo.data()};
    if (missing < 8) p[missing] = nullptr;
    const bool no_biases = in.ConsumeIntegralInRange(0, 3) == 0;
    if (no_biases) p[4] = p[5] = p[6] = p[7] = nullptr;
    const bool h_null = in.ConsumeIntegralInRange(0, 31) == 0;
    const bool weight_missing = missing < 4;
    const bool bias_missing = no_biases || (missing >= 4 && missing < 8);
    const Verdict v = set_weights_verdict(s.config, !h_null, !weight_missing, !bias_missing);
    const attngen_status st = attngen_mha_set_weights(h_null ? nullptr : s.m, p[0], p[1], p[2],
                                                      p[3], p[4], p[5], p[6], p[7]);
    CheckStatus(st, v, "attngen_mha_set_weights");
    if (st != ATTNGEN_OK) return;
    const bool bias = s.config.use_bias != 0;
    w->finite =
        AllFinite(w->wq) && AllFinite(w->wk) && AllFinite(w->wv) && AllFinite(w->wo) &&
        (!bias || (AllFinite(w->bq) && AllFinite(w->bk) && AllFinite(w->bv) && AllFinite(w->bo)));
    w->max_w = std::max({MaxAbs(w->wq), MaxAbs(w->wk), MaxAbs(w->wv), MaxAbs(w->wo)});
    w->max_b = bias ? std::max({MaxAbs(w->bq), MaxAbs(w->bk), MaxAbs(w->bv), MaxAbs(w->bo)}) : 0.0f;
    s.weights = w;
    // The other handle mirrors this one, so a cache call through it differs only in the handle.
    if (s.other && attngen_mha_set_weights(s.other.get(), p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                           p[7]) != ATTNGEN_OK)
        Fail(std::string("set_weights on the second handle: ") + attngen_last_error(), v);
}

void ThreadsAction(FuzzedDataProvider &in) {
    const int32_t n = in.ConsumeIntegralInRange(0, 3) == 0 ? in.ConsumeIntegral<int32_t>()
                                                           : in.ConsumeIntegralInRange(0, 3);
    const Verdict v = set_num_threads_verdict(n);
    const attngen_status s = attngen_set_num_threads(n);
    CheckStatus(s, v, "attngen_set_num_threads");
    if (attngen_get_num_threads() < 1) Fail("attngen_get_num_threads() < 1", v);
}

void ForwardAction(FuzzedDataProvider &in, DataSource &src, Session &s) {
    const attngen_mha_config &config = s.config;
    const int32_t d_model = config.d_model, kdim = s.d.kdim, vdim = s.d.vdim;
    ForwardCall f{};
    f.batch = PickSize(in, 1, 3);
    f.q_len = PickSize(in, 1, 70);
    f.kv_len = PickSize(in, 1, 70);
    f.have_handle = in.ConsumeIntegralInRange(0, 31) != 0;
    f.weights_were_set = s.weights != nullptr;
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
    if (v.may_succeed && !real) return;
    const std::vector<float> query = MakeTensor(in, src, real ? nq : kTinyElements);
    const std::vector<float> key = MakeTensor(in, src, real ? nk : kTinyElements);
    const std::vector<float> value = MakeTensor(in, src, real ? nv : kTinyElements);
    const std::vector<float> query0 = query, key0 = key, value0 = value;
    Output out = MakeOutput(real ? no : kTinyElements, f.out_given);
    Output weights = MakeOutput(real ? nw : kTinyElements, f.weights_given);
    const attngen_status st = attngen_mha_forward(
        f.have_handle ? s.m : nullptr, f.batch, f.q_len, f.kv_len,
        f.query_given ? query.data() : nullptr, f.key_given ? key.data() : nullptr,
        f.value_given ? value.data() : nullptr, f.mask, out.get(), weights.get());
    CheckStatus(st, v, "attngen_mha_forward");
    // Magnitude bounds of each stage: nothing overflows float when they stay < 1e30.
    static const Weights kNone;
    const Weights &w = s.weights ? *s.weights : kNone;
    const double in_width = std::max({d_model, kdim, vdim});
    const double max_x = std::max({MaxAbs(query), MaxAbs(key), MaxAbs(value)});
    const double projected = s.Projected(in_width, max_x, w);
    const double logit = double(s.d.head_dim) * projected * projected / std::sqrt(s.d.head_dim);
    const double output = double(s.d.out_inner()) * projected * w.max_w + w.max_b;
    const bool finite = w.finite && AllFinite(query) && AllFinite(key) && AllFinite(value) &&
                        AdditiveTame(mask) && s.RopeFinite() && logit < 1e30 && output < 1e30;
    CheckOutput("out", out, st, finite, v);
    CheckOutput("weights", weights, st, finite, v);
    CheckUnchanged("query", query0, query, v);
    CheckUnchanged("key", key0, key, v);
    CheckUnchanged("value", value0, value, v);

    const bool tame = finite && max_x <= 1.0f && w.max_w <= 1.0f && w.max_b <= 1.0f &&
                      AdditiveSmall(mask) && s.RopeTame();
    if (st != ATTNGEN_OK || !tame) return;
    const attngen_ref::MhaWeights rw = RefWeights(w, w);
    const attngen_ref::MhaResult ref = attngen_ref::mha(
        config, rw, f.batch, f.q_len, f.kv_len, query.data(), key.data(), value.data(), f.mask);
    if (!s.v2) {  // the 0.1 inputs keep their check
        if (f.out_given) CheckAgainstReference("out", out.data, ref.out, v);
        if (f.weights_given) CheckAgainstReference("weights", weights.data, ref.weights, v);
        return;
    }
    const attngen_test::MhaBounds bounds = attngen_test::MhaErrorBounds(
        config, rw, f.batch, f.q_len, f.kv_len, query.data(), key.data(), value.data(), ref);
    if (f.out_given) CheckAgainstBounds("out", out.data.data(), ref.out, bounds.out, v);
    if (f.weights_given)
        CheckAgainstBounds("weights", weights.data.data(), ref.weights, bounds.weights, v);
}

// Item numbers of a cache call over `batch` rows: NULL (rows b -> item b), or an array of
// batch entries, usually distinct items of the cache, sometimes with a duplicate or an item
// that does not exist. Arrays only for small batches (the library reads batch entries).
std::vector<int32_t> PickItems(FuzzedDataProvider &in, int32_t batch, int32_t max_batch,
                               bool *given) {
    std::vector<int32_t> items;
    *given = batch >= 1 && batch <= kMaxCacheBatch && in.ConsumeIntegralInRange(0, 2) != 0;
    if (!*given) return items;
    std::vector<int32_t> pool(size_t(std::max(max_batch, 1)));
    for (size_t k = 0; k < pool.size(); ++k) pool[k] = int32_t(k);
    for (int32_t b = 0; b < batch; ++b) {
        if (size_t(b) < pool.size()) {
            std::swap(pool[b], pool[in.ConsumeIntegralInRange<size_t>(b, pool.size() - 1)]);
            items.push_back(pool[b]);
        } else {  // more rows than items: some item repeats
            items.push_back(pool[in.ConsumeIntegralInRange<size_t>(0, pool.size() - 1)]);
        }
    }
    if (in.ConsumeIntegralInRange(0, 7) == 0) {
        const size_t at = in.ConsumeIntegralInRange<size_t>(0, items.size() - 1);
        static const int32_t kNonItems[] = {-1, INT32_MIN, INT32_MAX};
        switch (in.ConsumeIntegralInRange(0, 2)) {
            case 0:
                items[at] = items[in.ConsumeIntegralInRange<size_t>(0, items.size() - 1)];
                break;
            case 1:
                items[at] = max_batch;
                break;
            default:
                items[at] = in.PickValueInArray(kNonItems);
                break;
        }
    }
    return items;
}

// The lengths the cache reports equal the model's (after every call on it: a failed call
// appends nothing anywhere, a call on one cache changes no other).
void CheckLengths(const CacheSlot &slot, const char *after, const Verdict &context) {
    if (!slot.cache) return;
    std::vector<int32_t> got(size_t(slot.max_batch), kSentinelLength);
    const attngen_status s = attngen_kv_cache_lengths(slot.cache.get(), got.data());
    CheckStatus(s, kv_cache_lengths_verdict(true, true), "attngen_kv_cache_lengths");
    for (int32_t k = 0; k < slot.max_batch; ++k) {
        if (got[k] != slot.items[k].len)
            Fail(std::string("after ") + after + ": item " + std::to_string(k) + " holds " +
                     std::to_string(got[k]) + " positions, expected " +
                     std::to_string(slot.items[k].len),
                 context);
    }
}

void CheckAllLengths(const Session &s, const char *after, const Verdict &context) {
    for (const CacheSlot &slot : s.caches) CheckLengths(slot, after, context);
}

// The second handle, made on first use.
attngen_mha *OtherHandle(Session &s) {
    if (!s.other) {
        attngen_mha *m = nullptr;
        if (attngen_mha_create(&s.config, &m) != ATTNGEN_OK)
            Fail(std::string("a second handle of a valid config: ") + attngen_last_error(), {});
        s.other.reset(m);
        const Weights *w = s.weights.get();
        if (w && attngen_mha_set_weights(m, w->wq.data(), w->wk.data(), w->wv.data(), w->wo.data(),
                                         w->bq.data(), w->bk.data(), w->bv.data(),
                                         w->bo.data()) != ATTNGEN_OK)
            Fail(std::string("set_weights on the second handle: ") + attngen_last_error(), {});
    }
    return s.other.get();
}

void CacheCreateAction(FuzzedDataProvider &in, Session &s) {
    CacheSlot &slot = s.caches[in.ConsumeBool()];
    CacheCreateCall c{};
    c.max_batch = PickSize(in, 1, 4);
    c.max_len = PickSize(in, 1, 32);
    c.have_handle = in.ConsumeIntegralInRange(0, 31) != 0;
    c.out_given = in.ConsumeIntegralInRange(0, 31) != 0;
    const Verdict v = kv_cache_create_verdict(s.config, c);
    const size_t per_position = size_t(s.d.num_kv_heads) * (s.d.head_dim + s.d.v_head_dim);
    const bool affordable = AllIn({c.max_batch}, 1, kMaxCacheBatch) &&
                            AllIn({c.max_len}, 1, kMaxExtent) &&
                            size_t(c.max_batch) * c.max_len * per_position <= kMaxCacheElements;
    if (v.may_succeed && !affordable) return;
    attngen_kv_cache *cache = nullptr;
    const attngen_status st = attngen_kv_cache_create(c.have_handle ? s.m : nullptr, c.max_batch,
                                                      c.max_len, c.out_given ? &cache : nullptr);
    CheckStatus(st, v, "attngen_kv_cache_create");
    if (st != ATTNGEN_OK) {
        if (cache != nullptr) Fail("attngen_kv_cache_create failed but set the cache", v);
        return;
    }
    slot.cache.reset(cache);
    slot.max_batch = c.max_batch, slot.max_len = c.max_len;
    slot.items.assign(size_t(c.max_batch), CacheItem());
    CheckAllLengths(s, "attngen_kv_cache_create", v);  // items start empty
}

void CacheDestroyAction(FuzzedDataProvider &in, Session &s) {
    CacheSlot &slot = s.caches[in.ConsumeBool()];
    slot.cache.reset();  // attngen_kv_cache_destroy, NULL included
    slot.items.clear();
    slot.max_batch = slot.max_len = 0;
}

void CacheResetAction(FuzzedDataProvider &in, Session &s) {
    CacheSlot &slot = s.caches[in.ConsumeBool()];
    const bool pass_cache = slot.cache && in.ConsumeIntegralInRange(0, 15) != 0;
    const int pick = in.ConsumeIntegralInRange(0, 7);
    const int32_t top = std::max(slot.max_batch, 1) - 1;
    const int32_t item = pick < 2   ? -1
                         : pick < 6 ? in.ConsumeIntegralInRange(0, top)
                         : pick < 7 ? slot.max_batch
                                    : in.ConsumeIntegral<int32_t>();
    const std::vector<int32_t> lengths = slot.Lengths();
    const CacheState state{slot.max_batch, slot.max_len, lengths.data()};
    const Verdict v = kv_cache_reset_verdict(pass_cache ? &state : nullptr, item);
    const attngen_status st = attngen_kv_cache_reset(pass_cache ? slot.cache.get() : nullptr, item);
    CheckStatus(st, v, "attngen_kv_cache_reset");
    if (st == ATTNGEN_OK) {
        for (int32_t k = 0; k < slot.max_batch; ++k)
            if (item == -1 || item == k) slot.items[k] = CacheItem();
    }
    CheckAllLengths(s, "attngen_kv_cache_reset", v);
}

// The length getter's own refusals; its answers are checked after every cache call.
void CacheLengthsAction(FuzzedDataProvider &in, Session &s) {
    const CacheSlot &slot = s.caches[in.ConsumeBool()];
    const bool pass_cache = slot.cache && in.ConsumeIntegralInRange(0, 3) != 0;
    const bool lengths_given = in.ConsumeIntegralInRange(0, 3) != 0;
    std::vector<int32_t> got(size_t(std::max(slot.max_batch, 1)), kSentinelLength);
    const Verdict v = kv_cache_lengths_verdict(pass_cache, lengths_given);
    const attngen_status st = attngen_kv_cache_lengths(pass_cache ? slot.cache.get() : nullptr,
                                                       lengths_given ? got.data() : nullptr);
    CheckStatus(st, v, "attngen_kv_cache_lengths");
    if (st != ATTNGEN_OK) {
        for (int32_t n : got)
            if (n != kSentinelLength) Fail("attngen_kv_cache_lengths wrote on error", v);
    } else {
        CheckLengths(slot, "attngen_kv_cache_lengths", v);
    }
}

// What a cache call shares: which cache (or none), through which handle, which items.
struct CacheCallArgs {
    CacheSlot *slot;
    bool pass_cache, other_handle, have_handle;
    int32_t batch;
    bool items_given;
    std::vector<int32_t> items;
    std::vector<int32_t> lengths;  // of the slot, before the call
    CacheState state;

    int32_t ItemOf(int32_t b) const { return items_given ? items[b] : b; }
    const int32_t *Items() const { return items_given ? items.data() : nullptr; }
};

CacheCallArgs PickCacheCall(FuzzedDataProvider &in, Session &s, int32_t max_rows) {
    CacheCallArgs a{};
    a.slot = &s.caches[in.ConsumeBool()];
    a.pass_cache = a.slot->cache && in.ConsumeIntegralInRange(0, 31) != 0;
    a.other_handle = in.ConsumeIntegralInRange(0, 15) == 0;
    a.have_handle = in.ConsumeIntegralInRange(0, 31) != 0;
    a.batch = PickSize(in, 1, max_rows);
    const int32_t max_batch = a.slot->cache ? a.slot->max_batch : kNoCacheBatch;
    a.items = PickItems(in, a.batch, max_batch, &a.items_given);
    a.lengths = a.slot->Lengths();
    a.state = CacheState{a.slot->max_batch, a.slot->max_len, a.lengths.data()};
    return a;
}

CacheCall MakeCacheCall(const Session &s, const CacheCallArgs &a) {
    CacheCall c{};
    c.have_handle = a.have_handle;
    c.weights_were_set = s.weights != nullptr;
    c.cache = a.pass_cache ? &a.state : nullptr;
    c.cache_of_this_handle = !a.other_handle;
    c.batch = a.batch;
    c.items = a.Items();
    c.inputs_finite = true;
    c.projections_may_overflow = false;
    return c;
}

attngen_mha *HandleFor(Session &s, const CacheCallArgs &a) {
    return !a.have_handle ? nullptr : a.other_handle ? OtherHandle(s) : s.m;
}

void CacheAppendAction(FuzzedDataProvider &in, DataSource &src, Session &s) {
    CacheCallArgs a = PickCacheCall(in, s, 4);
    AppendCall c{};
    c.common = MakeCacheCall(s, a);
    c.len = PickSize(in, 1, 8);
    c.key_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.value_given = in.ConsumeIntegralInRange(0, 15) != 0;
    const int32_t kdim = s.d.kdim, vdim = s.d.vdim;
    const size_t rows = size_t(std::max(a.batch, 0)) * size_t(std::max(c.len, 0));
    const bool real =
        AllIn({a.batch, c.len}, 1, kMaxExtent) && rows * (kdim + vdim) <= kMaxCacheCallElements;
    // Full-size inputs whenever they are affordable, valid call or not: the library reads the
    // data (non-finite values are refused) and may do so before it finds another problem, so
    // a stand-in buffer is fair only for a call with nothing to read.
    const std::vector<float> key = MakeTensor(in, src, real ? rows * kdim : kTinyElements);
    const std::vector<float> value = MakeTensor(in, src, real ? rows * vdim : kTinyElements);
    const std::vector<float> key0 = key, value0 = value;
    const std::vector<int32_t> items0 = a.items;
    static const Weights kNone;
    const Weights &w = s.weights ? *s.weights : kNone;
    const double max_x = std::max(MaxAbs(key), MaxAbs(value));
    const double projected = s.Projected(std::max(kdim, vdim), max_x, w);
    if (real) {
        c.common.inputs_finite =
            (!c.key_given || AllFinite(key)) && (!c.value_given || AllFinite(value));
    }
    c.common.projections_may_overflow = !w.finite || !(projected < 1e37);
    const Verdict v = kv_cache_append_verdict(s.config, c);
    if (!real && (v.may_succeed || (a.batch > 0 && c.len > 0))) return;
    const attngen_status st = attngen_kv_cache_append(
        HandleFor(s, a), a.pass_cache ? a.slot->cache.get() : nullptr, a.batch, a.Items(), c.len,
        c.key_given ? key.data() : nullptr, c.value_given ? value.data() : nullptr);
    CheckStatus(st, v, "attngen_kv_cache_append");
    CheckUnchanged("key", key0, key, v);
    CheckUnchanged("value", value0, value, v);
    if (a.items != items0) Fail("items (an input) was modified", v);
    if (st == ATTNGEN_OK) {
        const bool rows_tame = AllFinite(key) && AllFinite(value) && max_x <= 1.0;
        for (int32_t b = 0; b < a.batch; ++b) {
            CacheItem &item = a.slot->items[size_t(a.ItemOf(b))];
            const size_t at = size_t(b) * c.len;
            item.keys.insert(item.keys.end(), key.begin() + at * kdim,
                             key.begin() + (at + c.len) * kdim);
            item.values.insert(item.values.end(), value.begin() + at * vdim,
                               value.begin() + (at + c.len) * vdim);
            if (item.len > 0 && item.weights != s.weights) item.mixed = true;
            item.weights = s.weights;
            item.len += c.len;
            item.projected = std::max(item.projected, projected);
            item.finite = item.finite && w.finite && projected < 1e30;
            item.tame = item.tame && rows_tame && w.max_w <= 1.0f && w.max_b <= 1.0f;
        }
    }
    CheckAllLengths(s, "attngen_kv_cache_append", v);
}

void ForwardCachedAction(FuzzedDataProvider &in, DataSource &src, Session &s) {
    CacheCallArgs a = PickCacheCall(in, s, 4);
    CachedForwardCall c{};
    c.common = MakeCacheCall(s, a);
    c.q_len = PickSize(in, 1, 8);
    c.query_given = in.ConsumeIntegralInRange(0, 15) != 0;
    c.out_given = in.ConsumeIntegralInRange(0, 15) != 0;
    const int causal = in.ConsumeIntegralInRange(0, 7);
    c.causal = causal < 3   ? ATTNGEN_CAUSAL_NONE
               : causal < 6 ? ATTNGEN_CAUSAL_BOTTOM_RIGHT
               : causal < 7 ? ATTNGEN_CAUSAL_TOP_LEFT
                            : in.ConsumeIntegral<int32_t>();
    const int32_t d_model = s.config.d_model;
    const size_t nq = size_t(std::max(a.batch, 0)) * size_t(std::max(c.q_len, 0)) * d_model;
    const bool real = AllIn({a.batch, c.q_len}, 1, kMaxExtent) && 2 * nq <= kMaxCacheCallElements;
    const std::vector<float> query = MakeTensor(in, src, real ? nq : kTinyElements);
    const std::vector<float> query0 = query;
    const std::vector<int32_t> items0 = a.items;
    Output out = MakeOutput(real ? nq : kTinyElements, c.out_given);
    static const Weights kNone;
    const Weights &w = s.weights ? *s.weights : kNone;
    const double pq = s.Projected(d_model, MaxAbs(query), w);
    if (real) c.common.inputs_finite = !c.query_given || AllFinite(query);
    // Items of a valid call, and whether everything they hold is surely finite.
    bool stored_finite = true, stored_tame = true;
    double pkv = 0.0;
    if (a.pass_cache && a.batch >= 1 && a.batch <= a.slot->max_batch) {
        for (int32_t b = 0; b < a.batch; ++b) {
            const int32_t k = a.ItemOf(b);
            if (k < 0 || k >= a.slot->max_batch) continue;  // refused
            const CacheItem &item = a.slot->items[size_t(k)];
            stored_finite = stored_finite && item.finite;
            stored_tame = stored_tame && item.tame && !item.mixed;
            pkv = std::max(pkv, item.projected);
        }
    }
    c.common.projections_may_overflow = !w.finite || !(pq < 1e37) || !stored_finite;
    const Verdict v = forward_cached_verdict(s.config, c);
    if (!real && (v.may_succeed || (a.batch > 0 && c.q_len > 0))) return;  // as in appends
    const attngen_status st = attngen_mha_forward_cached(
        HandleFor(s, a), a.pass_cache ? a.slot->cache.get() : nullptr, a.batch, a.Items(), c.q_len,
        c.query_given ? query.data() : nullptr, attngen_causal(c.causal), out.get());
    CheckStatus(st, v, "attngen_mha_forward_cached");
    const double head_dim = s.d.head_dim;
    const double logit = head_dim * pq * pkv / std::sqrt(head_dim);
    const double output = double(s.d.out_inner()) * pkv * w.max_w + w.max_b;
    const bool finite = w.finite && AllFinite(query) && stored_finite && s.RopeFinite() &&
                        pq < 1e30 && logit < 1e30 && output < 1e30;
    CheckOutput("out", out, st, finite, v);
    CheckUnchanged("query", query0, query, v);
    if (a.items != items0) Fail("items (an input) was modified", v);
    CheckAllLengths(s, "attngen_mha_forward_cached", v);
    if (st != ATTNGEN_OK || !c.out_given) return;

    // Row block b is causal attention of its queries over what item items[b] holds, aligned
    // bottom-right: query i at position n - q_len + i sees positions <= its own. That is
    // attngen_mha_forward with kv_len = n and the bottom-right mask (or none), whose
    // reference and rounding bounds the test suite has.
    const bool bottom_right = c.causal == ATTNGEN_CAUSAL_BOTTOM_RIGHT;
    const bool tame = finite && stored_tame && MaxAbs(query) <= 1.0f && w.max_w <= 1.0f &&
                      w.max_b <= 1.0f && s.RopeTame();
    const size_t block = size_t(c.q_len) * d_model;
    for (int32_t b = 0; b < a.batch; ++b) {
        const CacheItem &item = a.slot->items[size_t(a.ItemOf(b))];
        const float *got = out.data.data() + b * block;
        // A query that sees nothing gets the output bias, exactly: attention contributes 0.
        if (w.finite) {
            for (int32_t i = 0; i < c.q_len; ++i) {
                const bool sees_nothing =
                    item.len == 0 || (bottom_right && item.len - c.q_len + i < 0);
                if (!sees_nothing) continue;
                for (int32_t o = 0; o < d_model; ++o) {
                    const float want = s.d.use_bias ? w.bo[o] : 0.0f;
                    if (got[size_t(i) * d_model + o] != want)
                        Fail("out row " + std::to_string(i) + " of block " + std::to_string(b) +
                                 " sees no position but is not the output bias",
                             v);
                }
            }
        }
        // The float64 reference costs about this many multiply-adds; skip the rare huge ones.
        const double work = double(c.q_len) * (item.len + 1) * s.d.num_heads *
                            (s.d.head_dim + s.d.v_head_dim + d_model);
        // An empty item is all output bias, checked above (the reference needs a position).
        if (!tame || work > 2e6 || item.len == 0) continue;
        const Weights &kv = item.weights ? *item.weights : w;
        const attngen_ref::MhaWeights rw = RefWeights(w, kv);
        attngen_mask mask{};
        mask.causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT;
        const float *q = query.data() + b * block;
        const attngen_ref::MhaResult ref =
            attngen_ref::mha(s.config, rw, 1, c.q_len, item.len, q, item.keys.data(),
                             item.values.data(), bottom_right ? &mask : nullptr);
        const attngen_test::MhaBounds bounds = attngen_test::MhaErrorBounds(
            s.config, rw, 1, c.q_len, item.len, q, item.keys.data(), item.values.data(), ref);
        CheckAgainstBounds("out block " + std::to_string(b) + " (item " +
                               std::to_string(a.ItemOf(b)) + ", " + std::to_string(item.len) +
                               " positions)",
                           got, ref.out, bounds.out, v);
    }
}

// One MHA handle through its life: create, then a few set_weights and forward calls (and, with
// the 0.2 calls, caches made, filled, read, reset and destroyed), destroy.
void FuzzMha(FuzzedDataProvider &in, DataSource &src, bool v2) {
    Session s;
    s.v2 = v2;
    attngen_mha_config &config = s.config;
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
    if (v2) Pick02Fields(in, config);
    Verdict cv = create_verdict(config);
    // A NULL config or out pointer must be refused whatever the config says.
    if (null_config || null_out_handle)
        cv = Verdict(), cv.invalid(ATTNGEN_ERROR_INVALID_ARGUMENT, "NULL argument");
    const attngen_status created =
        attngen_mha_create(null_config ? nullptr : &config, null_out_handle ? nullptr : &s.m);
    CheckStatus(created, cv, "attngen_mha_create");
    if (created != ATTNGEN_OK) {
        if (s.m != nullptr) Fail("create failed but set the handle", cv);
        return;
    }
    std::unique_ptr<attngen_mha, void (*)(attngen_mha *)> handle(s.m, attngen_mha_destroy);
    s.d = attngen_ref::resolve(config);  // the config is valid: its enums may be loaded
    // GPU handles run on PoCL or a real device where one exists: too slow to fuzz here. Their
    // caches are refused (cheaply) until the decode kernels run on GPUs.
    if (device >= 13) {
        if (v2) {
            attngen_kv_cache *cache = nullptr;
            const CacheCreateCall c{1, 4, true, true};
            const attngen_status st = attngen_kv_cache_create(s.m, 1, 4, &cache);
            attngen_kv_cache_destroy(cache);
            CheckStatus(st, kv_cache_create_verdict(config, c), "attngen_kv_cache_create (GPU)");
        }
        return;
    }

    const attngen_ref::MhaDims &d = s.d;
    const size_t weight_elements =
        size_t(d.inner()) * (d.d_model + 1) + size_t(d.kv_inner()) * (d.kdim + 1) +
        size_t(d.v_inner()) * (d.vdim + 1) + size_t(d.d_model) * (d.out_inner() + 1);
    if (weight_elements > kMaxElements) return;  // valid, but too big to fill here

    const int actions = v2 ? in.ConsumeIntegralInRange(1, 12) : in.ConsumeIntegralInRange(1, 4);
    for (int a = 0; a < actions && in.remaining_bytes() > 0; ++a) {
        if (!v2) {  // the 0.1 calls, read from the input as they always were
            const int action = in.ConsumeIntegralInRange(0, 7);
            if (action == 0)
                SetWeightsAction(in, src, s);
            else if (action == 1)
                ThreadsAction(in);
            else
                ForwardAction(in, src, s);
            continue;
        }
        switch (in.ConsumeIntegralInRange(0, 15)) {
            case 0:
            case 1:
                SetWeightsAction(in, src, s);
                break;
            case 2:
                ThreadsAction(in);
                break;
            case 3:
                ForwardAction(in, src, s);
                break;
            case 4:
            case 5:
                CacheCreateAction(in, s);
                break;
            case 6:
            case 7:
            case 8:
                CacheAppendAction(in, src, s);
                break;
            case 9:
            case 10:
            case 11:
                ForwardCachedAction(in, src, s);
                break;
            case 12:
                CacheResetAction(in, s);
                break;
            case 13:
                CacheLengthsAction(in, s);
                break;
            default:
                CacheDestroyAction(in, s);
                break;
        }
    }
}

}  // namespace

// Inputs whose first byte is this fuzz the 0.2 API too: the config's grouped heads, value head
// size, precision and rotary fields, attngen_sdpa_gqa and the KV cache. The byte is skipped and
// every other input is read exactly as before 0.2, so the checked-in corpus keeps its meaning
// (no input in it starts with 0x02).
constexpr uint8_t kApi02 = 0x02;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const bool v2 = size > 0 && data[0] == kApi02;
    FuzzedDataProvider in(v2 ? data + 1 : data, v2 ? size - 1 : size);
    DataSource src;
    src.gen.seed(in.ConsumeIntegral<uint32_t>());
    static const float kMagnitudes[] = {1.0f, 1.0f, 1.0f, 100.0f, 1e4f, 1e20f};
    src.magnitude = in.PickValueInArray(kMagnitudes);
    src.specials = in.ConsumeIntegralInRange(0, 3) == 0 ? in.ConsumeIntegralInRange(1, 4) : 0;
    if (v2) {
        // Mostly handles and their caches; attngen_linear has nothing new.
        if (in.ConsumeIntegralInRange(0, 3) != 0)
            FuzzMha(in, src, true);
        else
            FuzzSdpa(in, src, true);
        return 0;
    }
    switch (in.ConsumeIntegralInRange(0, 2)) {
        case 0:
            FuzzMha(in, src, false);
            break;
        case 1:
            FuzzSdpa(in, src, false);
            break;
        default:
            FuzzLinear(in, src);
            break;
    }
    return 0;
}
