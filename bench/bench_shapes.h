// The named shapes and how their FLOPs are counted: 2*B*Lq*D^2 for
// each of the q and output projections, 2*B*Lkv*D^2 for each of k and v, 4*B*Lq*Lkv*D for
// attention (half that with a causal mask). Shared by every benchmark in this directory.
#ifndef ATTNGEN_BENCH_BENCH_SHAPES_H
#define ATTNGEN_BENCH_BENCH_SHAPES_H

#include <random>
#include <vector>

#include "named_shapes.h"

namespace attngen_bench {

// The named shapes of support/named_shapes.def.
using Shape = attngen::NamedShape;

inline const std::vector<Shape> &shapes() {
    return attngen::named_shapes();
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
