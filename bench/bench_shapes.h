// The named shapes of issue 7's CPU targets and how their FLOPs are counted: 2*B*Lq*D^2 for
// each of the q and output projections, 2*B*Lkv*D^2 for each of k and v, 4*B*Lq*Lkv*D for
// attention (half that with a causal mask). Shared by every benchmark in this directory.
#ifndef ATTNGEN_BENCH_BENCH_SHAPES_H
#define ATTNGEN_BENCH_BENCH_SHAPES_H

#include <random>
#include <vector>

namespace attngen_bench {

struct Shape {
    const char *name;
    int batch, q_len, kv_len, d_model, heads;
    bool causal, weights;
};

// The long ones take seconds per call on 2 cores.
inline const std::vector<Shape> &shapes() {
    static const std::vector<Shape> s = {
        {"tutorial", 32, 10, 20, 512, 8, false, true},
        {"tutorial-cross", 1, 62, 60, 512, 8, false, true},
        {"bert-128", 1, 128, 128, 768, 12, false, false},
        {"bert-512", 1, 512, 512, 768, 12, false, false},
        {"bert-512-b8", 8, 512, 512, 768, 12, false, false},
        {"gpt2-causal", 1, 1024, 1024, 768, 12, true, false},
        {"long-causal", 1, 2048, 2048, 1024, 16, true, false},
        {"long-single", 1, 16384, 16384, 64, 1, false, false},
    };
    return s;
}

inline std::vector<float> random_vector(size_t n, float scale, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    return v;
}

inline double attention_flops(const Shape &s) {
    const double full = 4.0 * s.batch * s.q_len * s.kv_len * s.d_model;
    return s.causal ? full / 2 : full;
}

inline double projection_flops(const Shape &s) {
    const double d2 = double(s.d_model) * s.d_model;
    return 2 * 2.0 * s.batch * s.q_len * d2 + 2 * 2.0 * s.batch * s.kv_len * d2;
}

inline double mha_flops(const Shape &s) {
    return projection_flops(s) + attention_flops(s);
}

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_BENCH_SHAPES_H
