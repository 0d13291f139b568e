// The problem shapes attngen-autotune times: the named shapes (support/named_shapes.def) and
// custom ones.
#ifndef ATTNGEN_AUTOTUNE_SHAPES_H
#define ATTNGEN_AUTOTUNE_SHAPES_H

#include <string>
#include <vector>

namespace attngen::autotune {

struct Shape {
    std::string name;
    int batch, q_len, kv_len, d_model, heads;
    bool causal;
};

// The non-empty parts of s between separators `by`.
std::vector<std::string> split(const std::string &s, char by);

// "bert-128,tutorial" or "2,64,64,256,4[,causal]" (B,Lq,Lkv,D,H), ';'-separated lists of
// either. Throws std::invalid_argument naming what is wrong.
std::vector<Shape> parse_shapes(const std::string &spec);

}  // namespace attngen::autotune

#endif  // ATTNGEN_AUTOTUNE_SHAPES_H
