// OpenCL: Halide asks halide_acquire_cl_context for the context and command queue of every call
// it makes, and halide_release_cl_context when done. Halide 21 has no setters for these (CUDA
// has), so attngen defines both: the application's context and queue where the call's
// KernelContext names them, otherwise one context and queue attngen creates on first use,
// chosen as Halide's default does (HL_OCL_PLATFORM_NAME, HL_OCL_DEVICE_TYPE, HL_GPU_DEVICE).
//
// The OpenCL entry points come from the loader Halide opened (halide_opencl_get_symbol), and
// the few types and constants below are OpenCL 1.2's, so building attngen needs no OpenCL SDK.
#include <HalideRuntimeOpenCL.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "errors.h"
#include "gpu_context_hooks.h"

extern "C" void *halide_opencl_get_symbol(void *user_context, const char *name);

namespace attngen::rt {
namespace {

using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_bitfield = uint64_t;
using cl_platform_id = struct _cl_platform_id *;
using cl_device_id = struct _cl_device_id *;
using cl_context = struct _cl_context *;
using cl_command_queue = struct _cl_command_queue *;
using cl_context_properties = intptr_t;

constexpr cl_int kClSuccess = 0;
constexpr cl_uint kClPlatformName = 0x0902;
constexpr cl_uint kClDeviceMaxComputeUnits = 0x1002;
constexpr cl_context_properties kClContextPlatform = 0x1084;
constexpr cl_bitfield kClDeviceTypeCpu = 1 << 1, kClDeviceTypeGpu = 1 << 2,
                      kClDeviceTypeAccelerator = 1 << 3, kClDeviceTypeAll = 0xFFFFFFFF;

struct OpenClApi {
    cl_int (*get_platform_ids)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (*get_platform_info)(cl_platform_id, cl_uint, size_t, void *, size_t *);
    cl_int (*get_device_ids)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *);
    cl_int (*get_device_info)(cl_device_id, cl_uint, size_t, void *, size_t *);
    cl_context (*create_context)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                 void (*)(const char *, const void *, size_t, void *), void *,
                                 cl_int *);
    cl_command_queue (*create_command_queue)(cl_context, cl_device_id, cl_bitfield, cl_int *);
    cl_int (*release_context)(cl_context);
};

int report(void *user_context, const std::string &message) {
    halide_error(user_context, ("OpenCL: " + message).c_str());
    return halide_error_code_gpu_device_error;
}

template <typename Function>
bool load(void *user_context, const char *name, Function *function) {
    *function = reinterpret_cast<Function>(halide_opencl_get_symbol(user_context, name));
    return *function != nullptr;
}

int load_api(void *user_context, OpenClApi *api) {
    const bool loaded = load(user_context, "clGetPlatformIDs", &api->get_platform_ids) &&
                        load(user_context, "clGetPlatformInfo", &api->get_platform_info) &&
                        load(user_context, "clGetDeviceIDs", &api->get_device_ids) &&
                        load(user_context, "clGetDeviceInfo", &api->get_device_info) &&
                        load(user_context, "clCreateContext", &api->create_context) &&
                        load(user_context, "clCreateCommandQueue", &api->create_command_queue) &&
                        load(user_context, "clReleaseContext", &api->release_context);
    if (loaded) return halide_error_code_success;
    return report(user_context, "the OpenCL loader lacks an OpenCL 1.2 entry point");
}

// The platform named by HL_OCL_PLATFORM_NAME (a substring of its name), else the first.
int choose_platform(void *user_context, const OpenClApi &api, cl_platform_id *platform) {
    cl_platform_id platforms[16];
    cl_uint count = 0;
    cl_int err = api.get_platform_ids(16, platforms, &count);
    if (err != kClSuccess || count == 0) {
        return report(user_context,
                      "no OpenCL platform (clGetPlatformIDs: " + std::to_string(err) + ")");
    }
    const char *wanted = halide_opencl_get_platform_name(user_context);
    if (wanted == nullptr || *wanted == '\0') {
        *platform = platforms[0];
        return halide_error_code_success;
    }
    for (cl_uint i = 0; i < count && i < 16; ++i) {
        char name[256] = {};
        if (api.get_platform_info(platforms[i], kClPlatformName, sizeof(name) - 1, name, nullptr) ==
                kClSuccess &&
            std::strstr(name, wanted) != nullptr) {
            *platform = platforms[i];
            return halide_error_code_success;
        }
    }
    return report(user_context, std::string("no OpenCL platform named like '") + wanted + "'");
}

// The device of HL_OCL_DEVICE_TYPE (cpu, gpu, acc; any when unset) at index HL_GPU_DEVICE,
// or with the most compute units when no index is set.
int choose_device(void *user_context, const OpenClApi &api, cl_platform_id platform,
                  cl_device_id *device) {
    cl_bitfield type = 0;
    if (const char *wanted = halide_opencl_get_device_type(user_context)) {
        if (std::strstr(wanted, "cpu")) type |= kClDeviceTypeCpu;
        if (std::strstr(wanted, "gpu")) type |= kClDeviceTypeGpu;
        if (std::strstr(wanted, "acc")) type |= kClDeviceTypeAccelerator;
    }
    if (type == 0) type = kClDeviceTypeAll;
    cl_device_id devices[64];
    cl_uint count = 0;
    cl_int err = api.get_device_ids(platform, type, 64, devices, &count);
    if (err != kClSuccess || count == 0) {
        return report(user_context, "no OpenCL device of the requested type (clGetDeviceIDs: " +
                                        std::to_string(err) + ")");
    }
    count = count < 64 ? count : 64;
    const int index = halide_get_gpu_device(user_context);
    if (index >= 0) {
        if (cl_uint(index) >= count) {
            return report(user_context, "HL_GPU_DEVICE " + std::to_string(index) + " but only " +
                                            std::to_string(count) + " OpenCL devices");
        }
        *device = devices[index];
        return halide_error_code_success;
    }
    cl_uint best_units = 0;
    *device = devices[0];
    for (cl_uint i = 0; i < count; ++i) {
        cl_uint units = 0;
        if (api.get_device_info(devices[i], kClDeviceMaxComputeUnits, sizeof(units), &units,
                                nullptr) == kClSuccess &&
            units > best_units) {
            best_units = units;
            *device = devices[i];
        }
    }
    return halide_error_code_success;
}

int create_default_context(void *user_context, cl_context *context, cl_command_queue *queue) {
    OpenClApi api{};
    if (int code = load_api(user_context, &api)) return code;
    cl_platform_id platform = nullptr;
    if (int code = choose_platform(user_context, api, &platform)) return code;
    cl_device_id device = nullptr;
    if (int code = choose_device(user_context, api, platform, &device)) return code;
    const cl_context_properties properties[] = {
        kClContextPlatform, reinterpret_cast<cl_context_properties>(platform), 0};
    cl_int err = kClSuccess;
    cl_context created = api.create_context(properties, 1, &device, nullptr, nullptr, &err);
    if (err != kClSuccess || created == nullptr) {
        return report(user_context, "clCreateContext failed: " + std::to_string(err));
    }
    cl_command_queue created_queue = api.create_command_queue(created, device, 0, &err);
    if (err != kClSuccess || created_queue == nullptr) {
        api.release_context(created);
        return report(user_context, "clCreateCommandQueue failed: " + std::to_string(err));
    }
    *context = created;
    *queue = created_queue;
    return halide_error_code_success;
}

// Halide requires acquire to block while another acquire is unreleased (a command queue is not
// safe to share between threads in OpenCL 1.0), and calls release even after acquire failed.
std::mutex runtime_lock;
thread_local bool holds_runtime_lock = false;
cl_context default_context = nullptr;      // guarded by runtime_lock; lives as long as the
cl_command_queue default_queue = nullptr;  // process, as Halide's own default does

}  // namespace

void link_opencl_context_hooks() {}

}  // namespace attngen::rt

using namespace attngen::rt;

extern "C" int halide_acquire_cl_context(void *user_context, cl_context *context,
                                         cl_command_queue *queue, bool create) {
    runtime_lock.lock();
    holds_runtime_lock = true;
    const GpuBinding *gpu =
        user_context == nullptr ? nullptr : &static_cast<KernelContext *>(user_context)->gpu;
    if (gpu != nullptr && gpu->owned_by_application()) {
        *context = static_cast<cl_context>(gpu->context);
        *queue = static_cast<cl_command_queue>(gpu->queue);
        return halide_error_code_success;
    }
    if (default_context == nullptr && create) {
        if (int code = create_default_context(user_context, &default_context, &default_queue)) {
            holds_runtime_lock = false;
            runtime_lock.unlock();
            return code;
        }
    }
    *context = default_context;
    *queue = default_queue;
    return halide_error_code_success;
}

extern "C" int halide_release_cl_context(void *) {
    if (holds_runtime_lock) {
        holds_runtime_lock = false;
        runtime_lock.unlock();
    }
    return halide_error_code_success;
}
