// attngen_sdpa_device: attngen_sdpa_gqa's generator built for a GPU, on device addresses. Like
// attngen_mha_forward_device, inputs are wrapped without copies and outputs go to device
// scratch first, so a failed call writes nothing.
#include <attngen/attngen.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "attngen_sdpa_cpu.h"
#include "attngen_sdpa_weights_cpu.h"
#ifdef ATTNGEN_HAVE_CUDA
#include "attngen_sdpa_cuda.h"
#include "attngen_sdpa_weights_cuda.h"
#endif
#ifdef ATTNGEN_HAVE_OPENCL
#include "attngen_sdpa_opencl.h"
#include "attngen_sdpa_weights_opencl.h"
#endif
#include "compact_upload.h"
#include "device.h"
#include "errors.h"
#include "mask_buffers.h"
#include "tensor_buffer.h"
#include "validate.h"

using namespace attngen::rt;

namespace {

// Every build of the sdpa generator has the CPU build's signature.
struct SdpaKernels {
    decltype(&attngen_sdpa_cpu) plain;
    decltype(&attngen_sdpa_weights_cpu) with_probs;
    const char *plain_name;
    const char *probs_name;
};

// Null for an API this build has no kernels for (gpu_interface_or_fail has said so).
const SdpaKernels *sdpa_kernels_for(attngen_device device) {
#ifdef ATTNGEN_HAVE_CUDA
    static const SdpaKernels cuda{attngen_sdpa_cuda, attngen_sdpa_weights_cuda, "attngen_sdpa_cuda",
                                  "attngen_sdpa_weights_cuda"};
    if (device == ATTNGEN_DEVICE_CUDA) return &cuda;
#endif
#ifdef ATTNGEN_HAVE_OPENCL
    static const SdpaKernels opencl{attngen_sdpa_opencl, attngen_sdpa_weights_opencl,
                                    "attngen_sdpa_opencl", "attngen_sdpa_weights_opencl"};
    if (device == ATTNGEN_DEVICE_OPENCL) return &opencl;
#endif
    (void)device;
    return nullptr;
}

}  // namespace

static attngen_status attngen_sdpa_device_impl(attngen_device device,
                                               const attngen_gpu_context *gpu, int32_t batch,
                                               int32_t heads, int32_t kv_heads, int32_t q_len,
                                               int32_t kv_len, int32_t dk, int32_t dv, uint64_t q,
                                               uint64_t k, uint64_t v, const attngen_mask *mask,
                                               float scale, uint64_t out, uint64_t probs) {
    ATTNGEN_RETURN_IF_ERROR(require_known_device(raw_enum_value(device), "device"));
    if (device == ATTNGEN_DEVICE_CPU) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "device is CPU: attngen_sdpa_device runs on a GPU (on the CPU, "
                    "attngen_sdpa_gqa takes host pointers)");
    }
    ATTNGEN_RETURN_IF_ERROR(require_device_head_sizes(device, dk, dv));
    const halide_device_interface_t *interface = gpu_interface_or_fail(device);
    if (interface == nullptr) return ATTNGEN_ERROR_UNSUPPORTED;
    const auto as_pointer = [](uint64_t address) {
        return reinterpret_cast<const void *>(uintptr_t(address));
    };
    ATTNGEN_RETURN_IF_ERROR(validate_sdpa(batch, heads, kv_heads, q_len, kv_len, dk, dv,
                                          as_pointer(q), as_pointer(k), as_pointer(v), mask, scale,
                                          as_pointer(out), as_pointer(probs)));
    GpuBinding binding;
    ATTNGEN_RETURN_IF_ERROR(resolve_gpu_context(gpu, device, &binding));
    install_halide_runtime_hooks();
    const SdpaKernels &kernels = *sdpa_kernels_for(device);
    const bool with_probs = probs != 0;

    TensorBuffer<float, 4> q_buf(nullptr, {batch, heads, q_len, dk});
    TensorBuffer<float, 4> k_buf(nullptr, {batch, kv_heads, kv_len, dk});
    TensorBuffer<float, 4> v_buf(nullptr, {batch, kv_heads, kv_len, dv});
    TensorBuffer<float, 4> out_scratch(nullptr, {batch, heads, q_len, dv});
    TensorBuffer<float, 4> out_caller(nullptr, {batch, heads, q_len, dv});
    // Without a weights output the logical shape may pass 2^31 - 1 elements: its buffer is
    // never read, so it is empty.
    const std::array<int32_t, 4> probs_shape =
        with_probs ? std::array<int32_t, 4>{batch, heads, q_len, kv_len} : std::array<int32_t, 4>{};
    TensorBuffer<float, 4> probs_scratch(nullptr, probs_shape);
    TensorBuffer<float, 4> probs_caller(nullptr, probs_shape);
    WrappedAddresses wrapped(device, binding);
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(q_buf.get(), q, "q"));
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(k_buf.get(), k, "k"));
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(v_buf.get(), v, "v"));
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(out_caller.get(), out, "out"));
    if (with_probs) ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(probs_caller.get(), probs, "weights"));

    MaskBuffers masks(mask, batch, heads, q_len, kv_len);
    DeviceScratch scratch(binding);
    CompactUpload mask_upload(device, binding);
    ATTNGEN_RETURN_IF_ERROR(upload_masks(mask_upload, masks));
    KernelContext context;
    context.gpu = binding;
    int code = 0;
    for (halide_buffer_t *buf : {out_scratch.get(), probs_scratch.get()}) {
        if (buf == probs_scratch.get() && !with_probs) continue;
        scratch.track(buf);
        if (code == 0) code = halide_device_malloc(&context, buf, interface);
    }
    const float effective_scale = scale != 0.0f ? scale : 1.0f / std::sqrt(float(dk));
    if (code == 0 && !with_probs) {
        code = kernels.plain(&context, q_buf.get(), k_buf.get(), v_buf.get(), effective_scale,
                             masks.causal(), masks.kv_lengths(), masks.has_bool_mask(),
                             masks.bool_mask(), masks.has_additive(), masks.additive(),
                             out_scratch.get());
    } else if (code == 0) {
        code = kernels.with_probs(&context, q_buf.get(), k_buf.get(), v_buf.get(), effective_scale,
                                  masks.causal(), masks.kv_lengths(), masks.has_bool_mask(),
                                  masks.bool_mask(), masks.has_additive(), masks.additive(),
                                  out_scratch.get(), probs_scratch.get());
    }
    if (code == 0)
        code = halide_buffer_copy(&context, out_scratch.get(), interface, out_caller.get());
    if (code == 0 && with_probs) {
        code = halide_buffer_copy(&context, probs_scratch.get(), interface, probs_caller.get());
    }
    if (code != 0) {
        return kernel_failure(with_probs ? kernels.probs_name : kernels.plain_name, code, context);
    }
    clear_error();
    return ATTNGEN_OK;
}

extern "C" attngen_status attngen_sdpa_device(attngen_device device, const attngen_gpu_context *gpu,
                                              int32_t batch, int32_t heads, int32_t kv_heads,
                                              int32_t q_len, int32_t kv_len, int32_t dk, int32_t dv,
                                              uint64_t q, uint64_t k, uint64_t v,
                                              const attngen_mask *mask, float scale, uint64_t out,
                                              uint64_t weights) {
    return guard_entry_point("attngen_sdpa_device", [&] {
        return attngen_sdpa_device_impl(device, gpu, batch, heads, kv_heads, q_len, kv_len, dk, dv,
                                        q, k, v, mask, scale, out, weights);
    });
}
