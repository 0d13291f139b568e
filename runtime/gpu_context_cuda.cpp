// CUDA: Halide asks halide_cuda_acquire_context / halide_cuda_get_stream for the context and
// stream of every driver call it makes. Halide 21 lets a program replace those through setters
// that return the handler they replace, so a call without an application context still gets
// Halide's default (the context Halide creates once per process, and its default stream).
#include <HalideRuntimeCuda.h>

#include "errors.h"
#include "gpu_context_hooks.h"

namespace attngen::rt {
namespace {

halide_cuda_acquire_context_t default_acquire = nullptr;
halide_cuda_release_context_t default_release = nullptr;
halide_cuda_get_stream_t default_get_stream = nullptr;

// The application's binding of the call, or null. Halide passes the user context of the
// kernel or runtime call through unchanged; attngen always passes a KernelContext (or null,
// from a kernel an application calls itself: see report_halide_error).
const GpuBinding *application_binding(void *user_context) {
    if (user_context == nullptr) return nullptr;
    const GpuBinding &gpu = static_cast<KernelContext *>(user_context)->gpu;
    return gpu.owned_by_application() ? &gpu : nullptr;
}

int acquire_context(void *user_context, void **context, bool create) {
    if (const GpuBinding *gpu = application_binding(user_context)) {
        *context = gpu->context;
        return halide_error_code_success;
    }
    return default_acquire(user_context, context, create);
}

int release_context(void *user_context) {
    if (application_binding(user_context) != nullptr) return halide_error_code_success;
    return default_release(user_context);
}

int get_stream(void *user_context, void *context, void **stream) {
    if (const GpuBinding *gpu = application_binding(user_context)) {
        *stream = gpu->queue;
        return halide_error_code_success;
    }
    return default_get_stream(user_context, context, stream);
}

}  // namespace

void install_cuda_context_hooks() {
    default_acquire = halide_set_cuda_acquire_context(acquire_context);
    default_release = halide_set_cuda_release_context(release_context);
    default_get_stream = halide_set_cuda_get_stream(get_stream);
}

}  // namespace attngen::rt
