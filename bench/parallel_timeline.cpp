// attngen_parallel_timeline: where a call's time goes, parallel loop by parallel loop. It runs
// the decoding step of decode_step.h for a named decode shape, or the MHA forward of
// mha_forward_call.h for a named MHA shape, with the halide_do_par_for hook (attngen's pool,
// runtime/spinning_pool.h) wrapped to record when each parallel loop starts and ends, and
// prints, per loop in the order a call runs them, its task count and the medians of its time
// and of the gap before it. The gaps are the call's serial work (sums of split reductions, the
// runtime's checks and copies) and the threads' wake-ups; perf names the loops (their task
// functions).
//
//     build/bench/attngen_parallel_timeline gpt2-decode [calls] [bf16]
//     build/bench/attngen_parallel_timeline bert-512 [calls] [bf16]
#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "named_call.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Loop {
    Clock::time_point start, end;
    int tasks;
};

std::vector<Loop> loops;
// A task that starts a parallel loop of its own records it from a worker thread.
std::mutex loops_mutex;
// The hook in place before ours: attngen's pool (runtime/spinning_pool.h) unless the
// application replaced it.
halide_do_par_for_t pool_do_par_for = halide_default_do_par_for;

int timed_do_par_for(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
    const Clock::time_point start = Clock::now();
    const int result = pool_do_par_for(user_context, f, min, size, closure);
    const Clock::time_point end = Clock::now();
    const std::lock_guard<std::mutex> lock(loops_mutex);
    loops.push_back({start, end, size});
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
        std::fprintf(stderr, "usage: %s <decode or MHA shape> [calls] [bf16]\n", argv[0]);
        return 2;
    }
    const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 2000;
    const bool bf16 = argc > 3 && std::strcmp(argv[3], "bf16") == 0;
    std::string error;
    const std::function<attngen_status()> step = attngen_bench::named_call(
        argv[1], bf16 ? ATTNGEN_PRECISION_BF16 : ATTNGEN_PRECISION_F32, error);
    if (!step) {
        std::fprintf(stderr, "set-up failed: %s\n", error.c_str());
        return 1;
    }
    for (int i = 0; i < steps / 10 + 1; ++i) step();  // warm caches and threads
    pool_do_par_for = halide_set_custom_do_par_for(timed_do_par_for);
    std::vector<Clock::time_point> begins;
    for (int i = 0; i < steps; ++i) {
        begins.push_back(Clock::now());
        if (step() != ATTNGEN_OK) {
            std::fprintf(stderr, "call failed: %s\n", attngen_last_error());
            return 1;
        }
    }
    begins.push_back(Clock::now());
    halide_set_custom_do_par_for(pool_do_par_for);
    if (loops.size() % steps != 0) {
        std::fprintf(stderr, "%zu parallel loops in %d calls: not the same loops every call\n",
                     loops.size(), steps);
        return 1;
    }
    const size_t per_step = loops.size() / steps;
    std::vector<double> step_us, tail_us;
    for (int i = 0; i < steps; ++i) {
        step_us.push_back(us(begins[i + 1] - begins[i]));
        if (per_step > 0) tail_us.push_back(us(begins[i + 1] - loops[(i + 1) * per_step - 1].end));
    }
    std::printf("%s (%s), %d calls: median call %.1f us, %zu parallel loops per call\n", argv[1],
                bf16 ? "bf16" : "fp32", steps, median(step_us), per_step);
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
