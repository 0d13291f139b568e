// The schedule knobs are defined once (generators/schedule_knobs.h). CMake reads that file with
// a regular expression (cmake/AttngenTunedParams.cmake) to know which knobs a tuned file may
// set; this checks that it reads exactly the names the compiler sees, in the same order.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "schedule_knobs.h"

namespace {

std::vector<std::string> cmake_knob_names() {
    std::vector<std::string> names;
    std::stringstream list(ATTNGEN_CMAKE_TUNABLE_PARAMS);
    for (std::string name; std::getline(list, name, ',');) names.push_back(name);
    return names;
}

TEST(ScheduleKnobs, CMakeReadsTheSameKnobsAsTheCompiler) {
    std::vector<std::string> compiled;
    for (const attngen::ScheduleKnob &k : attngen::schedule_knobs()) compiled.push_back(k.name);
    EXPECT_EQ(cmake_knob_names(), compiled);
}

TEST(ScheduleKnobs, TunerValuesLieInEachKnobsRange) {
    for (const attngen::ScheduleKnob &k : attngen::schedule_knobs()) {
        EXPECT_FALSE(k.tuner_values.empty()) << k.name;
        EXPECT_FALSE(k.what.empty()) << k.name;
        for (int v : k.tuner_values) {
            EXPECT_GE(v, 1) << k.name;
            EXPECT_LE(v, k.max) << k.name;
        }
    }
}

}  // namespace
