// attngen_call_server: one named shape's call (named_call.h), timed on request, for
// scripts/paired_ab.py, which runs one server from each of two builds and alternates requests
// between them, milliseconds apart. Rounds of whole benchmark processes (scripts/ab_runs.py)
// lie seconds apart, and on the shared machines attngen is measured on, the neighbours' load
// changes within that: per-round ratios of one unchanged shape spread from 0.77 to 2.10 (bench/
// RESULTS.md, 2026-12-02).
//
//     build/bench/attngen_call_server <decode or MHA shape> [bf16 | f16]
//
// It sets the call up, runs it once, and prints "ready" (or "error: <message>" and exits 1).
// Then each line it reads holds a count n: it runs the call once untimed (the pool's workers
// may have gone to sleep since the last request), then n times, and prints the n times in
// microseconds on one line. "q" or the end of input ends it.
#include <attngen/attngen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include "named_call.h"

namespace {

using Clock = std::chrono::steady_clock;

int fail(const char *what) {
    std::printf("error: %s: %s\n", what, attngen_last_error());
    std::fflush(stdout);
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    // The handle's precision: float32 unless named. Any other word is refused, so that a
    // request for a precision this build does not know never times float32 in its place.
    attngen_precision precision = ATTNGEN_PRECISION_F32;
    if (argc == 3 && std::strcmp(argv[2], "bf16") == 0) precision = ATTNGEN_PRECISION_BF16;
    if (argc == 3 && std::strcmp(argv[2], "f16") == 0) precision = ATTNGEN_PRECISION_F16;
    if (argc < 2 || argc > 3 || (argc == 3 && precision == ATTNGEN_PRECISION_F32)) {
        std::fprintf(stderr, "usage: %s <decode or MHA shape> [bf16 | f16]\n", argv[0]);
        return 2;
    }
    std::string error;
    const std::function<attngen_status()> call =
        attngen_bench::named_call(argv[1], precision, error);
    if (!call) {
        std::printf("error: set-up: %s\n", error.c_str());
        return 1;
    }
    if (call() != ATTNGEN_OK) return fail("first call");
    std::printf("ready\n");
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line) && line != "q") {
        const int n = std::atoi(line.c_str());
        if (n < 1) {
            std::printf("error: not a count of calls: %s\n", line.c_str());
            std::fflush(stdout);
            continue;
        }
        if (call() != ATTNGEN_OK) return fail("call");
        for (int i = 0; i < n; ++i) {
            const Clock::time_point start = Clock::now();
            if (call() != ATTNGEN_OK) return fail("call");
            std::printf("%s%.1f", i ? " " : "",
                        std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        }
        std::printf("\n");
        std::fflush(stdout);
    }
    return 0;
}
