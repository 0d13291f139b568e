// The schedule knobs attngen-autotune searches: the CPU or GPU knobs of
// generators/schedule_knobs.h, plus Halide's autoschedulers as whole-schedule candidates.
#ifndef ATTNGEN_AUTOTUNE_SEARCH_SPACE_H
#define ATTNGEN_AUTOTUNE_SEARCH_SPACE_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attngen::autotune {

// One schedule: knob values (absent = derived from the target), or an autoscheduler.
struct Candidate {
    std::map<std::string, int> knobs;
    std::string autoscheduler;  // "" = attngen's schedule with the knobs

    // Stable text form, used as the log key: "default", "Li2018", "gemm_rows=6,query_block=32".
    std::string key() const;
    // Generator arguments: "name=value" each.
    std::vector<std::string> generator_params() const;
};

// The candidates in search order for a seed: attngen's defaults, then the autoschedulers, then
// distinct random knob settings (the CPU knobs, or for a GPU target the GPU ones). The order
// depends on the seed only.
std::vector<Candidate> candidates_in_order(uint32_t seed, size_t random_count,
                                           const std::vector<std::string> &autoschedulers,
                                           bool gpu);

// Whether the tuner searches the knob for a CPU (gpu false) or a GPU target: the knobs of
// generators/schedule_knobs.h that the fused forward it times reads.
bool is_searched_knob(const std::string &name, bool gpu);

// A candidate written as its key ("gemm_rows=6,query_block=32"), e.g. from --try. Throws
// std::invalid_argument naming an unknown knob or a value outside 1..its max.
Candidate parse_candidate(const std::string &text, bool gpu);

}  // namespace attngen::autotune

#endif  // ATTNGEN_AUTOTUNE_SEARCH_SPACE_H
