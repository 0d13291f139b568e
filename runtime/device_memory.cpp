// attngen_device_alloc / free / upload / download: device memory in the context attngen's
// kernels run in, for attngen_mha_forward_device. Allocations are Halide buffers kept in a
// registry keyed by their device address, so a copy can check its size.
#include <attngen/attngen.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "device.h"
#include "errors.h"
#include "validate.h"

using namespace attngen::rt;

namespace {

struct Allocation {
    halide_dimension_t dim{};
    halide_buffer_t buffer{};
};

struct Registry {
    std::mutex mutex;
    std::map<std::pair<attngen_device, uint64_t>, std::unique_ptr<Allocation>> allocations;
};

Registry &registry() {
    static Registry r;
    return r;
}

// A byte buffer of `bytes` elements (Halide extents are 32-bit: larger allocations are
// rejected up front).
attngen_status describe_bytes(uint64_t bytes, halide_dimension_t *dim, halide_buffer_t *buf) {
    if (bytes == 0 || bytes > uint64_t(INT32_MAX)) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "bytes must be in [1, 2^31 - 1] (Halide's 32-bit extents), got " +
                        std::to_string(bytes));
    }
    *dim = halide_dimension_t{0, int32_t(bytes), 1, 0};
    buf->type = halide_type_t(halide_type_uint, 8);
    buf->dimensions = 1;
    buf->dim = dim;
    return ATTNGEN_OK;
}

// The allocation at address, which must hold at least `bytes` bytes.
attngen_status find_allocation(attngen_device device, uint64_t address, uint64_t bytes) {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.allocations.find({device, address});
    if (it == r.allocations.end()) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    std::string("address is not memory from attngen_device_alloc for ") +
                        device_name(device));
    }
    if (uint64_t(it->second->dim.extent) < bytes) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "the allocation holds " + std::to_string(it->second->dim.extent) +
                        " bytes, fewer than the " + std::to_string(bytes) + " to copy");
    }
    return ATTNGEN_OK;
}

// Copies between host memory and the first `bytes` bytes of a device allocation through a
// temporary buffer that wraps the device address.
attngen_status copy_bytes(attngen_device device, uint64_t address, void *host, uint64_t bytes,
                          bool to_device) {
    ATTNGEN_RETURN_IF_ERROR(require_known_device(raw_enum_value(device), "device"));
    const halide_device_interface_t *interface = gpu_interface_or_fail(device);
    if (interface == nullptr) return ATTNGEN_ERROR_UNSUPPORTED;
    ATTNGEN_RETURN_IF_ERROR(require_not_null(host, "host"));
    install_halide_runtime_hooks();
    halide_dimension_t dim{};
    halide_buffer_t buf{};
    ATTNGEN_RETURN_IF_ERROR(describe_bytes(bytes, &dim, &buf));
    ATTNGEN_RETURN_IF_ERROR(find_allocation(device, address, bytes));
    ATTNGEN_RETURN_IF_ERROR(wrap_device_address(device, &buf, address, "address"));
    buf.host = static_cast<uint8_t *>(host);
    KernelContext context;
    int code;
    if (to_device) {
        buf.flags = halide_buffer_flag_host_dirty;
        code = halide_copy_to_device(&context, &buf, interface);
    } else {
        buf.flags = halide_buffer_flag_device_dirty;
        code = halide_copy_to_host(&context, &buf);
    }
    detach_device_address(device, &buf);
    if (code != 0) return kernel_failure(to_device ? "upload" : "download", code, context);
    clear_error();
    return ATTNGEN_OK;
}

attngen_status alloc_impl(attngen_device device, uint64_t bytes, uint64_t *address) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(address, "address"));
    ATTNGEN_RETURN_IF_ERROR(require_known_device(raw_enum_value(device), "device"));
    const halide_device_interface_t *interface = gpu_interface_or_fail(device);
    if (interface == nullptr) return ATTNGEN_ERROR_UNSUPPORTED;
    install_halide_runtime_hooks();
    auto allocation = std::make_unique<Allocation>();
    ATTNGEN_RETURN_IF_ERROR(describe_bytes(bytes, &allocation->dim, &allocation->buffer));
    KernelContext context;
    const int code = halide_device_malloc(&context, &allocation->buffer, interface);
    if (code != 0) return kernel_failure("device allocation", code, context);
    const uint64_t result = device_address_of(device, &allocation->buffer);
    Registry &r = registry();
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        r.allocations[{device, result}] = std::move(allocation);
    }
    *address = result;
    clear_error();
    return ATTNGEN_OK;
}

attngen_status free_impl(attngen_device device, uint64_t address) {
    ATTNGEN_RETURN_IF_ERROR(require_known_device(raw_enum_value(device), "device"));
    if (address == 0) {
        clear_error();
        return ATTNGEN_OK;
    }
    std::unique_ptr<Allocation> allocation;
    {
        Registry &r = registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        auto it = r.allocations.find({device, address});
        if (it == r.allocations.end()) {
            return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                        std::string("address is not memory from attngen_device_alloc for ") +
                            device_name(device) + " (or was freed already)");
        }
        allocation = std::move(it->second);
        r.allocations.erase(it);
    }
    KernelContext context;
    const int code = halide_device_free(&context, &allocation->buffer);
    if (code != 0) return kernel_failure("device free", code, context);
    clear_error();
    return ATTNGEN_OK;
}

attngen_status gpu_context_release_impl(attngen_device device, const attngen_gpu_context *gpu) {
    ATTNGEN_RETURN_IF_ERROR(require_known_device(raw_enum_value(device), "device"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(gpu, "gpu"));
    GpuBinding binding;
    ATTNGEN_RETURN_IF_ERROR(resolve_gpu_context(gpu, device, &binding));
    if (!binding.owned_by_application()) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "gpu->context is NULL: attngen's own context is never released");
    }
    install_halide_runtime_hooks();
    ATTNGEN_RETURN_IF_ERROR(release_application_context(device, binding));
    clear_error();
    return ATTNGEN_OK;
}

}  // namespace

extern "C" attngen_status attngen_gpu_context_release(attngen_device device,
                                                      const attngen_gpu_context *gpu) {
    return guard_entry_point("attngen_gpu_context_release",
                             [&] { return gpu_context_release_impl(device, gpu); });
}

extern "C" attngen_status attngen_device_alloc(attngen_device device, uint64_t bytes,
                                               uint64_t *address) {
    return guard_entry_point("attngen_device_alloc",
                             [&] { return alloc_impl(device, bytes, address); });
}

extern "C" attngen_status attngen_device_free(attngen_device device, uint64_t address) {
    return guard_entry_point("attngen_device_free", [&] { return free_impl(device, address); });
}

extern "C" attngen_status attngen_device_upload(attngen_device device, uint64_t address,
                                                const void *host, uint64_t bytes) {
    return guard_entry_point("attngen_device_upload", [&] {
        return copy_bytes(device, address, const_cast<void *>(host), bytes, true);
    });
}

extern "C" attngen_status attngen_device_download(attngen_device device, void *host,
                                                  uint64_t address, uint64_t bytes) {
    return guard_entry_point("attngen_device_download",
                             [&] { return copy_bytes(device, address, host, bytes, false); });
}
