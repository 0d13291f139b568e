// The fuzzer's model of an MHA handle and its KV caches: the weights it was given, and what
// each cache item holds. fuzz_mha.cpp drives a handle through its life, fuzz_kv_cache.cpp the
// cache calls.
#pragma once

#include <attngen/attngen.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "fuzz_common.h"
#include "reference.h"

namespace attngen_fuzz {

// The weights a handle was given, as the fuzzer keeps them for the reference.
struct Weights {
    std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo;
    bool finite = true;  // every weight (and bias, with use_bias) is finite
    float max_w = 0.0f, max_b = 0.0f;
};

// Keys and values projected with `kv`, everything else with `current`: what a cache item holds
// is projected when it is appended, with the weights of that moment.
inline attngen_ref::MhaWeights RefWeights(const Weights &current, const Weights &kv) {
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

// A cache (or none) and the model of its items.
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

// Multiply-adds of the float64 reference (and as many again for its error bounds) one input may
// spend: about 1.2 s with the sanitizers on this project's 2-core hosts (35 million a second,
// measured), far from libFuzzer's 20 s timeout. A call of the usual sizes (up to 48 features,
// 6 heads, 70 positions) costs at most about 1e7; an outsized handle (thousands of features)
// called a dozen times once took 52 s, the likely cause of a failed CI fuzz run. Past the
// budget the calls are still made and checked, except against the reference.
constexpr double kReferenceBudget = 4e7;

// A handle as the fuzzer models it: its config, the weights it was last given, its two cache
// slots and (on first use) a second handle.
struct Session {
    attngen_mha_config config{};
    attngen_ref::MhaDims d;
    attngen_mha *m = nullptr;
    std::shared_ptr<const Weights> weights;  // NULL until a set_weights succeeded
    bool v2 = false;                         // the 0.2 calls are fuzzed
    // A second handle of the same config and weights: a cache of `m` must refuse it.
    std::unique_ptr<attngen_mha, void (*)(attngen_mha *)> other{nullptr, attngen_mha_destroy};
    CacheSlot caches[2];  // destroyed before the handles (members go in reverse order)
    double reference_budget = kReferenceBudget;  // what this input may still spend

    // Bound on |projected element| of rows of width `width` and magnitude `max_x`, rotated
    // pairs included (a rotation mixes two elements: at most their sum).
    double Projected(double width, double max_x, const Weights &w) const {
        const double p = width * max_x * w.max_w + w.max_b;
        return d.rope != ATTNGEN_ROPE_NONE ? 2 * p : p;
    }

    // Whether the float64 reference of a forward of these sizes fits what is left of the
    // budget; if so, it is spent. The work counted: the projections, both attention products
    // and the output projection.
    bool AffordReference(int32_t batch, int32_t q_len, int32_t kv_len) {
        const double queries = double(batch) * q_len, keys = double(batch) * kv_len;
        const double work = queries * d.d_model * (d.inner() + d.out_inner()) +
                            keys * (double(d.kdim) * d.kv_inner() + double(d.vdim) * d.v_inner()) +
                            queries * kv_len * d.num_heads * (d.head_dim + d.v_head_dim);
        if (work > reference_budget) return false;
        reference_budget -= work;
        return true;
    }
    // Rotation angles are finite (a NaN or negative base gives NaN angles).
    bool RopeFinite() const { return d.rope == ATTNGEN_ROPE_NONE || d.rope_theta > 0; }
    // Angles small enough that float32 and float64 compute the same rotation: the base is at
    // least 1, so no angle exceeds its position.
    bool RopeTame() const {
        return d.rope == ATTNGEN_ROPE_NONE || (d.rope_theta >= 1.0 && std::isfinite(d.rope_theta));
    }
};

// The 0.2 calls on a handle's caches (fuzz_kv_cache.cpp). After each, the lengths every cache
// of the session reports equal the model's.
void CacheCreateAction(FuzzedDataProvider &in, Session &s);
void CacheDestroyAction(FuzzedDataProvider &in, Session &s);
void CacheResetAction(FuzzedDataProvider &in, Session &s);
// The length getter's own refusals; its answers are checked after every cache call.
void CacheLengthsAction(FuzzedDataProvider &in, Session &s);
void CacheAppendAction(FuzzedDataProvider &in, DataSource &src, Session &s);
void ForwardCachedAction(FuzzedDataProvider &in, DataSource &src, Session &s);

}  // namespace attngen_fuzz
