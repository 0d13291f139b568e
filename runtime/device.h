// The GPU APIs of this build (CUDA, OpenCL) as Halide sees them, and the device-memory
// bookkeeping every GPU call needs. Which APIs exist is fixed at build time
// (ATTNGEN_HAVE_CUDA / ATTNGEN_HAVE_OPENCL); whether a device is present is found at run time.
#ifndef ATTNGEN_RUNTIME_DEVICE_H
#define ATTNGEN_RUNTIME_DEVICE_H

#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include "gpu_binding.h"

#include <vector>

namespace attngen::rt {

// "CPU", "CUDA", "OpenCL".
const char *device_name(attngen_device device);

// ATTNGEN_ERROR_INVALID_ARGUMENT for an unknown value. Takes the raw int (raw_enum_value in
// validate.h): a C caller may store any int in the enum, and loading an out-of-range value as
// the C++ enum type is undefined behaviour.
attngen_status require_known_device(int32_t device, const char *what);

// The largest head size (of queries and keys, and of values) a CUDA call takes: the flash
// kernel keeps a block of keys and its queries' running state in shared memory (for heads past
// kSmallFlashHead, 4 x (32 dk + 48 dv rounded up to 32 + 800) bytes in the launch Halide
// computes for schedule_flash_attention_gpu: 44 KiB at 128 and 128; smaller heads run a kernel
// of 64-key blocks, 33.9 KB at 64 and 64), and Halide 21's CUDA runtime launches
// no kernel with more than 48 KiB; one that asks for more fails with CUDA_ERROR_INVALID_VALUE
// (measured on an H200 with blocks of 64 keys at heads of 128). Which heads past 128 overflow
// depends on both sizes (dk 256 with dv 64 fits, dk = dv = 136 does not); this bound is the
// simple one that covers every pair. It holds for the default flash knobs: a build tuned to
// blocks of 64 keys or 32 queries needs more at 128 (measured with 64 keys: no launch).
constexpr int32_t kMaxCudaHeadSize = 128;

// ATTNGEN_ERROR_UNSUPPORTED, naming the limit, for a CUDA call whose head sizes pass
// kMaxCudaHeadSize; ATTNGEN_OK for any other device.
attngen_status require_device_head_sizes(attngen_device device, int32_t head_size,
                                         int32_t value_head_size);

// The Halide device interface of a GPU API this build has kernels for. Records
// ATTNGEN_ERROR_UNSUPPORTED (API not built) and returns nullptr otherwise.
const halide_device_interface_t *gpu_interface_or_fail(attngen_device device);

// The application's context and queue of an entry point (gpu may be NULL), checked against the
// device; {} for attngen's own context.
attngen_status resolve_gpu_context(const attngen_gpu_context *gpu, attngen_device device,
                                   GpuBinding *binding);

// Unloads what Halide keeps in a context the application owns (every kernel loaded there, for
// any handle or attngen_sdpa_device call; later calls load them again), so the application may
// destroy the context. ATTNGEN_ERROR_UNSUPPORTED for an API this build lacks.
attngen_status release_application_context(attngen_device device, const GpuBinding &gpu);

// Allocates and frees a small buffer on the device, in the context of `gpu`:
// ATTNGEN_ERROR_DEVICE, with the driver's words, when there is no usable device or driver.
attngen_status probe_device(attngen_device device, const GpuBinding &gpu = {});

// Points buf (its host pointer null) at device memory the caller owns, and detaches it again.
attngen_status wrap_device_address(attngen_device device, halide_buffer_t *buf, uint64_t address,
                                   const char *name, const GpuBinding &gpu = {});
void detach_device_address(attngen_device device, halide_buffer_t *buf, const GpuBinding &gpu = {});

// Buffers pointed at caller-owned device memory (wrap_device_address), detached again when
// the call ends.
class WrappedAddresses {
  public:
    WrappedAddresses(attngen_device device, const GpuBinding &gpu) : device_(device), gpu_(gpu) {}
    WrappedAddresses(const WrappedAddresses &) = delete;
    WrappedAddresses &operator=(const WrappedAddresses &) = delete;
    ~WrappedAddresses();
    attngen_status wrap(halide_buffer_t *buf, uint64_t address, const char *name);

  private:
    attngen_device device_;
    GpuBinding gpu_;
    std::vector<halide_buffer_t *> buffers_;
};

// The device address behind a buffer Halide allocated (a CUdeviceptr or cl_mem).
uint64_t device_address_of(attngen_device device, const halide_buffer_t *buf);

// Frees, when it goes out of scope, whatever device memory Halide allocated for the buffers
// of one call (inputs copied in, outputs, scratch), in the context it was allocated in.
class DeviceScratch {
  public:
    explicit DeviceScratch(const GpuBinding &gpu = {}) : gpu_(gpu) {}
    DeviceScratch(const DeviceScratch &) = delete;
    DeviceScratch &operator=(const DeviceScratch &) = delete;
    ~DeviceScratch();
    void track(halide_buffer_t *buf) { buffers_.push_back(buf); }
    // Frees in this context and queue instead (the queue the memory came with may be gone).
    void rebind(const GpuBinding &gpu) { gpu_ = gpu; }

  private:
    GpuBinding gpu_;
    std::vector<halide_buffer_t *> buffers_;
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_DEVICE_H
