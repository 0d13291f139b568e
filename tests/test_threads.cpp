// Concurrency: "Safe to call from several threads at once on one handle." Eight threads share
// one handle, each with its own inputs, and must get exactly what a lone call gets.
#include "mha_tester.h"
#include "sdpa_tester.h"
#include "test_util.h"

#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace attngen_test
