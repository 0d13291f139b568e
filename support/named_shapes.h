// The named problem shapes of named_shapes.def as C++ data, for the benchmarks and the
// autotuner.
#ifndef ATTNGEN_SUPPORT_NAMED_SHAPES_H
#define ATTNGEN_SUPPORT_NAMED_SHAPES_H

#include <attngen/attngen.h>

#include <vector>

namespace attngen {

struct NamedShape {
    const char *name;
    int batch, q_len, kv_len, d_model, heads;
    bool causal;   // top-left causal mask
    bool weights;  // benchmarks also ask for the attention probabilities
};

inline const std::vector<NamedShape> &named_shapes() {
#define SHAPE(name, batch, q_len, kv_len, d_model, heads, causal, weights) \
    NamedShape{name, batch, q_len, kv_len, d_model, heads, causal, weights},
#define DECODE_SHAPE(...)
    static const std::vector<NamedShape> shapes = {
#include "named_shapes.def"
    };
#undef SHAPE
#undef DECODE_SHAPE
    return shapes;
}

// A decoding step: q_len new tokens per item against cache_len cached positions.
struct DecodeShape {
    const char *name;
    int batch, q_len, cache_len, d_model, heads, kv_heads, head_dim;
    attngen_rope rope;
    bool bias;
};

inline const std::vector<DecodeShape> &decode_shapes() {
#define SHAPE(...)
#define DECODE_SHAPE(name, batch, q_len, cache_len, d_model, heads, kv_heads, head_dim, rope, \
                     bias)                                                                    \
    DecodeShape{name,  batch,    q_len,    cache_len,           d_model,                      \
                heads, kv_heads, head_dim, ATTNGEN_ROPE_##rope, bias},
    static const std::vector<DecodeShape> shapes = {
#include "named_shapes.def"
    };
#undef SHAPE
#undef DECODE_SHAPE
    return shapes;
}

}  // namespace attngen

#endif  // ATTNGEN_SUPPORT_NAMED_SHAPES_H
