// The masks of the testers (sdpa_tester.h, mha_tester.h): what a test asks for, and the
// buffers and attngen_mask built from it, random parts drawn from the tester's generator.
#ifndef ATTNGEN_TESTS_RANDOM_MASK_H
#define ATTNGEN_TESTS_RANDOM_MASK_H

#include <attngen/attngen.h>

#include <cstdint>
#include <vector>

#include "test_util.h"

namespace attngen_test {

struct MaskSpec {
    attngen_causal causal = ATTNGEN_CAUSAL_NONE;
    std::vector<int32_t> kv_lengths;  // one per batch item; empty = no key padding
    // Boolean mask of bool_mask_batch (1 or batch) items, 0 = none: bool_values when given,
    // else each entry masked with probability bool_density.
    int bool_mask_batch = 0;
    double bool_density = 0.3;
    std::vector<uint8_t> bool_values;
    // Additive mask [additive_batch, additive_heads, q_len, kv_len], additive_batch 0 = none:
    // additive_values when given, else uniform in [-2, 2) with -inf at neg_inf_fraction.
    int additive_batch = 0, additive_heads = 0;
    double neg_inf_fraction = 0.1;
    std::vector<float> additive_values;
};

// A mask's buffers and the attngen_mask that points into them. It moves (vectors keep their
// storage) but never copies.
struct OwnedMask {
    OwnedMask() = default;
    OwnedMask(OwnedMask &&) = default;
    OwnedMask &operator=(OwnedMask &&) = default;
    OwnedMask(const OwnedMask &) = delete;
    OwnedMask &operator=(const OwnedMask &) = delete;

    std::vector<int32_t> kv_lengths;
    std::vector<uint8_t> bool_mask;
    std::vector<float> additive;
    attngen_mask mask{};
};

// Draws the random parts from rng in a fixed order (boolean mask, then additive mask), so a
// seed gives the same mask every time.
OwnedMask MakeMask(const MaskSpec &spec, int q_len, int kv_len, Rng &rng);

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_RANDOM_MASK_H
