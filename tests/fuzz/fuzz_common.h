// What every part of the fuzzer shares (fuzz_capi.cpp describes the checks): the sentinel
// outputs, the status and output checks, and the generation of sizes, tensors and masks from
// the fuzzer's bytes.
#pragma once

#include <attngen/attngen.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "validity.h"

namespace attngen_fuzz {

// Valid calls whose buffers would exceed this many floats are skipped: fuzzing wants many
// small calls per second, and huge valid calls only test the allocator.
constexpr size_t kMaxElements = size_t(1) << 22;
// Calls predicted to fail get buffers of this many elements: a library that wrongly accepted
// them would read or write out of bounds, which the sanitizers or a crash report.
constexpr size_t kTinyElements = 16;
// Extents up to this keep every element count below (products of four of them fit size_t).
constexpr int32_t kMaxExtent = 1 << 15;

// Reports a violated check with the verdict it was judged by, and aborts (a libFuzzer crash).
// The input of the run in progress, which Fail prints.
void SetCurrentInput(const uint8_t *data, size_t size);
[[noreturn]] void Fail(const std::string &what, const Verdict &verdict);

// ---------------------------------------------------------------------------------------------
// Input generation. Sizes and choices come from the fuzzer's bytes; bulk data comes from a
// generator seeded by them, so short inputs describe whole problems.

// Usually in [lo, hi], sometimes a special size (0, negative, huge).
int32_t PickSize(FuzzedDataProvider &in, int32_t lo, int32_t hi);

// The bulk data's random bits: splitmix64, a UniformRandomBitGenerator. Drawn through
// std::mt19937 and std::uniform_real_distribution, a corpus input of large tensors took 4.6 s
// under the sanitizers, half of it in libstdc++'s generate_canonical (a long double log per
// value) and in the coverage hooks on the engine's compares (perf); a CI run fails an input at
// 20 s (run_fuzz.sh), which such an input passed beside a two-job build (session 92: 23 s).
class BulkRandom {
  public:
    using result_type = uint32_t;
    static constexpr result_type min() { return 0; }
    static constexpr result_type max() { return UINT32_MAX; }
    void seed(uint64_t s) { state_ = s; }
    result_type operator()() {
        uint64_t z = state_ += 0x9e3779b97f4a7c15u;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        return result_type((z ^ (z >> 31)) >> 32);
    }
    // Uniform in [-magnitude, magnitude), from 24 of the bits (each step exact in float).
    float symmetric(float magnitude) {
        return magnitude * (float(operator()() >> 8) * 0x1p-23f - 1.0f);
    }

  private:
    uint64_t state_ = 0;
};

struct DataSource {
    BulkRandom gen;
    float magnitude;  // values are uniform in [-magnitude, magnitude]
    int specials;     // how many special values each tensor gets at most
};

// n values of the source, a few of them replaced by special values (NaN, +-Inf, huge, ...).
std::vector<float> MakeTensor(FuzzedDataProvider &in, DataSource &src, size_t n);

// Storage of an attngen_mask and what the fuzzer put in it.
struct MaskStorage {
    attngen_mask mask{};
    std::vector<int32_t> kv_lengths;
    std::vector<uint8_t> bool_mask;
    std::vector<float> additive;
    bool present = false;
};

// A mask (or none) for attention over [batch, heads, q_len, kv_len]; without usable sizes only
// the parts that need no memory.
void MakeMask(FuzzedDataProvider &in, DataSource &src, MaskStorage &m, int32_t batch, int32_t heads,
              int32_t q_len, int32_t kv_len, bool sizes_usable);

const attngen_mask *MaskOrNull(const MaskStorage &m);

// ---------------------------------------------------------------------------------------------
// Checks.

float MaxAbs(const std::vector<float> &t);
bool AllFinite(const std::vector<float> &t);
// Additive entries that keep results finite: finite ones, and -inf (a mask).
bool AdditiveTame(const MaskStorage &m);
// Additive entries of at most 4 in magnitude, or -inf: softmax stays well conditioned.
bool AdditiveSmall(const MaskStorage &m);

// Outputs of a call, pre-filled with the sentinel.
struct Output {
    std::vector<float> data;
    float *get() { return data.empty() ? nullptr : data.data(); }
};

// n elements of the sentinel (at least one), or none when the output is not given.
Output MakeOutput(size_t n, bool given);

// The status is allowed by the verdict, and the error message is set exactly on failure.
void CheckStatus(attngen_status got, const Verdict &verdict, const char *call);
// On success every element was written (and is finite when expect_finite); on error none was.
void CheckOutput(const char *name, const Output &o, attngen_status status, bool expect_finite,
                 const Verdict &verdict);
// An input is bit for bit what it was before the call.
void CheckUnchanged(const char *name, const std::vector<float> &before,
                    const std::vector<float> &after, const Verdict &verdict);
// |got - ref| <= 1e-3 (1 + |ref|): loose, for tame data only, where honest float32 error is
// below 1e-5; a masking or indexing mistake is off by far more.
void CheckAgainstReference(const char *name, const std::vector<float> &got,
                           const std::vector<double> &ref, const Verdict &verdict);
// |got - ref| <= bound + kRelTol |ref|: the rounding bounds of tests/error_bounds.h, the
// tolerance of the test suite.
void CheckAgainstBounds(const std::string &name, const float *got, const std::vector<double> &ref,
                        const std::vector<double> &bound, const Verdict &verdict);

// Every extent in [lo, hi].
bool AllIn(std::initializer_list<int32_t> extents, int32_t lo, int32_t hi);
// A valid call whose buffers are small enough to run.
bool Usable(const Verdict &v, size_t elements);

}  // namespace attngen_fuzz
