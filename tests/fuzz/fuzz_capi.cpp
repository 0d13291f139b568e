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
//     as much of it as a time budget per input affords, kReferenceBudget in fuzz_session.h;
//     for the 0.2 inputs within the rounding bounds of tests/error_bounds.h);
//   - on error nothing was written (the sentinel bytes are intact), and a cache call that fails
//     appends to no item: after every cache call the lengths attngen_kv_cache_lengths reports
//     equal the fuzzer's model of the cache, whose rows the reference then attends to;
//   - a cached forward is causal attention of its queries over the item's positions, aligned
//     bottom-right, with keys and values projected by the weights of their append; a query that
//     sees no position gets exactly the output bias;
//   - inputs are never modified.
//
// The parts: fuzz_common.* (sentinel outputs, checks, sizes, tensors and masks from the bytes),
// fuzz_linear_sdpa.cpp (attngen_linear, attngen_sdpa, attngen_sdpa_gqa), fuzz_mha.cpp (a handle
// through its life), fuzz_session.h and fuzz_kv_cache.cpp (the model of the caches and the
// cache calls), validity.* (the verdicts).
#include <cstddef>
#include <cstdint>

#include "fuzz_calls.h"

using namespace attngen_fuzz;

// Inputs whose first byte is this fuzz the 0.2 API too: the config's grouped heads, value head
// size, precision and rotary fields, attngen_sdpa_gqa and the KV cache. The byte is skipped and
// every other input is read exactly as before 0.2, so the corpus inputs of 0.1 keep their
// meaning (none of them starts with 0x02).
constexpr uint8_t kApi02 = 0x02;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SetCurrentInput(data, size);
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
