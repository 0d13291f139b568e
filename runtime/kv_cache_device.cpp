#include "kv_cache_device.h"

#include <new>
#include <string>
#include <vector>

#include "errors.h"

namespace attngen::rt {

namespace {

// Allocates buf on the device with every byte 0, by copying zeros from a temporary host buffer
// of the same size (Halide's device interface has no fill).
attngen_status allocate_zeroed(attngen_device device, const GpuBinding &gpu, halide_buffer_t *buf,
                               const char *what) {
    const halide_device_interface_t *interface = gpu_interface_or_fail(device);
    if (interface == nullptr) return ATTNGEN_ERROR_UNSUPPORTED;
    std::vector<uint8_t> zeros;
    try {
        zeros.assign(buf->size_in_bytes(), 0);
    } catch (const std::bad_alloc &) {
        return fail(ATTNGEN_ERROR_OUT_OF_MEMORY,
                    std::string("cannot allocate the host staging of the cache's ") + what);
    }
    buf->host = zeros.data();
    buf->flags = halide_buffer_flag_host_dirty;
    KernelContext context;
    context.gpu = gpu;
    const int code = halide_copy_to_device(&context, buf, interface);
    buf->host = nullptr;
    buf->flags = 0;
    if (code != 0) {
        return kernel_failure((std::string("the cache's ") + what + " on the device").c_str(), code,
                              context);
    }
    return ATTNGEN_OK;
}

}  // namespace

attngen_status DeviceKvStorage::create(attngen_device device, const GpuBinding &gpu,
                                       const std::array<int32_t, 5> &key_shape,
                                       const std::array<int32_t, 5> &value_shape,
                                       halide_type_t element,
                                       std::unique_ptr<DeviceKvStorage> *out) {
    std::unique_ptr<DeviceKvStorage> s(new (std::nothrow)
                                           DeviceKvStorage(gpu, key_shape, value_shape, element));
    if (!s) return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate the cache");
    // On failure the destructor frees whatever was allocated.
    ATTNGEN_RETURN_IF_ERROR(allocate_zeroed(device, gpu, s->keys(), "keys"));
    ATTNGEN_RETURN_IF_ERROR(allocate_zeroed(device, gpu, s->values(), "values"));
    *out = std::move(s);
    return ATTNGEN_OK;
}

DeviceKvStorage::~DeviceKvStorage() {
    KernelContext context;  // a failure to free leaks device memory; there is no one to tell
    context.gpu = gpu_;
    for (halide_buffer_t *buf : {keys(), values()}) {
        if (buf->device != 0) halide_device_free(&context, buf);
    }
}

}  // namespace attngen::rt
