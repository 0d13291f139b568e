// The size of the thread pool the kernels run on. Every kernel links the one Halide runtime of
// this library (add_halide_runtime in generators/), and its parallel loops run on one
// process-wide pool (spinning_pool.h), so one setting serves every handle and entry point.
#include <attngen/attngen.h>

#include <HalideRuntime.h>

#include <mutex>
#include <string>

#include "errors.h"
#include "spinning_pool.h"

using namespace attngen::rt;

namespace {

// The number is kept by the Halide runtime (halide_set_num_threads); the pool the kernels run
// on (spinning_pool.h) reads it for every parallel loop.
constexpr int32_t kMaxThreads = kMaxPoolThreads;

// Orders our set and get calls, so that get's resolving of the default below cannot undo a
// concurrent set.
std::mutex pool_size_mutex;

}  // namespace

extern "C" attngen_status attngen_set_num_threads(int32_t n) {
    if (n < 0 || n > kMaxThreads) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "attngen_set_num_threads: n must be 1.." + std::to_string(kMaxThreads) +
                        ", or 0 for the default (HL_NUM_THREADS, else the number of cores); got " +
                        std::to_string(n));
    }
    std::lock_guard<std::mutex> lock(pool_size_mutex);
    // 0 makes Halide compute its default now (HL_NUM_THREADS, else the core count).
    halide_set_num_threads(n);
    clear_error();
    return ATTNGEN_OK;
}

extern "C" int32_t attngen_get_num_threads(void) {
    std::lock_guard<std::mutex> lock(pool_size_mutex);
    // Halide reports 0 until the pool first starts or a number is set; resolving the default
    // now is exactly what the pool would do when it starts.
    if (halide_get_num_threads() == 0) halide_set_num_threads(0);
    return halide_get_num_threads();
}
