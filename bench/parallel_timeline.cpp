// attngen_parallel_timeline: where a call's time goes, parallel loop by parallel loop. It runs
// the decoding step of decode_step.h for a named decode shape, or the MHA forward of
// mha_forward_call.h for a named MHA shape, with the halide_do_par_for hook (attngen's pool,
// runtime/spinning_pool.h) wrapped to record when each parallel loop starts and ends, and
// prints, per loop in the order a call runs them, its task count, the medians of its time and
// of the gap before it, and its task function's name (the Func and loop Halide named it after).
// The gaps are the call's serial work (sums of split reductions, the runtime's checks and
// copies) and the threads' wake-ups.
//
//     build/bench/attngen_parallel_timeline gpt2-decode [calls] [bf16]
//     build/bench/attngen_parallel_timeline bert-512 [calls] [bf16]
#include <HalideRuntime.h>
#include <attngen/attngen.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "named_call.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Loop {
    Clock::time_point start, end;
    int tasks;
    int index;  // in the order the loops started
    halide_task_t f;
};

// One task as a thread ran it: the last loop started when it began (its index in the order of
// starting; the task's own loop, or one that a task of it started meanwhile), its function, on
// the calling thread or a worker, and when.
struct Task {
    int loop;
    halide_task_t f;
    bool caller;
    Clock::time_point start, end;
};

std::vector<Loop> loops;
std::atomic<int> loops_started{0};
std::thread::id caller_thread;
// Each thread's tasks in a list of its own, so that recording one takes no lock that the other
// threads wait on (a shared list under a mutex made a GPT-2 step 1.4x longer); the lists live as
// long as the process, as the pool's workers do, and are read after the calls.
std::mutex lists_mutex;
std::vector<std::vector<Task> *> task_lists;
halide_do_task_t pool_do_task = nullptr;

std::vector<Task> &this_threads_tasks() {
    thread_local std::vector<Task> *list = [] {
        auto *made = new std::vector<Task>;
        made->reserve(1 << 16);
        const std::lock_guard<std::mutex> lock(lists_mutex);
        task_lists.push_back(made);
        return made;
    }();
    return *list;
}

int timed_do_task(void *user_context, halide_task_t f, int idx, uint8_t *closure) {
    std::vector<Task> &list = this_threads_tasks();
    const int loop = loops_started.load() - 1;
    const Clock::time_point start = Clock::now();
    const int result = pool_do_task(user_context, f, idx, closure);
    list.push_back({loop, f, std::this_thread::get_id() == caller_thread, start, Clock::now()});
    return result;
}

// A task that starts a parallel loop of its own records it from a worker thread.
std::mutex loops_mutex;
// The hook in place before ours: attngen's pool (runtime/spinning_pool.h) unless the
// application replaced it.
halide_do_par_for_t pool_do_par_for = halide_default_do_par_for;

int timed_do_par_for(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
    const int index = loops_started.fetch_add(1);
    const Clock::time_point start = Clock::now();
    const int result = pool_do_par_for(user_context, f, min, size, closure);
    const Clock::time_point end = Clock::now();
    const std::lock_guard<std::mutex> lock(loops_mutex);
    loops.push_back({start, end, size, index, f});
    return result;
}

double us(Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
}

double median(std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

// A task function's name from the Func and loop on: Halide names it <kernel>_par_for_<Func>_<loop>
// (the executable exports it: CMake's ENABLE_EXPORTS). The runtime's own loops on the pool
// (parallel_chunks: the scan of the inputs for non-finite values, the copy of a staged output)
// have no exported name.
std::string loop_name(halide_task_t f) {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(f), &info) == 0 || info.dli_sname == nullptr) {
        return "(unexported: the runtime's parallel_chunks)";
    }
    const std::string name = info.dli_sname, marker = "_par_for_";
    const size_t at = name.find(marker);
    return at == std::string::npos ? name : name.substr(at + marker.size());
}

std::vector<Task> all_tasks() {
    const std::lock_guard<std::mutex> lock(lists_mutex);
    std::vector<Task> all;
    for (const std::vector<Task> *list : task_lists)
        all.insert(all.end(), list->begin(), list->end());
    return all;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <decode or MHA shape> [calls] [bf16] [tasks] [threads=N]\n",
                     argv[0]);
        return 2;
    }
    const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 2000;
    bool bf16 = false, trace_tasks = false;
    for (int i = 3; i < argc; ++i) {
        bf16 = bf16 || std::strcmp(argv[i], "bf16") == 0;
        trace_tasks = trace_tasks || std::strcmp(argv[i], "tasks") == 0;
        if (std::strncmp(argv[i], "threads=", 8) == 0 &&
            attngen_set_num_threads(std::atoi(argv[i] + 8)) != ATTNGEN_OK) {
            std::fprintf(stderr, "%s: %s\n", argv[i], attngen_last_error());
            return 2;
        }
    }
    std::string error;
    const std::function<attngen_status()> step = attngen_bench::named_call(
        argv[1], bf16 ? ATTNGEN_PRECISION_BF16 : ATTNGEN_PRECISION_F32, error);
    if (!step) {
        std::fprintf(stderr, "set-up failed: %s\n", error.c_str());
        return 1;
    }
    for (int i = 0; i < steps / 10 + 1; ++i) step();  // warm caches and threads
    caller_thread = std::this_thread::get_id();
    pool_do_par_for = halide_set_custom_do_par_for(timed_do_par_for);
    if (trace_tasks) pool_do_task = halide_set_custom_do_task(timed_do_task);
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
    if (trace_tasks) halide_set_custom_do_task(pool_do_task);
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
    // Per loop and kind of thread (0: the calling thread, 1: the workers): the time in its tasks,
    // and the least time from the loop's start to one of them and from one to the loop's end.
    // A kind that ran none of a loop's tasks counts the whole loop as both.
    struct Share {
        double busy = 0.0, first = std::numeric_limits<double>::infinity(), last = first;
    };
    std::vector<Loop> by_index(loops.size());
    for (const Loop &l : loops) by_index[l.index] = l;
    std::vector<std::array<Share, 2>> shares(loops.size());
    for (const Task &t : all_tasks()) {
        // A task that began while a loop started by another task ran belongs to the latest loop
        // before it with its function.
        int loop = t.loop;
        while (loop > 0 && by_index[loop].f != t.f) --loop;
        const Loop &l = by_index[loop];
        Share &s = shares[loop][t.caller ? 0 : 1];
        s.busy += us(t.end - t.start);
        s.first = std::min(s.first, us(t.start - l.start));
        s.last = std::min(s.last, us(l.end - t.end));
    }
    std::printf("%-6s %6s %12s %14s", "loop", "tasks", "median us", "gap before us");
    if (trace_tasks) {
        std::printf(
            "  busy us (caller, workers), first worker task after us, idle at end us "
            "(caller, workers)");
    }
    std::printf("  loop function\n");
    for (size_t k = 0; k < per_step; ++k) {
        std::vector<double> time, gap, busy[2], first, last[2];
        for (int i = 0; i < steps; ++i) {
            const Loop &l = loops[i * per_step + k];
            const double length = us(l.end - l.start);
            time.push_back(length);
            gap.push_back(us(l.start - (k == 0 ? begins[i] : loops[i * per_step + k - 1].end)));
            const std::array<Share, 2> &s = shares[l.index];
            for (int w = 0; w < 2; ++w) {
                busy[w].push_back(s[w].busy);
                last[w].push_back(std::min(s[w].last, length));
            }
            first.push_back(std::min(s[1].first, length));
        }
        std::printf("%-6zu %6d %12.1f %14.1f", k, loops[k].tasks, median(time), median(gap));
        if (trace_tasks) {
            std::printf(" %8.1f %6.1f %8.1f %8.1f %6.1f", median(busy[0]), median(busy[1]),
                        median(first), median(last[0]), median(last[1]));
        }
        std::printf("  %s\n", loop_name(loops[k].f).c_str());
    }
    if (!tail_us.empty()) std::printf("after the last loop: %.1f us\n", median(tail_us));
    return 0;
}
