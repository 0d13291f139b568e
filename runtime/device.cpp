#include "device.h"

#include <string>

#include "errors.h"

#ifdef ATTNGEN_HAVE_CUDA
#include <HalideRuntimeCuda.h>
#endif
#ifdef ATTNGEN_HAVE_OPENCL
#include <HalideRuntimeOpenCL.h>
#endif

namespace attngen::rt {

const char *device_name(attngen_device device) {
    switch (device) {
        case ATTNGEN_DEVICE_CPU:
            return "CPU";
        case ATTNGEN_DEVICE_CUDA:
            return "CUDA";
        case ATTNGEN_DEVICE_OPENCL:
            return "OpenCL";
    }
    return "unknown device";
}

attngen_status require_known_device(int32_t device, const char *what) {
    if (device == ATTNGEN_DEVICE_CPU || device == ATTNGEN_DEVICE_CUDA ||
        device == ATTNGEN_DEVICE_OPENCL) {
        return ATTNGEN_OK;
    }
    return fail(ATTNGEN_ERROR_INVALID_ARGUMENT, std::string(what) + " has unknown value " +
                                                    std::to_string(int(device)) +
                                                    " (expected 0 CPU, 1 CUDA, 2 OpenCL)");
}

attngen_status require_device_head_sizes(attngen_device device, int32_t head_size,
                                         int32_t value_head_size) {
    if (device != ATTNGEN_DEVICE_CUDA ||
        (head_size <= kMaxCudaHeadSize && value_head_size <= kMaxCudaHeadSize)) {
        return ATTNGEN_OK;
    }
    return fail(ATTNGEN_ERROR_UNSUPPORTED,
                "CUDA takes head sizes up to " + std::to_string(kMaxCudaHeadSize) +
                    " (its flash kernel keeps a block of keys and its queries' state in 48 KiB of "
                    "shared memory), got " +
                    std::to_string(head_size) + " for queries and keys and " +
                    std::to_string(value_head_size) + " for values; run them on the CPU");
}

const halide_device_interface_t *gpu_interface_or_fail(attngen_device device) {
    switch (device) {
#ifdef ATTNGEN_HAVE_CUDA
        case ATTNGEN_DEVICE_CUDA:
            return halide_cuda_device_interface();
#endif
#ifdef ATTNGEN_HAVE_OPENCL
        case ATTNGEN_DEVICE_OPENCL:
            return halide_opencl_device_interface();
#endif
        default:
            fail(ATTNGEN_ERROR_UNSUPPORTED,
                 std::string("this build of attngen has no ") + device_name(device) +
                     " kernels (configure with ATTNGEN_ENABLE_" +
                     (device == ATTNGEN_DEVICE_CUDA ? "CUDA" : "OPENCL") +
                     "=ON on an x86-64 host)");
            return nullptr;
    }
}

attngen_status probe_device(attngen_device device, const GpuBinding &gpu) {
    const halide_device_interface_t *interface = gpu_interface_or_fail(device);
    if (interface == nullptr) return ATTNGEN_ERROR_UNSUPPORTED;
    install_halide_runtime_hooks();
    halide_dimension_t dim{0, 1, 1, 0};
    halide_buffer_t probe{};
    probe.type = halide_type_t(halide_type_float, 32);
    probe.dimensions = 1;
    probe.dim = &dim;
    KernelContext context;
    context.gpu = gpu;
    const int code = halide_device_malloc(&context, &probe, interface);
    if (code != 0) {
        return fail(ATTNGEN_ERROR_DEVICE,
                    std::string("no usable ") + device_name(device) + " device: " +
                        (context.messages.empty() ? "Halide error " + std::to_string(code)
                                                  : context.messages));
    }
    halide_device_free(&context, &probe);
    return ATTNGEN_OK;
}

attngen_status wrap_device_address(attngen_device device, [[maybe_unused]] halide_buffer_t *buf,
                                   uint64_t address, const char *name, const GpuBinding &gpu) {
    if (address == 0) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    std::string(name) + " is a null device address");
    }
    KernelContext context;
    context.gpu = gpu;
    int code = halide_error_code_no_device_interface;
    switch (device) {
#ifdef ATTNGEN_HAVE_CUDA
        case ATTNGEN_DEVICE_CUDA:
            code = halide_cuda_wrap_device_ptr(&context, buf, address);
            break;
#endif
#ifdef ATTNGEN_HAVE_OPENCL
        case ATTNGEN_DEVICE_OPENCL:
            code = halide_opencl_wrap_cl_mem(&context, buf, address);
            break;
#endif
        default:
            break;
    }
    if (code == 0) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_DEVICE,
                std::string("cannot use the device address of ") + name + ": " + context.messages);
}

void detach_device_address(attngen_device device, halide_buffer_t *buf, const GpuBinding &gpu) {
    if (buf->device == 0) return;
    KernelContext context;
    context.gpu = gpu;
    switch (device) {
#ifdef ATTNGEN_HAVE_CUDA
        case ATTNGEN_DEVICE_CUDA:
            halide_cuda_detach_device_ptr(&context, buf);
            break;
#endif
#ifdef ATTNGEN_HAVE_OPENCL
        case ATTNGEN_DEVICE_OPENCL:
            halide_opencl_detach_cl_mem(&context, buf);
            break;
#endif
        default:
            break;
    }
}

uint64_t device_address_of(attngen_device device, const halide_buffer_t *buf) {
    KernelContext context;
    auto *mutable_buf = const_cast<halide_buffer_t *>(buf);
    switch (device) {
#ifdef ATTNGEN_HAVE_CUDA
        case ATTNGEN_DEVICE_CUDA:
            return halide_cuda_get_device_ptr(&context, mutable_buf);
#endif
#ifdef ATTNGEN_HAVE_OPENCL
        case ATTNGEN_DEVICE_OPENCL:
            return uint64_t(halide_opencl_get_cl_mem(&context, mutable_buf));
#endif
        default:
            (void)mutable_buf;
            return 0;
    }
}

// The application's context and queue, checked against the device; {} for attngen's own.
attngen_status resolve_gpu_context(const attngen_gpu_context *gpu, attngen_device device,
                                   GpuBinding *binding) {
    *binding = {};
    if (gpu == nullptr || (gpu->context == nullptr && gpu->queue == nullptr)) return ATTNGEN_OK;
    if (device == ATTNGEN_DEVICE_CPU) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "a GPU context was given for a CPU handle (config.device is CPU)");
    }
    if (gpu->context == nullptr) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "gpu->queue is set but gpu->context is NULL: a queue belongs to a context");
    }
    if (device == ATTNGEN_DEVICE_OPENCL && gpu->queue == nullptr) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "gpu->queue is NULL: an OpenCL context needs a command queue of it");
    }
    *binding = GpuBinding{gpu->context, gpu->queue};
    return ATTNGEN_OK;
}

attngen_status release_application_context(attngen_device device, const GpuBinding &gpu) {
    const halide_device_interface_t *interface = gpu_interface_or_fail(device);
    if (interface == nullptr) return ATTNGEN_ERROR_UNSUPPORTED;
    KernelContext context;
    context.gpu = gpu;
    // Halide's release reports no status: a failure leaves the kernels loaded.
    halide_device_release(&context, interface);
    return ATTNGEN_OK;
}

WrappedAddresses::~WrappedAddresses() {
    for (halide_buffer_t *buf : buffers_) detach_device_address(device_, buf, gpu_);
}

attngen_status WrappedAddresses::wrap(halide_buffer_t *buf, uint64_t address, const char *name) {
    ATTNGEN_RETURN_IF_ERROR(wrap_device_address(device_, buf, address, name, gpu_));
    buffers_.push_back(buf);
    return ATTNGEN_OK;
}

DeviceScratch::~DeviceScratch() {
    KernelContext context;  // a failure to free leaks device memory; there is no one to tell
    context.gpu = gpu_;
    for (halide_buffer_t *buf : buffers_) {
        if (buf->device != 0) halide_device_free(&context, buf);
    }
}

}  // namespace attngen::rt
