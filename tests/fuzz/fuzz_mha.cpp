// An MHA handle through its life: attngen_mha_create (with the 0.2 config fields), set_weights,
// forward and attngen_set_num_threads, and (0.2) the cache calls of fuzz_kv_cache.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "error_bounds.h"
#include "fuzz_calls.h"
#include "fuzz_session.h"
#include "reference.h"

namespace attngen_fuzz {
namespace {

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
    bool fit = true;
    if (s.config.precision == ATTNGEN_PRECISION_F16) {
        for (const std::vector<float> *t : {&w->wq, &w->wk, &w->wv, &w->wo}) {
            for (float x : *t) fit = fit && !(std::isfinite(x) && std::fabs(x) >= 65520.0f);
        }
    }
    // The given tensors only: a NULL one is not read.
    bool given_finite = true;
    const std::vector<float> *tensors[8] = {&w->wq, &w->wk, &w->wv, &w->wo,
                                            &w->bq, &w->bk, &w->bv, &w->bo};
    for (int i = 0; i < 8; ++i) {
        const bool read = p[i] != nullptr && (i < 4 || s.config.use_bias != 0);
        given_finite = given_finite && (!read || AllFinite(*tensors[i]));
    }
    const Verdict v =
        set_weights_verdict(s.config, !h_null, !weight_missing, !bias_missing, given_finite, fit);
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
    if (st != ATTNGEN_OK || !tame || !s.AffordReference(f.batch, f.q_len, f.kv_len)) return;
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

}  // namespace

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
    // GPU handles run on PoCL or a real device where one exists: too slow to fuzz here beyond
    // the creation of a small cache (tests/test_device_decode.cpp checks their caches).
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

}  // namespace attngen_fuzz
