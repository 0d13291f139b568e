#include "shapes.h"

#include "named_shapes.h"

#include <sstream>
#include <stdexcept>

namespace attngen::autotune {
namespace {

Shape parse_custom(const std::string &spec) {
    const std::vector<std::string> parts = split(spec, ',');
    if (parts.size() != 5 && !(parts.size() == 6 && parts[5] == "causal")) {
        throw std::invalid_argument("shape '" + spec + "': expected B,Lq,Lkv,D,H[,causal]");
    }
    int v[5];
    for (int i = 0; i < 5; ++i) {
        size_t used = 0;
        try {
            v[i] = std::stoi(parts[i], &used);
        } catch (const std::exception &) {
            used = 0;
        }
        if (used != parts[i].size() || v[i] <= 0) {
            throw std::invalid_argument("shape '" + spec + "': '" + parts[i] +
                                        "' is not a positive integer");
        }
    }
    if (v[3] % v[4] != 0) {
        throw std::invalid_argument("shape '" + spec + "': D must be a multiple of H");
    }
    return {spec, v[0], v[1], v[2], v[3], v[4], parts.size() == 6};
}

}  // namespace

std::vector<std::string> split(const std::string &s, char by) {
    std::vector<std::string> parts;
    std::stringstream in(s);
    for (std::string part; std::getline(in, part, by);) {
        if (!part.empty()) parts.push_back(part);
    }
    return parts;
}

std::vector<Shape> parse_shapes(const std::string &spec) {
    std::vector<Shape> shapes;
    for (const std::string &item : split(spec, ';')) {
        if (item.find_first_of("0123456789") == 0) {
            shapes.push_back(parse_custom(item));
            continue;
        }
        for (const std::string &name : split(item, ',')) {
            bool found = false;
            for (const NamedShape &s : named_shapes()) {
                if (s.name == name) {
                    shapes.push_back(
                        {s.name, s.batch, s.q_len, s.kv_len, s.d_model, s.heads, s.causal});
                    found = true;
                }
            }
            if (!found) {
                std::string known;
                for (const NamedShape &s : named_shapes()) known += std::string(" ") + s.name;
                throw std::invalid_argument("unknown shape '" + name + "' (known:" + known + ")");
            }
        }
    }
    if (shapes.empty()) throw std::invalid_argument("no shapes given");
    return shapes;
}

}  // namespace attngen::autotune
