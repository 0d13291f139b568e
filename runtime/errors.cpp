#include "errors.h"

#include "block_cache.h"
#include "cpu_dispatch.h"
#include "gpu_context_hooks.h"
#include "spinning_pool.h"

#include <HalideRuntime.h>

#include <cctype>
#include <cstring>
#include <mutex>

namespace attngen::rt {
namespace {

thread_local std::string last_error;
// The C entry point running on this thread (EntryPointScope), or nullptr.
thread_local const char *entry_point = nullptr;

// Whether message begins with the identifier name (not merely with a longer one).
bool begins_with_name(const std::string &message, const char *name) {
    const size_t n = std::strlen(name);
    if (message.compare(0, n, name) != 0) return false;
    if (message.size() == n) return true;
    const unsigned char next = static_cast<unsigned char>(message[n]);
    return !(std::isalnum(next) || next == '_');
}

void report_halide_error(void *user_context, const char *message) {
    if (message == nullptr) return;
    // Without a context the call came from a kernel the application calls itself (made by
    // attngen_add_library): the message becomes this thread's attngen_last_error().
    if (user_context == nullptr) {
        last_error = message;
        while (!last_error.empty() && last_error.back() == '\n') last_error.pop_back();
        return;
    }
    auto *context = static_cast<KernelContext *>(user_context);
    if (!context->messages.empty()) context->messages += "; ";
    context->messages += message;
    while (!context->messages.empty() && context->messages.back() == '\n') {
        context->messages.pop_back();
    }
}

attngen_status status_of_halide_code(int code) {
    switch (code) {
        case halide_error_code_out_of_memory:
            return ATTNGEN_ERROR_OUT_OF_MEMORY;
        case halide_error_code_buffer_allocation_too_large:
        case halide_error_code_buffer_extents_too_large:
        case halide_error_code_access_out_of_bounds:
        case halide_error_code_bad_dimensions:
        case halide_error_code_buffer_extents_negative:
        case halide_error_code_param_too_small:
        case halide_error_code_param_too_large:
            return ATTNGEN_ERROR_SHAPE;
        case halide_error_code_copy_to_host_failed:
        case halide_error_code_copy_to_device_failed:
        case halide_error_code_device_malloc_failed:
        case halide_error_code_device_sync_failed:
        case halide_error_code_device_free_failed:
        case halide_error_code_no_device_interface:
        case halide_error_code_device_run_failed:
        case halide_error_code_gpu_device_error:
        case halide_error_code_device_interface_no_device:
        case halide_error_code_device_buffer_copy_failed:
            return ATTNGEN_ERROR_DEVICE;
        default:
            return ATTNGEN_ERROR_INTERNAL;
    }
}

}  // namespace

attngen_status fail(attngen_status status, std::string message) {
    if (entry_point != nullptr && !begins_with_name(message, entry_point)) {
        last_error = std::string(entry_point) + ": " + message;
    } else {
        last_error = std::move(message);
    }
    return status;
}

EntryPointScope::EntryPointScope(const char *function) noexcept : previous_(entry_point) {
    if (entry_point == nullptr) entry_point = function;
}

EntryPointScope::~EntryPointScope() {
    entry_point = previous_;
}

void clear_error() {
    last_error.clear();
}

const char *last_error_message() {
    return last_error.c_str();
}

void install_halide_runtime_hooks() {
    static std::once_flag once;
    std::call_once(once, [] {
        halide_set_error_handler(report_halide_error);
        install_cpu_dispatch_policy();
        install_block_cache();
        install_spinning_pool();
#ifdef ATTNGEN_HAVE_CUDA
        install_cuda_context_hooks();
#endif
#ifdef ATTNGEN_HAVE_OPENCL
        link_opencl_context_hooks();
#endif
    });
}

attngen_status kernel_failure(const char *kernel, int halide_code, const KernelContext &context) {
    std::string message = std::string("kernel ") + kernel + " failed (Halide error " +
                          std::to_string(halide_code) + ")";
    if (!context.messages.empty()) message += ": " + context.messages;
    return fail(status_of_halide_code(halide_code), std::move(message));
}

}  // namespace attngen::rt

extern "C" void attngen_install_error_handler(void) {
    attngen::rt::install_halide_runtime_hooks();
}

extern "C" const char *attngen_last_error(void) {
    return attngen::rt::last_error_message();
}

extern "C" const char *attngen_status_string(attngen_status s) {
    switch (s) {
        case ATTNGEN_OK:
            return "ATTNGEN_OK";
        case ATTNGEN_ERROR_INVALID_ARGUMENT:
            return "ATTNGEN_ERROR_INVALID_ARGUMENT";
        case ATTNGEN_ERROR_SHAPE:
            return "ATTNGEN_ERROR_SHAPE";
        case ATTNGEN_ERROR_UNSUPPORTED:
            return "ATTNGEN_ERROR_UNSUPPORTED";
        case ATTNGEN_ERROR_DEVICE:
            return "ATTNGEN_ERROR_DEVICE";
        case ATTNGEN_ERROR_OUT_OF_MEMORY:
            return "ATTNGEN_ERROR_OUT_OF_MEMORY";
        case ATTNGEN_ERROR_INTERNAL:
            return "ATTNGEN_ERROR_INTERNAL";
    }
    return "ATTNGEN_ERROR_UNKNOWN_STATUS";
}
