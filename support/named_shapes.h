// The named problem shapes of named_shapes.def as C++ data, for the benchmarks and the
// autotuner.
#ifndef ATTNGEN_SUPPORT_NAMED_SHAPES_H
#define ATTNGEN_SUPPORT_NAMED_SHAPES_H

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
    static const std::vector<NamedShape> shapes = {
#include "named_shapes.def"
    };
#undef SHAPE
    return shapes;
}

}  // namespace attngen

#endif  // ATTNGEN_SUPPORT_NAMED_SHAPES_H
