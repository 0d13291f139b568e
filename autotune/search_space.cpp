#include "search_space.h"

#include "schedule_knobs.h"
#include "shapes.h"

#include <random>
#include <set>
#include <stdexcept>

namespace attngen::autotune {
namespace {

bool is_decode_knob(const std::string &name) {
    return name.rfind("decode_", 0) == 0 || name.rfind("gpu_decode_", 0) == 0;
}

// The tuner values of the knobs searched for a CPU or a GPU target, by name: the draws below go
// through the knobs in name order, so a seed gives the same candidates as long as the searched
// knobs stay the same (a knob added changes the draws of those after it).
std::map<std::string, const ScheduleKnob *> knobs_of(bool gpu) {
    std::map<std::string, const ScheduleKnob *> knobs;
    for (const ScheduleKnob &k : schedule_knobs()) {
        if (is_searched_knob(k.name, gpu) && k.gpu == gpu) knobs[k.name] = &k;
    }
    return knobs;
}

}  // namespace

bool is_searched_knob(const std::string &name, bool gpu) {
    // The decode kernels' knobs (decode_*, gpu_decode_*) are not read by the fused forward that
    // the tuner times: drawn at random, an unmeasured value was written to the file
    // (decode_split_keys over its hand-measured 512).
    if (is_decode_knob(name)) return false;
    for (const ScheduleKnob &k : schedule_knobs()) {
        if (k.name == name) return k.gpu == gpu;
    }
    return false;
}

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
    const auto knobs = knobs_of(gpu);
    Candidate c;
    for (const std::string &item : split(text, ',')) {
        const size_t eq = item.find('=');
        const std::string name = item.substr(0, eq);
        if (eq == std::string::npos || knobs.count(name) == 0) {
            throw std::invalid_argument("'" + item + "' is not <knob>=<value> for a " +
                                        std::string(gpu ? "GPU" : "CPU") + " knob the tuner times" +
                                        (is_decode_knob(name)
                                             ? " (decode_ and gpu_decode_ knobs are read by "
                                               "the decode kernels, not by the fused forward)"
                                             : ""));
        }
        size_t used = 0;
        const std::string value = item.substr(eq + 1);
        int v = 0;
        try {
            v = std::stoi(value, &used);
        } catch (const std::exception &) {
            used = 0;  // not a number, or out of int's range: refused below
        }
        if (used != value.size() || v <= 0 || v > knobs.at(name)->max) {
            throw std::invalid_argument("'" + item + "': the value must be an integer from 1 to " +
                                        std::to_string(knobs.at(name)->max));
        }
        c.knobs[name] = v;
    }
    return c;
}

std::vector<Candidate> candidates_in_order(uint32_t seed, size_t random_count,
                                           const std::vector<std::string> &autoschedulers,
                                           bool gpu) {
    const auto knobs = knobs_of(gpu);
    std::vector<Candidate> order;
    order.push_back(Candidate{});
    for (const std::string &a : autoschedulers) order.push_back(Candidate{{}, a});
    std::mt19937 rng(seed);
    std::set<std::string> seen = {"default"};
    // The CPU space has 12441600 points, the GPU one 1296: stop after enough duplicate draws.
    for (size_t tries = 0;
         order.size() < 1 + autoschedulers.size() + random_count && tries < random_count * 20;
         ++tries) {
        Candidate c;
        for (const auto &[name, knob] : knobs) {
            const std::vector<int> &values = knob->tuner_values;
            c.knobs[name] =
                values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
        }
        if (seen.insert(c.key()).second) order.push_back(std::move(c));
    }
    return order;
}

}  // namespace attngen::autotune
