// The attngen_mha handle: its resolved configuration and its packed projection weights, shared
// by the entry points of mha.cpp (forward), kv_cache.cpp (the cache) and forward_cached.cpp.
#ifndef ATTNGEN_RUNTIME_MHA_HANDLE_H
#define ATTNGEN_RUNTIME_MHA_HANDLE_H

#include <attngen/attngen.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>

#include "device.h"
#include "errors.h"
#include "fused_forward_call.h"
#include "mha_config.h"
#include "packed_projection.h"

namespace attngen::rt {

// The packed projection weights with their kernel buffers (ProjectionBuffers: on a GPU they
// are copied to the device once, in set_weights, in the handle's context, and stay there until
// the weights are replaced).
struct ProjectionWeights {
    explicit ProjectionWeights(const GpuBinding &gpu) : device_copies(gpu), gpu_(gpu) {}

    PackedProjection q, k, v, o;
    std::unique_ptr<ProjectionBuffers> wq, wk, wv, wo;
    DeviceScratch device_copies;

    attngen_status upload(attngen_device device) {
        wq = std::make_unique<ProjectionBuffers>(q, device);
        wk = std::make_unique<ProjectionBuffers>(k, device);
        wv = std::make_unique<ProjectionBuffers>(v, device);
        wo = std::make_unique<ProjectionBuffers>(o, device);
        if (device == ATTNGEN_DEVICE_CPU) return ATTNGEN_OK;
        const halide_device_interface_t *interface = gpu_interface_or_fail(device);
        for (ProjectionBuffers *b : {wq.get(), wk.get(), wv.get(), wo.get()}) {
            for (halide_buffer_t *buf : {b->weight(), b->bias.get()}) {
                device_copies.track(buf);
                buf->flags = halide_buffer_flag_host_dirty;
                KernelContext context;
                context.gpu = gpu_;
                const int code = halide_copy_to_device(&context, buf, interface);
                if (code != 0) return kernel_failure("weight upload", code, context);
            }
        }
        return ATTNGEN_OK;
    }

  private:
    GpuBinding gpu_;
};

// 1, 2, 3, ... for the handles in the order created.
inline uint64_t next_handle_serial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace attngen::rt

struct attngen_mha {
    attngen::rt::ResolvedConfig config;
    // The application's GPU context (attngen_mha_create_in_context), fixed for the handle's
    // life, and its queue, which attngen_mha_set_queue may replace at any time.
    void *gpu_context = nullptr;
    std::atomic<void *> gpu_queue{nullptr};
    // Forward calls share the weights; set_weights replaces them exclusively.
    mutable std::shared_mutex projections_mutex;
    std::unique_ptr<attngen::rt::ProjectionWeights> projections;
    // Unique among the handles of the process: a KV cache records it beside the handle's
    // address, which a handle created after its owner was destroyed may reuse.
    const uint64_t serial = attngen::rt::next_handle_serial();

    attngen::rt::GpuBinding gpu() const { return {gpu_context, gpu_queue.load()}; }
};

namespace attngen::rt {

// For every entry point that runs the handle's projections; call it holding projections_mutex.
// The message is prefixed with the entry point's name (guard_entry_point).
inline attngen_status require_projections(const attngen_mha *m) {
    if (m->projections) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_INVALID_ARGUMENT, "called before attngen_mha_set_weights");
}

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_MHA_HANDLE_H
