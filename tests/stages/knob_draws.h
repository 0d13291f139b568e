// Settings of the CPU schedule knobs drawn from the autotuner's values (schedule_knobs.h), for
// the stage tests that check kernels a tuning run may build but no shipped kernel is built
// with. Session 76 found one that failed at run time (4-vector score tiles, at heads of 1 to 100
// keys), a setting the tuner may pick and the tuned files do not.
//
// Seeded, so a failure reproduces from its trace. The suite draws a few settings per test;
// ATTNGEN_KNOB_DRAWS widens a run (hundreds of settings take minutes) and ATTNGEN_KNOB_SEED
// picks another sequence:
//
//     ATTNGEN_KNOB_DRAWS=200 ATTNGEN_KNOB_SEED=7 build/tests/attngen_stage_tests
//         --gtest_filter='TunerKnobs.*'
#ifndef ATTNGEN_TESTS_STAGES_KNOB_DRAWS_H
#define ATTNGEN_TESTS_STAGES_KNOB_DRAWS_H

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "Halide.h"
#include "schedule_cpu.h"
#include "schedule_gpu.h"
#include "schedule_knobs.h"

namespace attngen_test {

// Statements over a knob table's rows: a drawn value into `knobs`, a knob's text onto `text`.
#define ATTNGEN_KNOB_DRAW(name, max, values, what) \
    knobs.name = pick(std::vector<int> ATTNGEN_KNOB_VALUES values);
#define ATTNGEN_KNOB_TEXT(name, max, values, what) \
    text += std::string(text.empty() ? "" : " ") + #name "=" + std::to_string(knobs.name);

class KnobDraws {
  public:
    // `stream` separates the tests' sequences drawn from one seed.
    explicit KnobDraws(uint32_t stream)
        : state_(env_or("ATTNGEN_KNOB_SEED", 2026) * 7919u + stream) {}

    // How many settings a test draws: ATTNGEN_KNOB_DRAWS, or the suite's own count.
    static int count(int suite_count) { return int(env_or("ATTNGEN_KNOB_DRAWS", suite_count)); }

    int pick(const std::vector<int> &values) {
        state_ = state_ * 1664525u + 1013904223u;  // Numerical Recipes' LCG: the same everywhere
        return values[(state_ >> 8) % values.size()];
    }

    // Every CPU knob from its tuner values.
    attngen::CpuScheduleKnobs cpu_knobs() {
        attngen::CpuScheduleKnobs knobs;
        ATTNGEN_CPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_DRAW)
        return knobs;
    }

    // Every GPU knob from its tuner values.
    attngen::GpuScheduleKnobs gpu_knobs() {
        attngen::GpuScheduleKnobs knobs;
        ATTNGEN_GPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_DRAW)
        return knobs;
    }

    // "name=value ..." as a tuned file's params read, for a failure's trace.
    static std::string describe(const attngen::CpuScheduleKnobs &knobs) {
        std::string text;
        ATTNGEN_CPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_TEXT)
        return text;
    }
    static std::string describe(const attngen::GpuScheduleKnobs &knobs) {
        std::string text;
        ATTNGEN_GPU_SCHEDULE_KNOBS(ATTNGEN_KNOB_TEXT)
        return text;
    }

  private:
    static uint32_t env_or(const char *name, uint32_t fallback) {
        const char *value = std::getenv(name);
        return value != nullptr ? uint32_t(std::strtoul(value, nullptr, 10)) : fallback;
    }

    uint32_t state_;
};

#undef ATTNGEN_KNOB_DRAW
#undef ATTNGEN_KNOB_TEXT

// The CPU targets of the library's variants that this machine runs: the host and, on x86, the
// baseline, and the AVX2 and SSE4.1 variants where the host has them (16 registers: the knobs
// resolve to other tiles there).
inline std::vector<Halide::Target> variant_targets() {
    using Halide::Target;
    const Target host = Halide::get_host_target();
    std::vector<Target> targets = {host};
    if (host.arch != Target::X86) return targets;
    targets.push_back(Target("x86-64-linux"));
    const bool wider = host.has_feature(Target::AVX512) || host.has_feature(Target::AVX512_Skylake);
    if (wider && host.has_feature(Target::AVX2)) {
        targets.push_back(Target("x86-64-linux-avx-avx2-fma-f16c"));
    }
    if (host.has_feature(Target::AVX2)) targets.push_back(Target("x86-64-linux-sse41"));
    return targets;
}

// The target the GPU kernels of these tests compile for: the host's OpenCL device (PoCL on
// machines without a GPU), and whether the host has one.
inline Halide::Target opencl_target() {
    return Halide::get_host_target().with_feature(Halide::Target::OpenCL);
}
inline bool has_opencl_device() {
    return Halide::host_supports_target_device(opencl_target());
}

// Draws settings for the CPU targets in turn (3 per target in the suite), and calls
// check(target, knobs) for each, under a trace that names them; stops at a fatal failure.
template <typename Check>
void for_each_drawn_cpu_setting(KnobDraws &draw, const Check &check) {
    const std::vector<Halide::Target> targets = variant_targets();
    for (int n = 0; n < KnobDraws::count(3 * int(targets.size())); ++n) {
        const Halide::Target &target = targets[n % targets.size()];
        const attngen::CpuScheduleKnobs knobs = draw.cpu_knobs();
        SCOPED_TRACE(target.to_string() + ": " + KnobDraws::describe(knobs));
        check(target, knobs);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// Draws GPU settings (4 in the suite) and calls check(knobs) with each one resolved, under a
// trace that names it; a setting resolve_gpu_knobs refuses must name a GPU knob, and reaches no
// kernel. Stops at a fatal failure.
template <typename Check>
void for_each_drawn_gpu_setting(KnobDraws &draw, const Check &check) {
    for (int n = 0; n < KnobDraws::count(4); ++n) {
        const attngen::GpuScheduleKnobs drawn = draw.gpu_knobs();
        SCOPED_TRACE(KnobDraws::describe(drawn));
        attngen::GpuScheduleKnobs knobs;
        try {
            knobs = attngen::resolve_gpu_knobs(drawn);
        } catch (const Halide::CompileError &e) {
            EXPECT_NE(std::string(e.what()).find("gpu_"), std::string::npos) << e.what();
            continue;
        }
        check(knobs);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_STAGES_KNOB_DRAWS_H
