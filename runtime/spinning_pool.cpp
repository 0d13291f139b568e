#include "spinning_pool.h"

#include <attngen/attngen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace attngen::rt {
namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker polls for the next loop, and a caller for its loop's last tasks,
// before it sleeps. The gaps between a call's loops are 1-35 us (attngen_parallel_timeline);
// waking a sleeping worker cost 40-70 us.
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

// The calling thread is one of the kMaxPoolThreads.
constexpr int kMaxWorkers = kMaxPoolThreads - 1;

// One participant's share of a loop's tasks, [next, end) still to claim.
struct alignas(kApart) TaskRange {
    std::atomic<int> next{0};
    int end = 0;
};

struct Loop {
    halide_task_t f;
    void *user_context;
    uint8_t *closure;
    int min, size;
    // Workers with an index below this take part; the rest leave it to the others.
    int workers;
    // Participant p (the calling thread is participant 0, worker w participant w + 1) first claims
    // the tasks of its own contiguous share of the loop, then those left in the others' shares.
    // Consecutive loops over the same rows or heads then give each thread the part of the data it
    // wrote in the last one, which is still in its own caches. Claimed one by one from a single
    // counter, the threads took tasks alternately, and half of what each read came from the other
    // core: at the tutorial shape (256 heads of 20 keys) the keys' transposing copy and the
    // probabilities waited on such loads (perf: 14% of the probabilities' samples on one load
    // of the transposed keys). The shares are the pool's (Pool::shares_), which one loop at a
    // time holds: workers + 1 of them.
    TaskRange *shares;
    alignas(kApart) std::atomic<int> finished{0};
    std::atomic<int> error{0};
    // Set by the submitting thread before it sleeps until the tasks are finished.
    std::atomic<bool> owner_asleep{false};

    // Splits the tasks into one share per participant, before the loop is published (which
    // orders these stores before any worker's claim).
    void share_tasks() {
        const int participants = workers + 1;
        for (int p = 0; p < participants; p++) {
            shares[p].next.store(int(int64_t(size) * p / participants), std::memory_order_relaxed);
            shares[p].end = int(int64_t(size) * (p + 1) / participants);
        }
    }

    // Claims and runs tasks until none are left, its own share first, then counts them
    // finished, once per thread. After a failure the remaining tasks are claimed and counted
    // but not run. True when this thread's count finished the loop.
    bool run_tasks(int participant) {
        const int participants = workers + 1;
        int done = 0;
        for (int k = 0; k < participants; k++) {
            TaskRange &share = shares[(participant + k) % participants];
            // An empty share is passed by with a read, not a claim, which would write to a line
            // that the other threads are reading. (A thread that runs out takes the others'
            // next tasks from the front, where their owners claim too; taking them from the
            // back would leave the owners' runs whole, but needs a compare-and-swap of both
            // ends.)
            if (share.next.load(std::memory_order_relaxed) >= share.end) continue;
            for (;;) {
                const int i = share.next.fetch_add(1);
                if (i >= share.end) break;
                if (error.load(std::memory_order_relaxed) == 0) {
                    // Through Halide's halide_do_task, so that an application's do_task hook
                    // (halide_set_custom_do_task) still sees every task.
                    const int result = halide_do_task(user_context, f, min + i, closure);
                    if (result != 0) {
                        int none = 0;
                        error.compare_exchange_strong(none, result);
                    }
                }
                done++;
            }
        }
        return done > 0 && finished.fetch_add(done) + done == size;
    }
};

// Polls `done` for idle_spin() (polls: an unsigned count, which may wrap), and returns whether
// it came true meanwhile.
template <typename Done>
bool spin_until(const Done &done) {
    const Clock::time_point give_up = Clock::now() + idle_spin();
    for (uint32_t polls = 0;; polls++) {
        if (done()) return true;
        if ((polls & 63) == 63 && Clock::now() >= give_up) return false;
        cpu_relax();
    }
}

class Pool {
  public:
    int run(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
        // Halide's count is the one attngen_set_num_threads sets; 0 until the default is
        // first resolved.
        int threads = halide_get_num_threads();
        if (threads <= 0) threads = attngen_get_num_threads();
        if (size <= 1 || threads <= 1 || inside_task) {
            return serial(user_context, f, min, size, closure);
        }
        std::unique_lock<std::mutex> submitting(submit_mutex_, std::try_to_lock);
        if (!submitting.owns_lock()) return serial(user_context, f, min, size, closure);

        Loop loop{f,      user_context, closure,
                  min,    size,         start_workers(std::min(threads, size) - 1),
                  shares_};
        loop.share_tasks();
        current_.store(&loop);
        wanted_.store(loop.workers);
        epoch_.fetch_add(1);
        // Only the wanted workers that sleep: each on its own condition variable, so that
        // the others sleep on.
        for (int i = 0; i < loop.workers; i++) {
            if (slots_[i].asleep.load()) {
                std::lock_guard<std::mutex> lock(sleep_mutex_);
                slots_[i].wake.notify_one();
            }
        }

        inside_task = true;
        const bool finished_here = loop.run_tasks(0);
        inside_task = false;
        const auto all_finished = [&] { return loop.finished.load() == size; };
        if (!finished_here && !spin_until(all_finished)) {
            // The tasks left may be long: sleep, and the worker that finishes the last one
            // wakes this thread (see work()).
            loop.owner_asleep.store(true);
            std::unique_lock<std::mutex> lock(sleep_mutex_);
            finished_.wait(lock, all_finished);
        }
        // No worker may still hold &loop when this returns: a worker counts itself in
        // `visiting_` before it reads current_, so once current_ is cleared and the count is
        // zero, none has it or can get it. The workers still counted have no task left to run.
        current_.store(nullptr);
        while (!spin_until([&] { return visiting_.load() == 0; })) std::this_thread::yield();
        return loop.error.load();
    }

    // After fork(), in the child: none of the workers exist there, and a loop the parent was
    // running at the time never ends there. The child starts over with a new pool.
    static void start_over_in_child() {
        retired_ = instance_;  // kept reachable, for leak checkers
        instance_ = new Pool;
    }

    static Pool &instance() {
        static std::once_flag once;
        std::call_once(once, [] {
            instance_ = new Pool;
#if defined(__unix__) || defined(__APPLE__)
            pthread_atfork(nullptr, nullptr, start_over_in_child);
#endif
        });
        return *instance_;
    }

  private:
    static int serial(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
        for (int i = min; i < min + size; i++) {
            if (const int result = halide_do_task(user_context, f, i, closure)) return result;
        }
        return 0;
    }

    // Starts workers up to `wanted` (under submit_mutex_) and returns how many there are, fewer
    // where the system refused a thread: the calling thread runs whatever tasks they leave.
    int start_workers(int wanted) {
        // A new worker waits for the epoch after this one, which is the loop about to start:
        // epoch_ changes only under submit_mutex_.
        const uint64_t now = epoch_.load();
        wanted = std::min(wanted, kMaxWorkers);
        for (; workers_ < wanted && !refused_; workers_++) {
            try {
                std::thread([this, index = workers_, now] { work(index, now); }).detach();
            } catch (...) {
                // Not asked again: each try would cost every later loop a failed
                // pthread_create and an exception.
                refused_ = true;
                break;
            }
        }
        return std::min(wanted, workers_);
    }

    void work(int index, uint64_t seen) {
        inside_task = true;
        for (;;) {
            seen = wait_for_loop(index, seen);
            visiting_.fetch_add(1);
            Loop *loop = current_.load();
            if (loop != nullptr && index < loop->workers && loop->run_tasks(index + 1) &&
                loop->owner_asleep.load()) {
                std::lock_guard<std::mutex> lock(sleep_mutex_);
                finished_.notify_all();
            }
            visiting_.fetch_sub(1);
        }
    }

    // Returns an epoch after `seen`: polled for idle_spin() by a worker the last loop wanted,
    // else slept for until a loop wants this worker.
    uint64_t wait_for_loop(int index, uint64_t seen) {
        const auto wanted = [&] { return index < wanted_.load(); };
        uint64_t epoch = seen;
        if (wanted() && spin_until([&] { return (epoch = epoch_.load()) != seen; })) return epoch;
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        slots_[index].asleep.store(true);
        slots_[index].wake.wait(lock, [&] { return epoch_.load() != seen && wanted(); });
        slots_[index].asleep.store(false);
        return epoch_.load();
    }

    static Pool *instance_;
    static Pool *retired_;

    // One loop at a time holds the workers.
    std::mutex submit_mutex_;
    // Workers started (detached), indices 0..workers_-1; guarded by submit_mutex_.
    int workers_ = 0;
    std::atomic<Loop *> current_{nullptr};
    // Bumped for every loop started, after wanted_ (the loop's workers) is stored. Sequentially
    // consistent, as are the other atomics here (see slots_). On a line of its own, which the
    // idle workers poll.
    alignas(kApart) std::atomic<uint64_t> epoch_{0};
    alignas(kApart) std::atomic<int> wanted_{0};
    std::atomic<int> visiting_{0};
    alignas(kApart) std::mutex sleep_mutex_;
    // The submitting thread waits on finished_ for its tasks.
    std::condition_variable finished_;
    // Worker i sleeps on slots_[i].wake for a loop that wants it. asleep is set under
    // sleep_mutex_ before the worker last reads the epoch: a submitter that bumps the epoch
    // afterwards sees it and wakes the worker under that mutex.
    struct Slot {
        std::atomic<bool> asleep{false};
        std::condition_variable wake;
    };
    Slot slots_[kMaxWorkers];
    // The running loop's shares of tasks (Loop::shares), one per participant; here rather than
    // in the Loop on the caller's stack, where 32 KiB of them were cleared for every loop.
    TaskRange shares_[kMaxPoolThreads];
    // Set when the system refused a thread (under submit_mutex_).
    bool refused_ = false;
};

// Never destroyed: its workers are detached and live as long as the process, as Halide's own
// do, so that a kernel called from another static object's destructor still finds the pool.
Pool *Pool::instance_ = nullptr;
Pool *Pool::retired_ = nullptr;

}  // namespace

int spinning_do_par_for(void *user_context, halide_task_t f, int min, int size, uint8_t *closure) {
    return Pool::instance().run(user_context, f, min, size, closure);
}

void install_spinning_pool() {
    const halide_do_par_for_t previous = halide_set_custom_do_par_for(spinning_do_par_for);
    if (previous != halide_default_do_par_for && previous != spinning_do_par_for) {
        halide_set_custom_do_par_for(previous);
    }
}

}  // namespace attngen::rt
