// The pool the kernels' parallel loops run on (runtime/spinning_pool.h): every task once, the
// calling thread and a worker both working (a worker still polling and one woken from sleep),
// each thread running its own contiguous share of a loop first, the caller seeing what long
// tasks on workers wrote, a failed task's code returned with the tasks after it skipped, loops
// nested in tasks and loops from many application threads at once, and the hook in place after
// any entry point unless the application installed its own.
// parallel_chunks (runtime/parallel_chunks.h), whose passes run on that pool, covers each
// element of an array exactly once at each grain.
// tests/CMakeLists.txt runs these again with ATTNGEN_POOL_SPIN_US=0 (every wait a sleep).
#include "parallel_chunks.h"
#include "spinning_pool.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <HalideRuntime.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace attngen_test {
namespace {

using attngen::rt::spinning_do_par_for;

// Sets the pool's size for one test and restores the default after it.
class PoolSize {
  public:
    explicit PoolSize(int32_t n) { EXPECT_EQ(attngen_set_num_threads(n), ATTNGEN_OK); }
    ~PoolSize() { attngen_set_num_threads(0); }
};

struct Counts {
    int min;
    std::unique_ptr<std::atomic<int>[]> runs;
    explicit Counts(int min_, int size) : min(min_), runs(new std::atomic<int>[size]) {
        for (int i = 0; i < size; ++i) runs[i] = 0;
    }
};

int count_task(void *, int index, uint8_t *closure) {
    Counts &c = *reinterpret_cast<Counts *>(closure);
    c.runs[index - c.min].fetch_add(1);
    return 0;
}

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
    for (int threads : {1, 2, 3}) {
        PoolSize pool(threads);
        for (int min : {0, -5, 100}) {
            for (int size : {0, 1, 2, 3, 7, 64, 1000}) {
                Counts counts(min, size);
                ASSERT_EQ(spinning_do_par_for(nullptr, count_task, min, size,
                                              reinterpret_cast<uint8_t *>(&counts)),
                          0);
                for (int i = 0; i < size; ++i) {
                    ASSERT_EQ(counts.runs[i].load(), 1)
                        << "task " << min + i << " of " << size << ", " << threads << " threads";
                }
            }
        }
    }
}

// Tasks that record their thread and wait (up to 10 s) until enough tasks have started, so
// that the pool must run them on several threads at once: one thread alone would time out.
struct Meeting {
    std::atomic<int> started{0};
    std::atomic<bool> timed_out{false};
    std::thread::id ids[4];
};

void meet(Meeting &m, int index, int wait_for) {
    m.ids[index] = std::this_thread::get_id();
    m.started.fetch_add(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (m.started.load() < wait_for) {
        if (std::chrono::steady_clock::now() > give_up) {
            m.timed_out = true;
            break;
        }
        std::this_thread::yield();
    }
}

// Two tasks that each wait until both have started.
int rendezvous_task(void *, int index, uint8_t *closure) {
    meet(*reinterpret_cast<Meeting *>(closure), index, 2);
    return 0;
}

TEST(ThreadPool, TwoThreadsRunTwoTasksAtOnce) {
    PoolSize pool(2);
    // Back to back (the worker still polling), then 5 ms apart: longer than the pool's polling
    // (ATTNGEN_POOL_SPIN_US, 200 us by default), so that the worker sleeps and must be woken.
    for (int pause_ms : {0, 5}) {
        for (int round = 0; round < 20; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
            Meeting r;
            ASSERT_EQ(spinning_do_par_for(nullptr, rendezvous_task, 0, 2,
                                          reinterpret_cast<uint8_t *>(&r)),
                      0);
            ASSERT_FALSE(r.timed_out)
                << "round " << round << ", " << pause_ms << " ms apart: the tasks did not overlap";
            EXPECT_NE(r.ids[0], r.ids[1]);
        }
    }
}

// Four tasks on two threads: the calling thread's share is tasks 0 and 1, the worker's 2 and 3.
// Tasks 0 and 2 wait until two tasks have started, 1 and 3 until all four have. A thread takes
// another's task only once its own share is done, and neither can finish its share before
// every task has started, so each share runs whole on its own thread, however the threads are
// delayed (up to the wait's limit of 10 s).
int share_task(void *, int index, uint8_t *closure) {
    meet(*reinterpret_cast<Meeting *>(closure), index, index % 2 == 0 ? 2 : 4);
    return 0;
}

TEST(ThreadPool, EachThreadRunsItsOwnContiguousShareFirst) {
    PoolSize pool(2);
    Meeting s;
    ASSERT_EQ(spinning_do_par_for(nullptr, share_task, 0, 4, reinterpret_cast<uint8_t *>(&s)), 0);
    ASSERT_FALSE(s.timed_out) << "the two threads' tasks did not overlap: one thread ran them all";
    EXPECT_EQ(s.ids[0], std::this_thread::get_id()) << "the caller's share is the first";
    EXPECT_EQ(s.ids[1], s.ids[0]);
    EXPECT_NE(s.ids[2], s.ids[0]);
    EXPECT_EQ(s.ids[3], s.ids[2]);
}

// Each task writes its slot after a few milliseconds: the calling thread, done with its own
// task first or last, must see every slot written when the loop returns (after polling, and
// then asleep until the worker that finishes last wakes it).
int slow_write_task(void *, int index, uint8_t *closure) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * (index + 1)));
    reinterpret_cast<int *>(closure)[index] = index + 1;
    return 0;
}

TEST(ThreadPool, CallerSeesWhatLongTasksOnWorkersWrote) {
    PoolSize pool(3);
    for (int round = 0; round < 5; ++round) {
        int slots[3] = {0, 0, 0};
        ASSERT_EQ(
            spinning_do_par_for(nullptr, slow_write_task, 0, 3, reinterpret_cast<uint8_t *>(slots)),
            0);
        for (int i = 0; i < 3; ++i) EXPECT_EQ(slots[i], i + 1) << "round " << round;
    }
}

int record_thread_task(void *, int index, uint8_t *closure) {
    reinterpret_cast<std::thread::id *>(closure)[index] = std::this_thread::get_id();
    return 0;
}

TEST(ThreadPool, OneThreadRunsEveryTaskOnTheCaller) {
    PoolSize pool(1);
    std::vector<std::thread::id> ids(50);
    ASSERT_EQ(spinning_do_par_for(nullptr, record_thread_task, 0, 50,
                                  reinterpret_cast<uint8_t *>(ids.data())),
              0);
    for (const std::thread::id &id : ids) EXPECT_EQ(id, std::this_thread::get_id());
}

// Task 0 fails; every other task waits until task 0 is about to return and then takes a
// millisecond, so that the failure is seen while nearly all tasks are unclaimed.
struct Failing {
    std::atomic<int> ran{0};
    std::atomic<bool> failing{false};
};

int failing_task(void *, int index, uint8_t *closure) {
    Failing &f = *reinterpret_cast<Failing *>(closure);
    f.ran.fetch_add(1);
    if (index == 0) {
        f.failing = true;
        return -7;
    }
    while (!f.failing.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
}

TEST(ThreadPool, FailedTaskReturnsItsCodeAndTheTasksNotStartedAreSkipped) {
    for (int threads : {1, 2, 4}) {
        PoolSize pool(threads);
        Failing f;
        EXPECT_EQ(
            spinning_do_par_for(nullptr, failing_task, 0, 1000, reinterpret_cast<uint8_t *>(&f)),
            -7)
            << threads << " threads";
        // Each other thread may have started a task before task 0 failed, and more if that
        // task's thread was descheduled between its return and the failure's record (a
        // millisecond per task): not the 1000.
        EXPECT_LT(f.ran.load(), 500) << threads << " threads";
    }
}

struct Nested {
    std::atomic<int> inner_runs{0};
};

int inner_task(void *, int, uint8_t *closure) {
    reinterpret_cast<Nested *>(closure)->inner_runs.fetch_add(1);
    return 0;
}

int outer_task(void *user_context, int, uint8_t *closure) {
    return halide_do_par_for(user_context, inner_task, 0, 16, closure);
}

TEST(ThreadPool, LoopsStartedInsideTasksComplete) {
    attngen_install_error_handler();
    PoolSize pool(2);
    Nested n;
    ASSERT_EQ(halide_do_par_for(nullptr, outer_task, 0, 8, reinterpret_cast<uint8_t *>(&n)), 0);
    EXPECT_EQ(n.inner_runs.load(), 8 * 16);
}

TEST(ThreadPool, LoopsFromManyApplicationThreadsAtOnce) {
    PoolSize pool(2);
    constexpr int kThreads = 8, kLoops = 200, kTasks = 37;
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int loop = 0; loop < kLoops; ++loop) {
                Counts counts(t, kTasks);
                if (spinning_do_par_for(nullptr, count_task, t, kTasks,
                                        reinterpret_cast<uint8_t *>(&counts)) != 0) {
                    wrong.fetch_add(1);
                }
                for (int i = 0; i < kTasks; ++i) {
                    if (counts.runs[i].load() != 1) wrong.fetch_add(1);
                }
            }
        });
    }
    for (std::thread &th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
}

int application_do_par_for(void *user_context, halide_task_t f, int min, int size,
                           uint8_t *closure) {
    return halide_default_do_par_for(user_context, f, min, size, closure);
}

TEST(ThreadPool, InstalledByTheEntryPointsUnlessTheApplicationHasItsOwn) {
    attngen_install_error_handler();
    const halide_do_par_for_t installed = halide_set_custom_do_par_for(application_do_par_for);
    EXPECT_EQ(installed, spinning_do_par_for);
    attngen::rt::install_spinning_pool();
    EXPECT_EQ(halide_set_custom_do_par_for(installed), application_do_par_for);
}

// The input scan's and the staged output's grains, at lengths about their chunks and their
// thresholds for the pool, on 2 threads: every element once, each call a range within [0, n).
TEST(ParallelChunks, EveryElementOnceAtEachGrain) {
    PoolSize two(2);
    for (const attngen::rt::ChunkGrain grain : {attngen::rt::kScanGrain, attngen::rt::kCopyGrain}) {
        const size_t c = grain.elements, pool_from = (grain.min_chunks - 1) * c + 1;
        for (size_t n : {size_t(1), c - 1, c, c + 1, pool_from - 1, pool_from, 3 * c + 7}) {
            SCOPED_TRACE("chunks of " + std::to_string(c) + ", n = " + std::to_string(n));
            std::unique_ptr<std::atomic<int>[]> visits(new std::atomic<int>[n]);
            for (size_t i = 0; i < n; ++i) visits[i] = 0;
            std::atomic<int> bad_ranges{0};
            attngen::rt::parallel_chunks(n, grain, [&](size_t begin, size_t end) {
                if (begin >= end || end > n) ++bad_ranges;
                for (size_t i = begin; i < end && i < n; ++i) ++visits[i];
            });
            EXPECT_EQ(bad_ranges, 0);
            size_t wrong = 0;
            for (size_t i = 0; i < n; ++i) wrong += visits[i] != 1;
            EXPECT_EQ(wrong, 0u);
        }
    }
}

}  // namespace
}  // namespace attngen_test
