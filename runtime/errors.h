// Error reporting of the C API: a thread-local message per failure, and the bridge that turns
// Halide's runtime errors into attngen_status instead of letting them print or abort (with the
// other hooks attngen installs into the Halide runtime).
#ifndef ATTNGEN_RUNTIME_ERRORS_H
#define ATTNGEN_RUNTIME_ERRORS_H

#include <attngen/attngen.h>

#include <exception>
#include <new>
#include <string>

#include "gpu_binding.h"

namespace attngen::rt {

// Records message as this thread's last error and returns status. Inside a C entry point
// (guard_entry_point) the message starts with the entry point's name: "attngen_mha_forward: m is
// NULL" (unless the message begins with that name already).
attngen_status fail(attngen_status status, std::string message);

// Names the C entry point running on this thread while it lives, for fail(). An entry point
// called inside another keeps the outer name: the one the application called.
class EntryPointScope {
  public:
    explicit EntryPointScope(const char *function) noexcept;
    ~EntryPointScope();
    EntryPointScope(const EntryPointScope &) = delete;
    EntryPointScope &operator=(const EntryPointScope &) = delete;

  private:
    const char *previous_;
};

// Marks this thread's last call as successful.
void clear_error();

// This thread's last message ("" after a success).
const char *last_error_message();

// Passed as the user context of every kernel call; Halide's error handler appends to it.
struct KernelContext {
    std::string messages;
    GpuBinding gpu;  // the application's GPU context and queue, or attngen's own (both null)
};

// Installs attngen's hooks into the Halide runtime, once per process: the error handler (errors
// go to the KernelContext of the failing call, see report_halide_error), the CPU dispatch
// policy (cpu_dispatch.h) and the block cache as Halide's allocator (block_cache.h). Called
// before any kernel runs. Idempotent and thread-safe.
void install_halide_runtime_hooks();

// Maps a kernel's return code (and what its context collected) to a status and message.
attngen_status kernel_failure(const char *kernel, int halide_code, const KernelContext &context);

// Runs the body of the C entry point `function`: every failure message starts with its name
// (fail), no exception crosses the C API, an allocation failure is ATTNGEN_ERROR_OUT_OF_MEMORY
// and anything else ATTNGEN_ERROR_INTERNAL.
template <typename Body>
attngen_status guard_entry_point(const char *function, Body &&body) noexcept {
    const EntryPointScope scope(function);
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "out of host memory");
    } catch (const std::exception &e) {
        return fail(ATTNGEN_ERROR_INTERNAL, e.what());
    } catch (...) {
        return fail(ATTNGEN_ERROR_INTERNAL, "unknown exception");
    }
}

}  // namespace attngen::rt

// Returns from the calling function when expr yields a status other than ATTNGEN_OK.
#define ATTNGEN_RETURN_IF_ERROR(expr)                              \
    do {                                                           \
        const attngen_status attngen_status_ = (expr);             \
        if (attngen_status_ != ATTNGEN_OK) return attngen_status_; \
    } while (0)

#endif  // ATTNGEN_RUNTIME_ERRORS_H
