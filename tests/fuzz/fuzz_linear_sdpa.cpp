// The stateless calls: attngen_linear, attngen_sdpa and (0.2) attngen_sdpa_gqa.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "error_bounds.h"
#include "fuzz_calls.h"
#include "reference.h"

namespace attngen_fuzz {

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

    // The dot products q . k are float32 sums formed before the scale multiplies them, so both
    // they and the logits must stay in range: with inputs of 1e20 and a scale of 1e-30 the
    // logits are about 1e10 but the scores overflow (the fuzzer, seed 84 on the SSE4.1 variant:
    // the weights path gave NaN there; the AVX2 and AVX-512 variants happened to give finite
    // numbers).
    const double scale = c.scale != 0.0f ? std::fabs(double(c.scale)) : 1.0 / std::sqrt(c.dk);
    const double score_bound = double(c.dk) * MaxAbs(q) * MaxAbs(k);
    const bool finite = AllFinite(q) && AllFinite(k) && AllFinite(val) && AdditiveTame(mask) &&
                        score_bound < 1e30 && score_bound * scale < 1e30 && MaxAbs(val) < 1e30;
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

}  // namespace attngen_fuzz
