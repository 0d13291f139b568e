// attngen_parallel_timeline: where a decoding step's time goes, parallel loop by parallel loop.
// It runs the step of decode_step.h for a named decode shape with Halide's do_par_for wrapped
// to record when each parallel loop starts and ends, and prints, per loop in the order a step
// runs them, its task count and the medians of its time and of the gap before it. The gaps are
// the step's serial work (sums of split reductions, the runtime's checks and copies) and the
// threads' wake-ups; perf names the loops (their task functions).
//
//     build/bench/attngen_parallel_timeline gpt2-decode [steps] [bf16]
#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "decode_step.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Loop {
    Clock::time_point start, end;
    int tasks;
};

std::vector<Loop> loops;

int timed_do_par_for(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
    const Clock::time_point start = Clock::now();
    const int result = halide_default_do_par_for(user_context, f, min, size, closure);
    loops.push_back({start, Clock::now(), size});
    return result;
}

double us(Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
}

double median(std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <decode shape> [steps] [bf16]\n", argv[0]);
        return 2;
    }
    const auto &shapes = attngen::decode_shapes();
    const auto shape = std::find_if(shapes.begin(), shapes.end(), [&](const auto &s) {
        return std::strcmp(s.name, argv[1]) == 0;
    });
    if (shape == shapes.end()) {
        std::fprintf(stderr, "no decode shape named %s\n", argv[1]);
        return 2;
    }
    const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 2000;
    const bool bf16 = argc > 3 && std::strcmp(argv[3], "bf16") == 0;
    attngen_bench::DecodeStepper stepper(
        *shape, bf16 ? ATTNGEN_PRECISION_BF16 : ATTNGEN_PRECISION_F32, ATTNGEN_DEVICE_CPU);
    if (!stepper.error().empty()) {
        std::fprintf(stderr, "set-up failed: %s\n", stepper.error().c_str());
        return 1;
    }
    for (int i = 0; i < steps / 10 + 1; ++i) stepper.step();  // warm caches and threads
    halide_set_custom_do_par_for(timed_do_par_for);
    std::vector<Clock::time_point> begins;
    for (int i = 0; i < steps; ++i) {
        begins.push_back(Clock::now());
        if (stepper.step() != ATTNGEN_OK) {
            std::fprintf(stderr, "step failed: %s\n", attngen_last_error());
            return 1;
        }
    }
    begins.push_back(Clock::now());
    halide_set_custom_do_par_for(halide_default_do_par_for);
    if (loops.size() % steps != 0) {
        std::fprintf(stderr, "%zu parallel loops in %d steps: not the same loops every step\n",
                     loops.size(), steps);
        return 1;
    }
    const size_t per_step = loops.size() / steps;
    std::vector<double> step_us, tail_us;
    for (int i = 0; i < steps; ++i) {
        step_us.push_back(us(begins[i + 1] - begins[i]));
        if (per_step > 0) tail_us.push_back(us(begins[i + 1] - loops[(i + 1) * per_step - 1].end));
    }
    std::printf("%s (%s), %d steps: median step %.1f us, %zu parallel loops per step\n",
                shape->name, bf16 ? "bf16" : "fp32", steps, median(step_us), per_step);
    std::printf("%-6s %6s %12s %14s\n", "loop", "tasks", "median us", "gap before us");
    for (size_t k = 0; k < per_step; ++k) {
        std::vector<double> time, gap;
        for (int i = 0; i < steps; ++i) {
            const Loop &l = loops[i * per_step + k];
            time.push_back(us(l.end - l.start));
            gap.push_back(us(l.start - (k == 0 ? begins[i] : loops[i * per_step + k - 1].end)));
        }
        std::printf("%-6zu %6d %12.1f %14.1f\n", k, loops[k].tasks, median(time), median(gap));
    }
    if (!tail_us.empty()) std::printf("after the last loop: %.1f us\n", median(tail_us));
    return 0;
}
