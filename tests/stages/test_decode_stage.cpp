// The split-KV decode (define_decode_attention) against a float64 reference, JIT-compiled: the
// GPU schedule (schedule_decode_attention_gpu) for OpenCL, PoCL on machines without a GPU, each
// of its split kernels (gpu_decode_rows_per_thread 1 and 4) at splits of one pass of a block's
// threads and of more (gpu_decode_split_keys), so that the kernels the library's build does not
// take are checked too, over a cache in the device layout (constrain_device_cache_layout), so
// the kernels take the aligned wide loads the library's do; and the CPU schedule
// (schedule_decode_attention_cpu) at knob settings the tuner may pick, over float32 and
// bfloat16 caches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <attngen/attngen.h>
#include "Halide.h"
#include "knob_draws.h"
#include "layout.h"
#include "schedule_cpu.h"
#include "schedule_gpu.h"
#include "stages.h"

namespace {

using namespace Halide;
using attngen::kCacheKeyBlock;
using attngen::kCacheValuePanel;

struct DecodeCase {
    int dk, dv, group, kv_heads, q_len, max_len, causal;
    std::vector<int> items, lengths;  // per batch row: its cache item and the positions it holds
    int cache_items;

    std::string name() const {
        return "dk " + std::to_string(dk) + " dv " + std::to_string(dv) + " group " +
               std::to_string(group) + " q_len " + std::to_string(q_len) + " max_len " +
               std::to_string(max_len) + " causal " + std::to_string(causal);
    }
};

// The GPU knobs a pipeline is compiled with.
struct DecodeKnobs {
    int rows_per_thread, split_keys;
};

// The decode stage over a cache of float32 or bfloat16 elements, one compiled pipeline for every
// case of one knob setting.
class DecodePipeline {
  public:
    // The GPU kernels for OpenCL, over a float32 cache in the device layout.
    explicit DecodePipeline(const DecodeKnobs &knobs)
        : DecodePipeline(attngen_test::opencl_target(), Float(32)) {
        attngen::constrain_device_cache_layout(k_);
        attngen::constrain_device_cache_layout(v_);
        attngen::GpuScheduleKnobs gpu;
        gpu.gpu_decode_rows_per_thread = knobs.rows_per_thread;
        gpu.gpu_decode_split_keys = knobs.split_keys;
        attngen::DecodeAttentionStage a = attngen::define_decode_attention(
            inputs(), knobs.split_keys, attngen::DecodeSplit::Fixed);
        attngen::schedule_decode_attention_gpu(a, gpu);
        compile(a.out);
    }

    // The CPU kernel for `target` as attngen_mha_decode builds it (splits that shrink to the
    // call, no rotary positions), over a cache of `cache_element`.
    DecodePipeline(const Target &target, const attngen::CpuScheduleKnobs &knobs,
                   const Type &cache_element)
        : DecodePipeline(target, cache_element) {
        const int split_keys = attngen::resolve_cpu_knobs(knobs, target).decode_split_keys;
        attngen::DecodeAttentionStage a = attngen::define_decode_attention(
            inputs(), split_keys, attngen::DecodeSplit::ShrinkToCall);
        attngen::schedule_decode_attention_cpu(a, target, knobs, cache_element, cast<bool>(true));
        compile(a.out);
    }

    bool bfloat16_cache() const { return k_.type() == BFloat(16); }

    // Runs the case on q and on the cache k, v (float32 values, exact in the cache's type).
    Buffer<float> run(const DecodeCase &t, const Buffer<float> &q, const Buffer<float> &k,
                      const Buffer<float> &v, const Buffer<int> &items,
                      const Buffer<int> &lengths) {
        q_.set(q);
        if (bfloat16_cache()) {
            k_.set(as_bfloat16(k));
            v_.set(as_bfloat16(v));
        } else {
            k_.set(k);
            v_.set(v);
        }
        items_.set(items);
        lengths_.set(lengths);
        dv_.set(t.dv);
        group_.set(t.group);
        scale_.set(1.0f / std::sqrt(float(t.dk)));
        causal_.set(t.causal);
        key_limit_.set(*std::max_element(t.lengths.begin(), t.lengths.end()));
        const int heads = t.group * t.kv_heads, batch = int(t.items.size());
        Buffer<float> out(t.dv, t.q_len, heads, batch);
        out_.realize(out, target_);
        out.copy_to_host();
        return out;
    }

  private:
    DecodePipeline(const Target &target, const Type &cache_element)
        : q_(Float(32), 4, "q"),
          k_(cache_element, 5, "k_cache"),
          v_(cache_element, 5, "v_cache"),
          items_(Int(32), 1, "items"),
          lengths_(Int(32), 1, "lengths"),
          target_(target) {}

    attngen::DecodeInputs inputs() const {
        const attngen::CacheViews cache = attngen::define_cache_views(
            k_, v_, v_.dim(2).extent(), [](const Expr &x) { return cast<float>(x); });
        attngen::DecodeInputs in;
        in.q = q_;
        in.k_cache = cache.keys;
        in.v_cache = cache.values;
        in.items = items_;
        in.lengths = lengths_;
        in.dk = q_.dim(0).extent();
        in.dv = dv_;
        in.q_len = q_.dim(1).extent();
        in.group = group_;
        in.scale = scale_;
        in.causal = causal_;
        in.key_limit = max(key_limit_, 1);
        in.max_len = v_.dim(1).extent();
        in.max_items = v_.dim(4).extent();
        return in;
    }

    void compile(Func out) {
        out_ = out;
        out_.compute_root();
        out_.compile_jit(target_);
    }

    static Buffer<bfloat16_t> as_bfloat16(const Buffer<float> &f) {
        std::vector<int> sizes;
        for (int d = 0; d < f.dimensions(); ++d) sizes.push_back(f.dim(d).extent());
        Buffer<bfloat16_t> h(sizes);
        h.for_each_element([&](const int *p) { h(p) = bfloat16_t(f(p)); });
        return h;
    }

    ImageParam q_, k_, v_, items_, lengths_;
    Param<int> dv_{"dv"}, group_{"group"}, causal_{"causal"}, key_limit_{"key_limit"};
    Param<float> scale_{"scale"};
    Func out_;
    Target target_;
};

// Queries, keys and values uniform in [-1, 1] (keys scaled up so that softmax is far from
// uniform), the cache's rounded to its type; the cache's padding past max_len and past the
// value head huge (finite, as the cache's contract allows): a kernel that lets either reach an
// output fails.
void check_case(DecodePipeline &pipeline, const DecodeCase &t, std::mt19937 &rng) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    const auto cached = [&](float x) {
        return pipeline.bfloat16_cache() ? float(bfloat16_t(x)) : x;
    };
    const int heads = t.group * t.kv_heads, batch = int(t.items.size());
    const int blocks = (t.max_len + kCacheKeyBlock - 1) / kCacheKeyBlock;
    const int panels = (t.dv + kCacheValuePanel - 1) / kCacheValuePanel;
    Buffer<float> q(t.dk, t.q_len, heads, batch);
    Buffer<float> k(kCacheKeyBlock, t.dk, blocks, t.kv_heads, t.cache_items);
    Buffer<float> v(kCacheValuePanel, t.max_len, panels, t.kv_heads, t.cache_items);
    q.for_each_value([&](float &x) { x = uniform(rng); });
    const float huge = 1e30f;
    k.for_each_element([&](const int *p) {
        k(p) = cached(p[0] + kCacheKeyBlock * p[2] < t.max_len ? 3.0f * uniform(rng) : huge);
    });
    v.for_each_element([&](const int *p) {
        v(p) = cached(p[0] + kCacheValuePanel * p[2] < t.dv ? uniform(rng) : huge);
    });
    Buffer<int> items(batch), lengths(batch);
    for (int b = 0; b < batch; ++b) items(b) = t.items[b], lengths(b) = t.lengths[b];
    // Written on the host after allocation: Halide copies them to the device only if told.
    for (Buffer<float> *f : {&q, &k, &v}) f->set_host_dirty();
    for (Buffer<int> *i : {&items, &lengths}) i->set_host_dirty();
    const Buffer<float> got = pipeline.run(t, q, k, v, items, lengths);

    const double scale = 1.0 / std::sqrt(double(t.dk));
    for (int b = 0; b < batch; ++b) {
        const int item = t.items[b], n = t.lengths[b];
        for (int h = 0; h < heads; ++h) {
            const int hk = h / t.group;
            for (int i = 0; i < t.q_len; ++i) {
                const int last = t.causal ? n - t.q_len + i : n - 1;
                std::vector<double> logits;
                for (int j = 0; j <= last && j < n; ++j) {
                    double dot = 0;
                    for (int d = 0; d < t.dk; ++d) {
                        dot += double(q(d, i, h, b)) *
                               k(j % kCacheKeyBlock, d, j / kCacheKeyBlock, hk, item);
                    }
                    logits.push_back(dot * scale);
                }
                const double top =
                    logits.empty() ? 0.0 : *std::max_element(logits.begin(), logits.end());
                double sum = 0;
                for (double &l : logits) sum += (l = std::exp(l - top));
                for (int cv = 0; cv < t.dv; ++cv) {
                    double want = 0;
                    for (size_t j = 0; j < logits.size(); ++j) {
                        want += logits[j] / sum *
                                v(cv % kCacheValuePanel, int(j), cv / kCacheValuePanel, hk, item);
                    }
                    ASSERT_NEAR(got(cv, i, h, b), want, 2e-5)
                        << t.name() << ": batch row " << b << " head " << h << " query " << i
                        << " feature " << cv;
                }
            }
        }
    }
}

class GpuDecodeStage : public ::testing::TestWithParam<DecodeKnobs> {};

TEST_P(GpuDecodeStage, MatchesTheReferenceAtBlockAndTileEdges) {
    if (!attngen_test::has_opencl_device()) GTEST_SKIP() << "no OpenCL device";
    DecodePipeline pipeline(GetParam());
    std::mt19937 rng(20261204);
    const std::vector<DecodeCase> cases = {
        // llama3's heads: a group of 4 fills a block of rows; one split, then 3 with a short
        // last one, one item empty.
        {128, 128, 4, 2, 1, 300, 2, {1, 0, 2}, {100, 300, 0}, 3},
        // Odd head sizes (the score loop's unrolled tail, the value vectors past the head), a
        // group of 5 at 2 queries, causal (10 rows: 3 blocks of rows, 2 past the last).
        {37, 33, 5, 1, 2, 130, 2, {0, 1}, {130, 61}, 2},
        // One query head per key/value head (gpt2), value heads wider than a block's columns.
        {64, 160, 1, 3, 1, 257, 0, {0}, {257}, 1},
        // A cache of one position and 3 causal queries: the first two see nothing.
        {16, 8, 2, 1, 3, 1, 2, {0, 0}, {1, 1}, 1},
        // Wide heads: the values' sums in two whole chunks of 128 features and a part one.
        {512, 300, 2, 1, 1, 200, 0, {0}, {200}, 1},
    };
    for (const DecodeCase &t : cases) {
        SCOPED_TRACE(t.name());
        check_case(pipeline, t, rng);
        if (HasFatalFailure()) return;
    }
}

// The default split (128, one pass of a block's 128 threads), one shorter, and two longer: 160
// (a pass and a quarter) and 256 (two passes, the knob's largest).
INSTANTIATE_TEST_SUITE_P(Knobs, GpuDecodeStage,
                         ::testing::Values(DecodeKnobs{1, 128}, DecodeKnobs{1, 256},
                                           DecodeKnobs{4, 32}, DecodeKnobs{4, 128},
                                           DecodeKnobs{4, 160}, DecodeKnobs{4, 256}),
                         [](const ::testing::TestParamInfo<DecodeKnobs> &p) {
                             return "rows_per_thread_" + std::to_string(p.param.rows_per_thread) +
                                    "_split_" + std::to_string(p.param.split_keys);
                         });

// Knob settings drawn from the tuner's values (knob_draws.h), each compiled for the CPU targets
// in turn over a float32 or a bfloat16 cache: every one matches float64 on drawn calls (grouped
// heads, several queries, causal or not, items of several lengths and empty ones, caches from 1
// to 2100 positions).
TEST(TunerKnobs, CpuDecodeKernelsMatchTheReference) {
    attngen_test::KnobDraws draw(4);
    std::mt19937 rng(20261206);
    attngen_test::for_each_drawn_cpu_setting(draw, [&](const Target &t,
                                                       const attngen::CpuScheduleKnobs &knobs) {
        const Type cache_element = draw.pick({0, 1}) ? BFloat(16) : Float(32);
        SCOPED_TRACE(cache_element == BFloat(16) ? "bfloat16 cache" : "float32 cache");
        DecodePipeline pipeline(t, knobs, cache_element);
        for (int c = 0; c < 6; ++c) {
            DecodeCase d;
            d.dk = draw.pick({1, 8, 37, 64, 128, 130});
            d.dv = draw.pick({0, 1}) ? d.dk : draw.pick({1, 8, 33, 64, 160});
            d.group = draw.pick({1, 2, 4, 5});
            d.kv_heads = draw.pick({1, 2, 3});
            d.q_len = draw.pick({1, 1, 2, 3, 7});
            d.max_len = draw.pick({1, 17, 130, 257, 700, 2100});
            d.causal = draw.pick({ATTNGEN_CAUSAL_NONE, ATTNGEN_CAUSAL_BOTTOM_RIGHT});
            d.cache_items = draw.pick({1, 2, 3});
            for (int b = draw.pick({1, 2, 3}); b > 0; --b) {
                d.items.push_back(draw.pick({0, 1, 2}) % d.cache_items);
                d.lengths.push_back(draw.pick({0, 1, 2, 3}) == 0 ? 0 : 1 + int(rng() % d.max_len));
            }
            SCOPED_TRACE(d.name());
            check_case(pipeline, d, rng);
            if (HasFatalFailure()) return;
        }
    });
}

}  // namespace
