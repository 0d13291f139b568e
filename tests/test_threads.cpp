// Concurrency: "Safe to call from several threads at once on one handle." Eight threads share
// one handle (or have one each), each with its own inputs, and must get exactly what a lone
// call gets; handles are created and destroyed on many threads at once; and the size of the
// kernels' thread pool (attngen_set_num_threads) never changes a result.
#include "mha_tester.h"
#include "sdpa_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>
#include <attngen/attngen.hpp>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace attngen_test {
namespace {

constexpr int kThreads = 8;
// Enough rounds that the threads' calls overlap many times over.
constexpr int kRounds = 20;

// What one thread saw go wrong; gathered and reported from the main thread.
struct ThreadReport {
    std::vector<std::string> failures;
};

void ExpectNoFailures(const std::vector<ThreadReport> &reports) {
    for (size_t t = 0; t < reports.size(); ++t) {
        for (const std::string &f : reports[t].failures)
            ADD_FAILURE() << "thread " << t << ": " << f;
    }
}

// Runs body(thread_index, report) on kThreads threads released at the same moment.
template <typename Body>
std::vector<ThreadReport> RunConcurrently(Body body) {
    std::vector<ThreadReport> reports(kThreads);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < kThreads) std::this_thread::yield();
            body(t, reports[t]);
        });
    }
    for (std::thread &th : threads) th.join();
    return reports;
}

std::string Mismatch(const char *what, const std::vector<float> &got,
                     const std::vector<float> &expected) {
    const ::testing::AssertionResult same = BitIdentical(what, got, expected);
    return same ? std::string() : same.message();
}

void ConcurrentForwardIsBitIdentical(MhaTester t) {
    SCOPED_TRACE(t.Describe());
    const attngen_mha_config config = t.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const MhaTester::Model model = t.MakeModel();
    ASSERT_EQ(model.SetWeights(m.get()), ATTNGEN_OK) << attngen_last_error();

    // Each thread's inputs and their single-threaded results, computed first.
    std::vector<MhaTester::Run> expected;
    for (int th = 0; th < kThreads; ++th) {
        expected.push_back(t.Prepare(DefaultSeed() + 1000u * uint32_t(th)));
        t.Call(m.get(), expected.back());
        ASSERT_EQ(expected.back().status, ATTNGEN_OK) << attngen_last_error();
    }
    t.Check(model, expected[0]);  // the baseline itself is right

    const auto reports = RunConcurrently([&](int th, ThreadReport &report) {
        for (int round = 0; round < kRounds; ++round) {
            MhaTester::Run r = t.Prepare(DefaultSeed() + 1000u * uint32_t(th));
            t.Call(m.get(), r);
            if (r.status != ATTNGEN_OK) {
                report.failures.push_back(std::string("status ") + attngen_status_string(r.status) +
                                          ": " + attngen_last_error());
                return;
            }
            for (const std::string &f : {Mismatch("out", r.out, expected[th].out),
                                         Mismatch("weights", r.weights, expected[th].weights)}) {
                if (!f.empty())
                    report.failures.push_back("round " + std::to_string(round) + ": " + f);
            }
            if (!report.failures.empty()) return;
        }
    });
    ExpectNoFailures(reports);
}

TEST(Threads, ConcurrentForwardOnOneHandleWithWeights) {
    MhaTester t;
    t.d_model(32)
        .num_heads(4)
        .batch(2)
        .q_len(9)
        .kv_len(13)
        .kv_lengths({13, 6})
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .additive(1, 4, 0.1)
        .with_weights(true);
    ConcurrentForwardIsBitIdentical(t);
}

TEST(Threads, ConcurrentForwardOnOneHandleWithoutWeights) {
    MhaTester t;
    t.d_model(64)
        .num_heads(8)
        .kdim(24)
        .vdim(40)
        .batch(3)
        .q_len(17)
        .kv_len(70)
        .bool_mask(3, 0.2)
        .with_weights(false);
    ConcurrentForwardIsBitIdentical(t);
}

// Each thread with its own shape on the one handle: nothing shape-dependent may be cached
// across calls without a lock.
TEST(Threads, ConcurrentForwardWithDifferentShapesPerThread) {
    MhaTester base;
    base.d_model(24).num_heads(3).causal(ATTNGEN_CAUSAL_TOP_LEFT);
    const attngen_mha_config config = base.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const MhaTester::Model model = base.MakeModel();
    ASSERT_EQ(model.SetWeights(m.get()), ATTNGEN_OK) << attngen_last_error();

    std::vector<MhaTester> testers;
    std::vector<MhaTester::Run> expected;
    for (int th = 0; th < kThreads; ++th) {
        MhaTester t = base;
        t.batch(1 + th % 3).q_len(1 + 5 * th).kv_len(2 + 7 * th).with_weights(th % 2 == 0);
        testers.push_back(t);
        expected.push_back(t.Prepare(uint32_t(th)));
        t.Call(m.get(), expected.back());
        ASSERT_EQ(expected.back().status, ATTNGEN_OK) << attngen_last_error();
        t.Check(model, expected.back());
    }
    const auto reports = RunConcurrently([&](int th, ThreadReport &report) {
        for (int round = 0; round < kRounds; ++round) {
            MhaTester::Run r = testers[th].Prepare(uint32_t(th));
            testers[th].Call(m.get(), r);
            std::string f = r.status != ATTNGEN_OK
                                ? attngen_last_error()
                                : Mismatch("out", r.out, expected[th].out) +
                                      Mismatch("weights", r.weights, expected[th].weights);
            if (!f.empty()) {
                report.failures.push_back("round " + std::to_string(round) + ": " + f);
                return;
            }
        }
    });
    ExpectNoFailures(reports);
}

TEST(Threads, ConcurrentSdpa) {
    SdpaTester t;
    t.batch(2).heads(3).q_len(11).kv_len(40).dk(16).dv(8).causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT);
    std::vector<SdpaTester> testers;
    std::vector<SdpaTester::Run> expected;
    for (int th = 0; th < kThreads; ++th) {
        testers.push_back(SdpaTester(t).seed(uint32_t(th)).with_weights(th % 2 == 1));
        expected.push_back(testers.back().Execute());
        ASSERT_EQ(expected.back().status, ATTNGEN_OK) << attngen_last_error();
    }
    const auto reports = RunConcurrently([&](int th, ThreadReport &report) {
        for (int round = 0; round < kRounds; ++round) {
            const SdpaTester::Run r = testers[th].Execute();
            std::string f = r.status != ATTNGEN_OK
                                ? attngen_last_error()
                                : Mismatch("out", r.out, expected[th].out) +
                                      Mismatch("weights", r.weights, expected[th].weights);
            if (!f.empty()) {
                report.failures.push_back("round " + std::to_string(round) + ": " + f);
                return;
            }
        }
    });
    ExpectNoFailures(reports);
}

// Errors are thread-local: failing threads and succeeding threads at once each see their own.
TEST(Threads, LastErrorStaysWithItsThread) {
    const auto reports = RunConcurrently([](int th, ThreadReport &report) {
        const float x = 1, w = 1;
        float y = 0;
        for (int round = 0; round < 200; ++round) {
            const bool fail = th % 2 == 0;
            const attngen_status s = attngen_linear(fail ? -1 : 1, 1, 1, &x, &w, nullptr, &y);
            const std::string e = attngen_last_error();
            if (fail && (s != ATTNGEN_ERROR_INVALID_ARGUMENT || e.empty())) {
                report.failures.push_back("a failing call reported status " +
                                          std::to_string(int(s)) + ", error \"" + e + "\"");
                return;
            }
            if (!fail && (s != ATTNGEN_OK || !e.empty())) {
                report.failures.push_back("a succeeding call reported status " +
                                          std::to_string(int(s)) + ", error \"" + e + "\"");
                return;
            }
        }
    });
    ExpectNoFailures(reports);
}

// Every thread with a handle of its own, made from the same model: handles share nothing but the
// kernels' thread pool.
TEST(Threads, ConcurrentForwardOnSeparateHandles) {
    MhaTester t;
    t.d_model(32).num_heads(4).batch(2).q_len(19).kv_len(23).causal(ATTNGEN_CAUSAL_TOP_LEFT);
    const MhaTester::Model model = t.MakeModel();
    const attngen_mha_config config = t.config();
    std::vector<MhaHandle> handles;
    std::vector<MhaTester::Run> expected;
    for (int th = 0; th < kThreads; ++th) {
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        handles.emplace_back(raw);
        ASSERT_EQ(model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
        expected.push_back(t.Prepare(DefaultSeed() + uint32_t(th)));
        t.Call(raw, expected.back());
        ASSERT_EQ(expected.back().status, ATTNGEN_OK) << attngen_last_error();
    }
    t.Check(model, expected[0]);
    const auto reports = RunConcurrently([&](int th, ThreadReport &report) {
        for (int round = 0; round < kRounds; ++round) {
            MhaTester::Run r = t.Prepare(DefaultSeed() + uint32_t(th));
            t.Call(handles[th].get(), r);
            std::string f = r.status != ATTNGEN_OK
                                ? attngen_last_error()
                                : Mismatch("out", r.out, expected[th].out) +
                                      Mismatch("weights", r.weights, expected[th].weights);
            if (!f.empty()) {
                report.failures.push_back("round " + std::to_string(round) + ": " + f);
                return;
            }
        }
    });
    ExpectNoFailures(reports);
}

// Handles live and die on many threads at once; each one works while it lives. Under the
// sanitized suite this also checks that nothing leaks or races.
TEST(Threads, CreateAndDestroyOnManyThreadsAtOnce) {
    MhaTester t;
    t.d_model(16).num_heads(2).batch(1).q_len(5).kv_len(7);
    const MhaTester::Model model = t.MakeModel();
    MhaTester::Run expected = t.Prepare(DefaultSeed());
    {
        const attngen_mha_config config = t.config();
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle m(raw);
        ASSERT_EQ(model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
        t.Call(raw, expected);
        ASSERT_EQ(expected.status, ATTNGEN_OK) << attngen_last_error();
    }
    const auto reports = RunConcurrently([&](int, ThreadReport &report) {
        const attngen_mha_config config = t.config();
        for (int round = 0; round < 3 * kRounds; ++round) {
            attngen_mha *raw = nullptr;
            if (attngen_mha_create(&config, &raw) != ATTNGEN_OK || raw == nullptr) {
                report.failures.push_back(std::string("create: ") + attngen_last_error());
                return;
            }
            MhaHandle m(raw);
            // Every other handle dies without weights or a forward call.
            if (round % 2 == 0) continue;
            if (model.SetWeights(raw) != ATTNGEN_OK) {
                report.failures.push_back(std::string("set_weights: ") + attngen_last_error());
                return;
            }
            MhaTester::Run r = t.Prepare(DefaultSeed());
            t.Call(raw, r);
            const std::string f = r.status != ATTNGEN_OK ? attngen_last_error()
                                                         : Mismatch("out", r.out, expected.out);
            if (!f.empty()) {
                report.failures.push_back("round " + std::to_string(round) + ": " + f);
                return;
            }
        }
    });
    ExpectNoFailures(reports);
}

// ---------------------------------------------------------------------------------------------
// The size of the thread pool (attngen_set_num_threads / attngen_get_num_threads).

// Restores the default pool size after each test, so the rest of the suite is unaffected.
class ThreadCount : public ::testing::Test {
  protected:
    void TearDown() override { EXPECT_EQ(attngen_set_num_threads(0), ATTNGEN_OK); }
};

TEST_F(ThreadCount, SetThenGet) {
    for (int32_t n : {1, 2, 3, 7, 256}) {
        ASSERT_EQ(attngen_set_num_threads(n), ATTNGEN_OK) << attngen_last_error();
        EXPECT_STREQ(attngen_last_error(), "");
        EXPECT_EQ(attngen_get_num_threads(), n);
    }
}

TEST_F(ThreadCount, ZeroSelectsTheDefault) {
    ASSERT_EQ(attngen_set_num_threads(0), ATTNGEN_OK) << attngen_last_error();
    const int32_t by_default = attngen_get_num_threads();
    EXPECT_GE(by_default, 1);
    if (std::getenv("HL_NUM_THREADS") == nullptr) {
        // Halide counts the online processors, as the standard library does.
        const unsigned cores = std::thread::hardware_concurrency();
        if (cores != 0) {
            EXPECT_EQ(by_default, int32_t(std::min(cores, 256u)));
        }
    }
}

// HL_NUM_THREADS is Halide's default; it is read again whenever 0 is set.
TEST_F(ThreadCount, ZeroReadsHlNumThreads) {
    const char *saved = std::getenv("HL_NUM_THREADS");
    const std::string previous = saved ? saved : "";
    ASSERT_EQ(setenv("HL_NUM_THREADS", "3", 1), 0);
    const attngen_status s = attngen_set_num_threads(0);
    const int32_t got = attngen_get_num_threads();
    if (saved)
        setenv("HL_NUM_THREADS", previous.c_str(), 1);
    else
        unsetenv("HL_NUM_THREADS");
    EXPECT_EQ(s, ATTNGEN_OK) << attngen_last_error();
    EXPECT_EQ(got, 3);
}

TEST_F(ThreadCount, OutOfRangeIsRefusedAndChangesNothing) {
    ASSERT_EQ(attngen_set_num_threads(2), ATTNGEN_OK) << attngen_last_error();
    for (int32_t n : {-1, -8, INT_MIN, 257, INT_MAX}) {
        SCOPED_TRACE(n);
        EXPECT_EQ(attngen_set_num_threads(n), ATTNGEN_ERROR_INVALID_ARGUMENT);
        const std::string message = attngen_last_error();
        EXPECT_NE(message.find("attngen_set_num_threads"), std::string::npos) << message;
        EXPECT_NE(message.find(std::to_string(n)), std::string::npos) << message;
        EXPECT_EQ(attngen_get_num_threads(), 2);
    }
}

TEST_F(ThreadCount, CppWrapperThrowsWithStatus) {
    attngen::set_num_threads(2);
    EXPECT_EQ(attngen::num_threads(), 2);
    try {
        attngen::set_num_threads(-1);
        ADD_FAILURE() << "no exception";
    } catch (const attngen::Error &e) {
        EXPECT_EQ(e.status(), ATTNGEN_ERROR_INVALID_ARGUMENT);
    }
    EXPECT_EQ(attngen::num_threads(), 2);
}

// Big enough that the kernels split their work over threads (several query blocks, heads and
// batch items), with every mask part.
MhaTester ParallelMha(bool with_weights) {
    MhaTester t;
    t.d_model(64)
        .num_heads(4)
        .batch(3)
        .q_len(100)
        .kv_len(90)
        .kv_lengths({90, 41, 77})
        .causal(ATTNGEN_CAUSAL_BOTTOM_RIGHT)
        .bool_mask(1, 0.1)
        .additive(3, 4, 0.05)
        .with_weights(with_weights);
    return t;
}

TEST_F(ThreadCount, MhaResultsAreBitIdenticalForAnyCount) {
    for (bool with_weights : {false, true}) {
        MhaTester t = ParallelMha(with_weights);
        SCOPED_TRACE(t.Describe());
        const attngen_mha_config config = t.config();
        attngen_mha *raw = nullptr;
        ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
        MhaHandle m(raw);
        const MhaTester::Model model = t.MakeModel();
        ASSERT_EQ(model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
        ASSERT_EQ(attngen_set_num_threads(1), ATTNGEN_OK);
        MhaTester::Run serial = t.Prepare(DefaultSeed());
        t.Call(raw, serial);
        ASSERT_EQ(serial.status, ATTNGEN_OK) << attngen_last_error();
        t.Check(model, serial);
        for (int32_t n : {2, 3, 8, 0}) {
            SCOPED_TRACE("threads " + std::to_string(n));
            ASSERT_EQ(attngen_set_num_threads(n), ATTNGEN_OK);
            MhaTester::Run r = t.Prepare(DefaultSeed());
            t.Call(raw, r);
            ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
            EXPECT_TRUE(BitIdentical("out", r.out, serial.out));
            EXPECT_TRUE(BitIdentical("weights", r.weights, serial.weights));
        }
    }
}

TEST_F(ThreadCount, SdpaAndLinearResultsAreBitIdenticalForAnyCount) {
    SdpaTester t;
    t.batch(2).heads(3).q_len(80).kv_len(70).dk(24).dv(16).bool_mask(2, 0.2);
    Rng rng(DefaultSeed());
    const int rows = 150, in = 48, out = 40;
    const std::vector<float> x = rng.Uniform(size_t(rows) * in, -1, 1);
    const std::vector<float> w = rng.Uniform(size_t(out) * in, -1, 1);
    const std::vector<float> b = rng.Uniform(size_t(out), -1, 1);
    auto linear = [&] {
        std::vector<float> y = NaNs(size_t(rows) * out);
        EXPECT_EQ(attngen_linear(rows, in, out, x.data(), w.data(), b.data(), y.data()), ATTNGEN_OK)
            << attngen_last_error();
        return y;
    };
    ASSERT_EQ(attngen_set_num_threads(1), ATTNGEN_OK);
    const SdpaTester::Run serial = t.with_weights(true).Execute();
    ASSERT_EQ(serial.status, ATTNGEN_OK) << attngen_last_error();
    const std::vector<float> serial_y = linear();
    for (int32_t n : {2, 5, 0}) {
        SCOPED_TRACE("threads " + std::to_string(n));
        ASSERT_EQ(attngen_set_num_threads(n), ATTNGEN_OK);
        const SdpaTester::Run r = t.Execute();
        ASSERT_EQ(r.status, ATTNGEN_OK) << attngen_last_error();
        EXPECT_TRUE(BitIdentical("out", r.out, serial.out));
        EXPECT_TRUE(BitIdentical("weights", r.weights, serial.weights));
        EXPECT_TRUE(BitIdentical("y", linear(), serial_y));
    }
}

// The pool may be resized while calls run: calls already running finish, later ones use the new
// size, and no result changes.
TEST_F(ThreadCount, ResizingWhileForwardsRunChangesNoResult) {
    MhaTester t = ParallelMha(false);
    t.batch(1).q_len(70).kv_len(60).kv_lengths({60}).additive(1, 4, 0.05);
    const attngen_mha_config config = t.config();
    attngen_mha *raw = nullptr;
    ASSERT_EQ(attngen_mha_create(&config, &raw), ATTNGEN_OK) << attngen_last_error();
    MhaHandle m(raw);
    const MhaTester::Model model = t.MakeModel();
    ASSERT_EQ(model.SetWeights(raw), ATTNGEN_OK) << attngen_last_error();
    MhaTester::Run expected = t.Prepare(DefaultSeed());
    t.Call(raw, expected);
    ASSERT_EQ(expected.status, ATTNGEN_OK) << attngen_last_error();

    const auto reports = RunConcurrently([&](int th, ThreadReport &report) {
        for (int round = 0; round < kRounds; ++round) {
            if (th == 0) {  // the resizer
                const int32_t n = round % 4;
                if (attngen_set_num_threads(n) != ATTNGEN_OK || attngen_get_num_threads() < 1) {
                    report.failures.push_back(std::string("resize: ") + attngen_last_error());
                    return;
                }
                continue;
            }
            MhaTester::Run r = t.Prepare(DefaultSeed());
            t.Call(raw, r);
            const std::string f = r.status != ATTNGEN_OK ? attngen_last_error()
                                                         : Mismatch("out", r.out, expected.out);
            if (!f.empty()) {
                report.failures.push_back("round " + std::to_string(round) + ": " + f);
                return;
            }
        }
    });
    ExpectNoFailures(reports);
}

}  // namespace
}  // namespace attngen_test
