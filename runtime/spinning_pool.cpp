#include "spinning_pool.h"

#include <attngen/attngen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace attngen::rt {
namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker polls for the next loop before it sleeps. The gaps between a call's
// loops are 1-35 us (attngen_parallel_timeline); waking a sleeping worker cost 40-70 us.
// ATTNGEN_POOL_SPIN_US overrides it (0: sleep at once), up to a second.
constexpr int64_t kDefaultIdleSpinMicroseconds = 200;
constexpr int64_t kMaxIdleSpinMicroseconds = 1000000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

Clock::duration idle_spin() {
    static const Clock::duration spin = [] {
        int64_t us = kDefaultIdleSpinMicroseconds;
        if (const char *env = std::getenv("ATTNGEN_POOL_SPIN_US")) {
            char *end = nullptr;
            const long long parsed = std::strtoll(env, &end, 10);
            if (end != env && *end == '\0' && parsed >= 0) {
                us = std::min<long long>(parsed, kMaxIdleSpinMicroseconds);
            }
        }
        return std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(us));
    }();
    return spin;
}

// Set on the pool's workers for good, and on a submitting thread while it runs tasks: a loop
// started there runs serially instead of waiting for workers that may be its own caller.
thread_local bool inside_task = false;

// Apart, so that claiming a task does not take the line that the others' counters are on
// (128 bytes: Intel's L2 prefetches lines in pairs).
constexpr size_t kApart = 128;

struct Loop {
    halide_task_t f;
    void *user_context;
    uint8_t *closure;
    int min, size;
    // Workers with an index below this take part; the rest leave it to the others.
    int workers;
    alignas(kApart) std::atomic<int> next{0};
    alignas(kApart) std::atomic<int> finished{0};
    std::atomic<int> error{0};

    // Claims and runs tasks until none are left, then counts them finished, once per thread.
    // After a failure the remaining tasks are claimed and counted but not run.
    void run_tasks() {
        int done = 0;
        for (;;) {
            const int i = next.fetch_add(1);
            if (i >= size) break;
            if (error.load(std::memory_order_relaxed) == 0) {
                const int result = f(user_context, min + i, closure);
                if (result != 0) {
                    int none = 0;
                    error.compare_exchange_strong(none, result);
                }
            }
            done++;
        }
        if (done > 0) finished.fetch_add(done, std::memory_order_release);
    }
};

class Pool {
  public:
    int run(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
        const int threads = attngen_get_num_threads();
        if (size <= 1 || threads <= 1 || inside_task)
            return serial(user_context, f, min, size, closure);
        std::unique_lock<std::mutex> submitting(submit_mutex_, std::try_to_lock);
        if (!submitting.owns_lock()) return serial(user_context, f, min, size, closure);

        Loop loop{f, user_context, closure, min, size, std::min(threads, size) - 1};
        // A new worker waits for the epoch after this one, which is the loop below: epoch_
        // changes only under submit_mutex_.
        for (const uint64_t now = epoch_.load(); workers_ < loop.workers; workers_++) {
            std::thread([this, index = workers_, now] { work(index, now); }).detach();
        }
        current_.store(&loop);
        epoch_.fetch_add(1);
        if (sleeping_.load() > 0) {
            std::lock_guard<std::mutex> lock(sleep_mutex_);
            wake_.notify_all();
        }

        inside_task = true;
        loop.run_tasks();
        inside_task = false;
        wait_until([&] { return loop.finished.load(std::memory_order_acquire) == size; });
        // No worker may still hold &loop when this returns: a worker counts itself in
        // `visiting_` before it reads current_, so once current_ is cleared and the count is
        // zero, none has it or can get it.
        current_.store(nullptr);
        wait_until([&] { return visiting_.load() == 0; });
        return loop.error.load();
    }

  private:
    static int serial(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
        for (int i = min; i < min + size; i++) {
            if (const int result = f(user_context, i, closure)) return result;
        }
        return 0;
    }

    // Polls `done` for idle_spin(), then yields the core between polls: the tasks left may be
    // long, and on a machine with more busy threads than cores a worker may wait for this one.
    template <typename Done>
    static void wait_until(const Done &done) {
        const Clock::time_point yield_after = Clock::now() + idle_spin();
        for (int polls = 0; !done(); polls++) {
            if ((polls & 63) == 63 && Clock::now() >= yield_after) {
                std::this_thread::yield();
            } else {
                cpu_relax();
            }
        }
    }

    void work(int index, uint64_t seen) {
        inside_task = true;
        for (;;) {
            seen = wait_for_loop(seen);
            visiting_.fetch_add(1);
            Loop *loop = current_.load();
            if (loop != nullptr && index < loop->workers) loop->run_tasks();
            visiting_.fetch_sub(1);
        }
    }

    // Polls for an epoch after `seen` for idle_spin(), then sleeps until one comes.
    uint64_t wait_for_loop(uint64_t seen) {
        const Clock::time_point give_up = Clock::now() + idle_spin();
        for (int polls = 0;; polls++) {
            const uint64_t epoch = epoch_.load();
            if (epoch != seen) return epoch;
            if ((polls & 63) == 63 && Clock::now() >= give_up) break;
            cpu_relax();
        }
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleeping_.fetch_add(1);
        wake_.wait(lock, [&] { return epoch_.load() != seen; });
        sleeping_.fetch_sub(1);
        return epoch_.load();
    }

    // One loop at a time holds the workers.
    std::mutex submit_mutex_;
    // Workers started (detached), indices 0..workers_-1; guarded by submit_mutex_.
    int workers_ = 0;
    std::atomic<Loop *> current_{nullptr};
    // Bumped for every loop started. Sequentially consistent, as are sleeping_ and visiting_:
    // a worker that counted itself asleep before it last read the epoch is seen by a submitter
    // that bumps the epoch afterwards, which then wakes it under sleep_mutex_.
    // On a line of its own, which the idle workers poll.
    alignas(kApart) std::atomic<uint64_t> epoch_{0};
    alignas(kApart) std::atomic<int> sleeping_{0};
    std::atomic<int> visiting_{0};
    alignas(kApart) std::mutex sleep_mutex_;
    std::condition_variable wake_;
};

// Never destroyed: its workers are detached and live as long as the process, as Halide's own
// do, so that a kernel called from another static object's destructor still finds the pool.
Pool &pool() {
    static Pool *const instance = new Pool;
    return *instance;
}

}  // namespace

int spinning_do_par_for(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
    return pool().run(user_context, f, min, size, closure);
}

void install_spinning_pool() {
    const halide_do_par_for_t previous = halide_set_custom_do_par_for(spinning_do_par_for);
    if (previous != halide_default_do_par_for && previous != spinning_do_par_for) {
        halide_set_custom_do_par_for(previous);
    }
}

}  // namespace attngen::rt
