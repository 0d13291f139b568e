#include "search_space.h"

#include "shapes.h"

#include <random>
#include <set>
#include <stdexcept>

namespace attngen::autotune {
namespace {

// Values worth trying per knob. Register tiles beyond these spill on every target attngen has
// (16 or 32 vector registers); gemm_vectors times the vector width must divide the weight
// padding (64 floats), which 1, 2 and 4 do for 4-, 8- and 16-float vectors.
const std::map<std::string, std::vector<int>> &cpu_knob_values() {
    static const std::map<std::string, std::vector<int>> values = {
        {"gemm_vectors", {1, 2, 4}},          {"gemm_rows", {2, 4, 6, 8, 12}},
        {"gemm_row_tiles", {1, 2, 4, 8, 16}}, {"query_block", {8, 16, 32, 64, 128}},
        {"score_vectors", {1, 2, 4}},         {"score_rows", {2, 4, 6, 8}},
        {"out_vectors", {1, 2, 4}},           {"out_rows", {2, 4, 6, 8}},
        {"key_block", {64, 128, 256}},        {"long_query_block", {64, 128, 256}},
    };
    return values;
}

// GPU blocks (schedule_gpu.cpp): projection rows a multiple of its 4-row thread tile, query
// blocks and key tiles that keep a block within 1024 threads.
const std::map<std::string, std::vector<int>> &gpu_knob_values() {
    static const std::map<std::string, std::vector<int>> values = {
        {"gpu_gemm_rows", {8, 16, 32, 64}},
        {"gpu_query_block", {4, 8, 16, 32}},
        {"gpu_key_block", {16, 32, 64}},
    };
    return values;
}

}  // namespace

std::string Candidate::key() const {
    if (!autoscheduler.empty()) return autoscheduler;
    if (knobs.empty()) return "default";
    std::string key;
    for (const auto &[name, value] : knobs) {
        if (!key.empty()) key += ",";
        key += name + "=" + std::to_string(value);
    }
    return key;
}

std::vector<std::string> Candidate::generator_params() const {
    std::vector<std::string> params;
    if (!autoscheduler.empty()) {
        params.push_back("autoscheduler=" + autoscheduler);
        return params;
    }
    for (const auto &[name, value] : knobs) params.push_back(name + "=" + std::to_string(value));
    return params;
}

Candidate parse_candidate(const std::string &text, bool gpu) {
    const auto &knob_values = gpu ? gpu_knob_values() : cpu_knob_values();
    Candidate c;
    for (const std::string &item : split(text, ',')) {
        const size_t eq = item.find('=');
        const std::string name = item.substr(0, eq);
        if (eq == std::string::npos || knob_values.count(name) == 0) {
            throw std::invalid_argument("'" + item + "' is not <knob>=<value> for a " +
                                        std::string(gpu ? "GPU" : "CPU") + " knob");
        }
        size_t used = 0;
        const std::string value = item.substr(eq + 1);
        const int v = value.empty() ? 0 : std::stoi(value, &used);
        if (used != value.size() || v <= 0) {
            throw std::invalid_argument("'" + item + "': the value must be a positive integer");
        }
        c.knobs[name] = v;
    }
    return c;
}

std::vector<Candidate> candidates_in_order(uint32_t seed, size_t random_count,
                                           const std::vector<std::string> &autoschedulers,
                                           bool gpu) {
    const auto &knob_values = gpu ? gpu_knob_values() : cpu_knob_values();
    std::vector<Candidate> order;
    order.push_back(Candidate{});
    for (const std::string &a : autoschedulers) order.push_back(Candidate{{}, a});
    std::mt19937 rng(seed);
    std::set<std::string> seen = {"default"};
    // The CPU space has 486000 points, the GPU one 48: stop after enough duplicate draws.
    for (size_t tries = 0;
         order.size() < 1 + autoschedulers.size() + random_count && tries < random_count * 20;
         ++tries) {
        Candidate c;
        for (const auto &[name, values] : knob_values) {
            c.knobs[name] =
                values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
        }
        if (seen.insert(c.key()).second) order.push_back(std::move(c));
    }
    return order;
}

}  // namespace attngen::autotune
