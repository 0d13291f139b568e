// The KV cache calls of the 0.2 API (attngen_kv_cache_create / append / lengths / reset /
// destroy, attngen_mha_forward_cached), checked against the session's model of the caches.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "error_bounds.h"
#include "fuzz_session.h"
#include "reference.h"

namespace attngen_fuzz {
namespace {

constexpr int32_t kSentinelLength = 0x7fa5a5a5;
// Buffers of one cache call stay below this many floats: decoding-sized calls are small, and
// the fuzzer wants many of them per second.
constexpr size_t kMaxCacheCallElements = size_t(1) << 18;
// Caches hold at most this many floats (and items), for the same reason.
constexpr size_t kMaxCacheElements = size_t(1) << 20;
constexpr int32_t kMaxCacheBatch = 64;
// Item numbers of a call with no cache: items of an imagined cache of this many.
constexpr int32_t kNoCacheBatch = 4;

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

}  // namespace

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
    // A float16 cache refuses projected keys or values beyond its range (65504).
    const double storable = s.config.precision == ATTNGEN_PRECISION_F16 ? 65504.0 : 1e37;
    c.common.projections_may_overflow = !w.finite || !(projected < storable);
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
        // An empty item is all output bias, checked above (the reference needs a position).
        if (!tame || item.len == 0 || !s.AffordReference(1, c.q_len, item.len)) continue;
        const Weights &kv = item.weights ? *item.weights : w;
        const attngen_ref::MhaWeights rw = RefWeights(w, kv);
        attngen_mask mask{};
        mask.causal = ATTNGEN_CAUSAL_BOTTOM_RIGHT;
        const float *q = query.data() + b * block;
        const attngen_ref::MhaResult ref =
            attngen_ref::mha(s.config, rw, 1, c.q_len, item.len, q, item.keys.data(),
                             item.values.data(), bottom_right ? &mask : nullptr);
        const attngen_test::MhaBounds bounds =
            attngen_test::MhaErrorBounds(s.config, rw, 1, c.q_len, item.len, q, item.keys.data(),
                                         item.values.data(), ref, /*cached_keys_values=*/true);
        CheckAgainstBounds("out block " + std::to_string(b) + " (item " +
                               std::to_string(a.ItemOf(b)) + ", " + std::to_string(item.len) +
                               " positions)",
                           got, ref.out, bounds.out, v);
    }
}

}  // namespace attngen_fuzz
