#include "fuzz_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "test_util.h"

namespace attngen_fuzz {
namespace {

// A NaN with a payload that arithmetic never creates (x86 produces 0xffc00000, and NaN inputs
// propagate their own payloads with the quiet bit set, which this one lacks).
constexpr uint32_t kSentinelBits = 0x7fa5a5a5u;

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

// A value that stresses the kernels: NaN, +-Inf, huge, subnormal, signed zero.
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

}  // namespace

namespace {
const uint8_t *current_input = nullptr;
size_t current_size = 0;
}  // namespace

void SetCurrentInput(const uint8_t *data, size_t size) {
    current_input = data;
    current_size = size;
}

// The input in base64, so that a failure seen only in a CI log can be replayed: libFuzzer
// writes no crash file when a sanitizer's handler takes the abort.
void PrintCurrentInput() {
    static const char kDigits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < current_size; i += 3) {
        uint32_t v = uint32_t(current_input[i]) << 16;
        if (i + 1 < current_size) v |= uint32_t(current_input[i + 1]) << 8;
        if (i + 2 < current_size) v |= current_input[i + 2];
        out += kDigits[(v >> 18) & 63];
        out += kDigits[(v >> 12) & 63];
        out += i + 1 < current_size ? kDigits[(v >> 6) & 63] : '=';
        out += i + 2 < current_size ? kDigits[v & 63] : '=';
    }
    std::fprintf(stderr, "  input (%zu bytes, base64): %s\n", current_size, out.c_str());
}

[[noreturn]] void Fail(const std::string &what, const Verdict &verdict) {
    std::fprintf(stderr, "attngen fuzz check failed: %s\n  verdict: may_succeed %d, reasons: %s\n",
                 what.c_str(), int(verdict.may_succeed), verdict.reasons.c_str());
    PrintCurrentInput();
    std::abort();
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

std::vector<float> MakeTensor(FuzzedDataProvider &in, DataSource &src, size_t n) {
    std::vector<float> t(n);
    for (float &x : t) x = src.gen.symmetric(src.magnitude);
    const int count = n ? in.ConsumeIntegralInRange(0, src.specials) : 0;
    for (int s = 0; s < count; ++s) {
        const size_t at = in.ConsumeIntegralInRange<size_t>(0, n - 1);
        t[at] = SpecialValue(in);
    }
    return t;
}

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
        m.additive.resize(n);
        for (float &a : m.additive) {
            a = (src.gen() % 16) < neg_inf_density ? -std::numeric_limits<float>::infinity()
                                                   : src.gen.symmetric(range);
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

bool AdditiveTame(const MaskStorage &m) {
    return std::all_of(m.additive.begin(), m.additive.end(),
                       [](float a) { return std::isfinite(a) || a < 0; });
}

bool AdditiveSmall(const MaskStorage &m) {
    return std::all_of(m.additive.begin(), m.additive.end(),
                       [](float a) { return std::fabs(a) <= 4.0f || a == -INFINITY; });
}

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

bool AllIn(std::initializer_list<int32_t> extents, int32_t lo, int32_t hi) {
    return std::all_of(extents.begin(), extents.end(),
                       [&](int32_t e) { return e >= lo && e <= hi; });
}

bool Usable(const Verdict &v, size_t elements) {
    return v.may_succeed && elements <= kMaxElements;
}

}  // namespace attngen_fuzz
