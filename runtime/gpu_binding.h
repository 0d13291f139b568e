// Which GPU context and queue a call runs in. A handle made by attngen_mha_create_in_context
// carries the application's own; every Halide call made for that handle gets them through its
// user context (KernelContext::gpu), where attngen's context hooks (gpu_context_hooks.h) hand
// them to Halide's CUDA or OpenCL runtime. Both null: the context attngen creates itself.
#ifndef ATTNGEN_RUNTIME_GPU_BINDING_H
#define ATTNGEN_RUNTIME_GPU_BINDING_H

namespace attngen::rt {

struct GpuBinding {
    void *context = nullptr;  // CUcontext or cl_context; null: attngen's own
    void *queue = nullptr;    // CUstream (null: the context's default stream) or cl_command_queue

    bool owned_by_application() const { return context != nullptr; }
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_GPU_BINDING_H
