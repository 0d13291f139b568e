// The attngen_mha handle: configuration, packed weights, and the forward entry point.
#include <attngen/attngen.h>

#include <array>
#include <cmath>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <vector>

#include "attngen_mha_forward_bf16_cpu.h"
#include "attngen_mha_forward_cpu.h"
#include "attngen_mha_forward_f16_cpu.h"
#include "attngen_mha_forward_weights_bf16_cpu.h"
#include "attngen_mha_forward_weights_cpu.h"
#include "attngen_mha_forward_weights_f16_cpu.h"
#ifdef ATTNGEN_HAVE_CUDA
#include "attngen_mha_forward_bf16_cuda.h"
#include "attngen_mha_forward_cuda.h"
#include "attngen_mha_forward_f16_cuda.h"
#include "attngen_mha_forward_weights_bf16_cuda.h"
#include "attngen_mha_forward_weights_cuda.h"
#include "attngen_mha_forward_weights_f16_cuda.h"
#endif
#ifdef ATTNGEN_HAVE_OPENCL
#include "attngen_mha_forward_bf16_opencl.h"
#include "attngen_mha_forward_f16_opencl.h"
#include "attngen_mha_forward_opencl.h"
#include "attngen_mha_forward_weights_bf16_opencl.h"
#include "attngen_mha_forward_weights_f16_opencl.h"
#include "attngen_mha_forward_weights_opencl.h"
#endif
#include "compact_upload.h"
#include "cpu_dispatch.h"
#include "device.h"
#include "errors.h"
#include "finite_scan.h"
#include "fused_forward_call.h"
#include "layout.h"
#include "mask_buffers.h"
#include "mha_config.h"
#include "mha_handle.h"
#include "nonfinite.h"
#include "packed_projection.h"
#include "staged_output.h"
#include "tensor_buffer.h"
#include "validate.h"

using namespace attngen;
using namespace attngen::rt;

namespace {

// The fused forward kernels of one device and precision. Every build of the generator has the
// same signature, whatever its target and precision (the weights' buffers carry their type).
struct MhaKernels {
    decltype(&attngen_mha_forward_cpu) plain;
    decltype(&attngen_mha_forward_weights_cpu) with_probs;  // weights_output=true
    const char *plain_name;
    const char *probs_name;
};

// A device's kernels of one precision, by the names the build gives them (suffix: cpu,
// bf16_cpu, f16_cuda, ...).
#define ATTNGEN_FORWARD_KERNELS(suffix)                                            \
    MhaKernels {                                                                   \
        attngen_mha_forward_##suffix, attngen_mha_forward_weights_##suffix,        \
            "attngen_mha_forward_" #suffix, "attngen_mha_forward_weights_" #suffix \
    }
// Indexed by attngen_precision (F32, BF16, F16).
#define ATTNGEN_FORWARD_KERNELS_BY_PRECISION(device)                             \
    std::array<MhaKernels, 3> {                                                  \
        ATTNGEN_FORWARD_KERNELS(device), ATTNGEN_FORWARD_KERNELS(bf16_##device), \
            ATTNGEN_FORWARD_KERNELS(f16_##device)                                \
    }

const MhaKernels &kernels_for(attngen_device device, attngen_precision precision) {
    static const auto cpu = ATTNGEN_FORWARD_KERNELS_BY_PRECISION(cpu);
#ifdef ATTNGEN_HAVE_CUDA
    static const auto cuda = ATTNGEN_FORWARD_KERNELS_BY_PRECISION(cuda);
    if (device == ATTNGEN_DEVICE_CUDA) return cuda[precision];
#endif
#ifdef ATTNGEN_HAVE_OPENCL
    static const auto opencl = ATTNGEN_FORWARD_KERNELS_BY_PRECISION(opencl);
    if (device == ATTNGEN_DEVICE_OPENCL) return opencl[precision];
#endif
    (void)device;  // only devices that passed gpu_interface_or_fail get here
    return cpu[precision];
}
#undef ATTNGEN_FORWARD_KERNELS_BY_PRECISION
#undef ATTNGEN_FORWARD_KERNELS

}  // namespace

static attngen_status attngen_mha_create_impl(const attngen_mha_config *config,
                                              const attngen_gpu_context *gpu, attngen_mha **out) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(config, "config"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(out, "out"));
    ResolvedConfig resolved{};
    ATTNGEN_RETURN_IF_ERROR(resolve_config(*config, &resolved));
    GpuBinding binding;
    ATTNGEN_RETURN_IF_ERROR(resolve_gpu_context(gpu, resolved.device, &binding));
    auto *m = new (std::nothrow) attngen_mha;
    if (m == nullptr) return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate the handle");
    std::unique_ptr<attngen_mha> handle(m);
    install_halide_runtime_hooks();
    if (resolved.device != ATTNGEN_DEVICE_CPU)
        ATTNGEN_RETURN_IF_ERROR(probe_device(resolved.device, binding));
    m->config = resolved;
    m->gpu_context = binding.context;
    m->gpu_queue = binding.queue;
    handle.release();
    *out = m;
    clear_error();
    return ATTNGEN_OK;
}

extern "C" void attngen_mha_destroy(attngen_mha *m) {
    if (m == nullptr) return;
    const GpuBinding gpu = m->gpu();
    if (m->projections) m->projections->device_copies.rebind(gpu);
    m->projections.reset();
    // A failure leaves the kernels loaded; there is no one to tell.
    if (gpu.owned_by_application()) (void)release_application_context(m->config.device, gpu);
    delete m;
}

static attngen_status attngen_mha_set_queue_impl(attngen_mha *m, void *queue) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(m, "m"));
    if (m->gpu_context == nullptr) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "the handle runs in attngen's own context; only a handle made by "
                    "attngen_mha_create_in_context has a queue of the application's");
    }
    if (m->config.device == ATTNGEN_DEVICE_OPENCL && queue == nullptr) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "queue is NULL: an OpenCL handle needs a command queue");
    }
    m->gpu_queue = queue;
    clear_error();
    return ATTNGEN_OK;
}

static attngen_status attngen_mha_set_weights_impl(attngen_mha *m, const float *wq, const float *wk,
                                                   const float *wv, const float *wo,
                                                   const float *bq, const float *bk,
                                                   const float *bv, const float *bo) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(m, "m"));
    const struct {
        const float *pointer;
        const char *name;
    } weights[] = {{wq, "wq"}, {wk, "wk"}, {wv, "wv"}, {wo, "wo"}};
    for (const auto &w : weights) ATTNGEN_RETURN_IF_ERROR(require_not_null(w.pointer, w.name));
    const ResolvedConfig &c = m->config;
    if (c.use_bias) {
        const struct {
            const float *pointer;
            const char *name;
        } biases[] = {{bq, "bq"}, {bk, "bk"}, {bv, "bv"}, {bo, "bo"}};
        for (const auto &b : biases) {
            if (b.pointer == nullptr) {
                return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                            std::string(b.name) + " is NULL but the config has use_bias set");
            }
        }
    } else {
        bq = bk = bv = bo = nullptr;  // documented: ignored without use_bias
    }
    const struct {
        const float *pointer;
        int64_t size;
        const char *name;
        bool bias;  // kept in float32 in every precision
    } stored[] = {{wq, c.inner() * c.d_model, "wq", false},
                  {wk, c.kv_inner() * c.kdim, "wk", false},
                  {wv, c.v_inner() * c.vdim, "wv", false},
                  {wo, c.d_model * c.out_inner(), "wo", false},
                  {bq, c.inner(), "bq", true},
                  {bk, c.kv_inner(), "bk", true},
                  {bv, c.v_inner(), "bv", true},
                  {bo, c.d_model, "bo", true}};
    // A NaN or infinite weight makes every output that reads it NaN: it is the model's fault,
    // not its data's, and refused here (the inputs' NaN reaches only the outputs it touches,
    // README "Robustness"). Found by a review: a float16 handle took +inf where it refused
    // 70000, and each later append then blamed its inputs.
    for (const auto &w : stored) {
        if (w.pointer == nullptr) continue;
        const size_t at = first_non_finite(w.pointer, size_t(w.size));
        if (at == size_t(w.size)) continue;
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT, std::string(w.name) + "[" + std::to_string(at) +
                                                        "] = " + std::to_string(w.pointer[at]) +
                                                        " is not finite; nothing was changed");
    }
    if (c.precision == ATTNGEN_PRECISION_F16) {
        for (const auto &w : stored) {
            if (w.pointer == nullptr || w.bias) continue;
            const int64_t at = first_beyond_float16(w.pointer, size_t(w.size));
            if (at >= 0) {
                return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                            std::string(w.name) + "[" + std::to_string(at) +
                                "] = " + std::to_string(w.pointer[at]) +
                                " is beyond float16's range (|w| <= 65504) of this "
                                "ATTNGEN_PRECISION_F16 handle; nothing was changed");
            }
        }
    }
    // Pack (and upload) outside the lock so forwards keep running meanwhile; swap in under it.
    auto packed = std::make_unique<ProjectionWeights>(m->gpu());
    packed->q.pack(wq, bq, int32_t(c.inner()), c.d_model, c.device, c.precision);
    packed->k.pack(wk, bk, int32_t(c.kv_inner()), c.kdim, c.device, c.precision);
    packed->v.pack(wv, bv, int32_t(c.v_inner()), c.vdim, c.device, c.precision);
    packed->o.pack(wo, bo, c.d_model, int32_t(c.out_inner()), c.device, c.precision);
    ATTNGEN_RETURN_IF_ERROR(packed->upload(c.device));
    std::unique_lock<std::shared_mutex> lock(m->projections_mutex);
    std::swap(m->projections, packed);
    lock.unlock();
    // The old weights are freed on the queue the handle has now (set_queue may have retired
    // the one they were uploaded with).
    if (packed) packed->device_copies.rebind(m->gpu());
    clear_error();
    return ATTNGEN_OK;
}

namespace {

// Whether a forward writes its output in the caller's memory, not staged (staged_output.h). The
// output projection is a forward's last stage: every input has been read before it starts. The
// output stays as it was on any failure only if nothing can fail once that stage writes, that is
// if its tasks allocate nothing: on the CPU, the direct path (kDirectMaxInFeatures) of the
// float32 and float16 kernels' AVX-512 variant and of the bfloat16 kernels' AVX512-BF16 one, and
// the bfloat16 kernels' AMX variant over whole blocks of input features (kAmxBlock). Not the
// blocked path's accumulators, the staged widened weights of the AVX2 and SSE variants and of
// the bfloat16 kernels' AVX-512 one, nor AMX's sums of a tail. WatchedHalideMalloc
// (tests/test_limits.cpp) watches every allocation of calls on each CPU variant for an output
// already written.
bool output_in_place(const ResolvedConfig &c) {
    if (c.device != ATTNGEN_DEVICE_CPU) return false;
    const bool bfloat16 = c.precision == ATTNGEN_PRECISION_BF16;
    const CpuVariant variant = cpu_kernels_variant(bfloat16);
    if (bfloat16 && variant == CpuVariant::kAmx) return c.out_inner() % kAmxBlock == 0;
    return c.out_inner() <= kDirectMaxInFeatures &&
           variant == (bfloat16 ? CpuVariant::kAvx512Bf16 : CpuVariant::kAvx512);
}

// Pointers are only checked for null here, so device addresses pass through as pointers.
// probs: the attention probabilities output (the C API's `weights`), or NULL.
attngen_status validate_forward(const attngen_mha *m, int32_t batch, int32_t q_len, int32_t kv_len,
                                const void *query, const void *key, const void *value,
                                const attngen_mask *mask, const void *out, const void *probs) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(m, "m"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(batch, "batch"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(q_len, "q_len"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(kv_len, "kv_len"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(query, "query"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(key, "key"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(value, "value"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(out, "out"));
    const ResolvedConfig &c = m->config;
    ATTNGEN_RETURN_IF_ERROR(require_addressable("query", {batch, q_len, c.d_model}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("key", {batch, kv_len, c.kdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("value", {batch, kv_len, c.vdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(
        require_addressable("the projected queries", {batch, q_len, c.inner()}, 4));
    ATTNGEN_RETURN_IF_ERROR(
        require_addressable("the projected keys", {batch, kv_len, c.kv_inner()}, 4));
    if (probs != nullptr) {
        // The weights are one buffer (on a GPU, every score is kept in device memory as well);
        // without them every kernel streams the keys through the flash algorithm.
        ATTNGEN_RETURN_IF_ERROR(
            require_addressable("weights", {batch, c.num_heads, q_len, kv_len}, 4));
    }
    return validate_mask(mask, batch, c.num_heads, q_len, kv_len);
}

// The caller's tensors of one forward call as kernel buffers.
struct ForwardTensors {
    TensorBuffer<float, 3> query, key, value;
    TensorBuffer<float, 2> out;    // the rows of all batches in one dimension, as kernels take it
    TensorBuffer<float, 4> probs;  // the attention probabilities (the C API's `weights`)

    ForwardTensors(const ResolvedConfig &c, int32_t batch, int32_t q_len, int32_t kv_len,
                   const float *query_data, const float *key_data, const float *value_data,
                   float *out_data, float *probs_data, bool with_probs)
        : query(query_data, {batch, q_len, c.d_model}),
          key(key_data, {batch, kv_len, c.kdim}),
          value(value_data, {batch, kv_len, c.vdim}),
          out(out_data, {batch * q_len, c.d_model}),
          // Without a weights output the logical shape may pass 2^31 - 1 elements (and 32-bit
          // strides): its buffer is never read, so it is empty.
          probs(probs_data, with_probs ? std::array<int32_t, 4>{batch, c.num_heads, q_len, kv_len}
                                       : std::array<int32_t, 4>{}) {}

    std::vector<halide_buffer_t *> inputs() { return {query.get(), key.get(), value.get()}; }
};

const char *kernel_name(const MhaKernels &kernels, bool with_probs) {
    return with_probs ? kernels.probs_name : kernels.plain_name;
}

int run_forward_kernel(const MhaKernels &kernels, KernelContext *context, const ResolvedConfig &c,
                       const ProjectionWeights &w, ForwardTensors &t, MaskBuffers &masks,
                       bool with_probs) {
    FusedForwardInputs in;
    in.query = t.query.get();
    in.key = t.key.get();
    in.value = t.value.get();
    in.wq = w.wq.get();
    in.wk = w.wk.get();
    in.wv = w.wv.get();
    in.wo = w.wo.get();
    in.num_heads = c.num_heads;
    in.head_dim = c.head_dim;
    in.num_kv_heads = c.num_kv_heads;
    in.v_head_dim = c.v_head_dim;
    in.rope = c.rope;
    in.rotary_dim = c.rotary_dim;
    TensorBuffer<double, 1> inv_freq(c.rope_inv_freq.data(), {int32_t(c.rope_inv_freq.size())});
    in.rope_inv_freq = inv_freq.get();
    in.scale = c.scale();
    in.masks = &masks;
    if (!with_probs) return call_fused_forward(kernels.plain, context, in, t.out.get());
    return call_fused_forward(kernels.with_probs, context, in, t.out.get(), t.probs.get());
}

}  // namespace

static attngen_status attngen_mha_forward_impl(attngen_mha *m, int32_t batch, int32_t q_len,
                                               int32_t kv_len, const float *query, const float *key,
                                               const float *value, const attngen_mask *mask,
                                               float *out, float *probs) {
    ATTNGEN_RETURN_IF_ERROR(
        validate_forward(m, batch, q_len, kv_len, query, key, value, mask, out, probs));
    std::shared_lock<std::shared_mutex> lock(m->projections_mutex);
    ATTNGEN_RETURN_IF_ERROR(require_projections(m));
    const ResolvedConfig &c = m->config;
    const bool with_probs = probs != nullptr;

    const bool on_gpu = c.device != ATTNGEN_DEVICE_CPU;
    StagedOutput staged_out(out, size_t(batch) * q_len * c.d_model, output_in_place(c));
    StagedOutput staged_probs(probs, size_t(batch) * c.num_heads * q_len * kv_len);
    ATTNGEN_RETURN_IF_ERROR(staged_out.allocate("out"));
    ATTNGEN_RETURN_IF_ERROR(staged_probs.allocate("weights"));
    const NonFiniteInputs inputs({query, 1, q_len, c.d_model}, {key, 1, kv_len, c.kdim},
                                 {value, 1, kv_len, c.vdim}, mask, batch, c.num_heads, q_len,
                                 kv_len);
    ForwardTensors t(c, batch, q_len, kv_len, inputs.q(), inputs.k(), inputs.v(), staged_out.data(),
                     staged_probs.data(), with_probs);
    MaskBuffers masks(inputs.mask(), batch, c.num_heads, q_len, kv_len);

    // On a GPU, Halide copies host-dirty inputs in; outputs come back below. Everything it
    // allocates for this call is freed on the way out, success or not.
    const GpuBinding gpu = m->gpu();
    DeviceScratch scratch(gpu);
    CompactUpload mask_upload(c.device, gpu);
    if (on_gpu) {
        for (halide_buffer_t *buf : t.inputs()) {
            buf->flags = halide_buffer_flag_host_dirty;
            scratch.track(buf);
        }
        ATTNGEN_RETURN_IF_ERROR(upload_masks(mask_upload, masks));
        scratch.track(t.out.get());
        if (with_probs) scratch.track(t.probs.get());
    }

    const MhaKernels &kernels = kernels_for(c.device, c.precision);
    KernelContext context;
    context.gpu = gpu;
    int code = run_forward_kernel(kernels, &context, c, *m->projections, t, masks, with_probs);
    if (code == 0 && on_gpu) code = halide_copy_to_host(&context, t.out.get());
    if (code == 0 && on_gpu && with_probs) code = halide_copy_to_host(&context, t.probs.get());
    if (code != 0) return kernel_failure(kernel_name(kernels, with_probs), code, context);
    inputs.poison_mha_outputs(staged_out.data(), c.d_model, staged_probs.data());
    staged_out.commit();
    staged_probs.commit();
    clear_error();
    return ATTNGEN_OK;
}

static attngen_status attngen_mha_forward_device_impl(attngen_mha *m, int32_t batch, int32_t q_len,
                                                      int32_t kv_len, uint64_t query, uint64_t key,
                                                      uint64_t value, const attngen_mask *mask,
                                                      uint64_t out, uint64_t probs) {
    const auto as_pointer = [](uint64_t address) {
        return reinterpret_cast<const void *>(uintptr_t(address));
    };
    ATTNGEN_RETURN_IF_ERROR(validate_forward(m, batch, q_len, kv_len, as_pointer(query),
                                             as_pointer(key), as_pointer(value), mask,
                                             as_pointer(out), as_pointer(probs)));
    const ResolvedConfig &c = m->config;
    if (c.device == ATTNGEN_DEVICE_CPU) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "attngen_mha_forward_device needs a handle created for CUDA or OpenCL; this "
                    "one runs on the CPU (use attngen_mha_forward)");
    }
    std::shared_lock<std::shared_mutex> lock(m->projections_mutex);
    ATTNGEN_RETURN_IF_ERROR(require_projections(m));
    const bool with_probs = probs != 0;
    const halide_device_interface_t *interface = gpu_interface_or_fail(c.device);

    // Inputs are the caller's device memory; outputs go to device scratch and are copied to
    // the caller's memory only when the kernel succeeded.
    ForwardTensors t(c, batch, q_len, kv_len, nullptr, nullptr, nullptr, nullptr, nullptr,
                     with_probs);
    ForwardTensors caller(c, batch, q_len, kv_len, nullptr, nullptr, nullptr, nullptr, nullptr,
                          with_probs);
    const GpuBinding gpu = m->gpu();
    WrappedAddresses wrapped(c.device, gpu);
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(t.query.get(), query, "query"));
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(t.key.get(), key, "key"));
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(t.value.get(), value, "value"));
    ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(caller.out.get(), out, "out"));
    if (with_probs) ATTNGEN_RETURN_IF_ERROR(wrapped.wrap(caller.probs.get(), probs, "weights"));

    MaskBuffers masks(mask, batch, c.num_heads, q_len, kv_len);
    DeviceScratch scratch(gpu);
    CompactUpload mask_upload(c.device, gpu);
    ATTNGEN_RETURN_IF_ERROR(upload_masks(mask_upload, masks));
    const MhaKernels &kernels = kernels_for(c.device, c.precision);
    KernelContext context;
    context.gpu = gpu;
    std::vector<halide_buffer_t *> outputs = {t.out.get()};
    if (with_probs) outputs.push_back(t.probs.get());
    int code = 0;
    for (halide_buffer_t *buf : outputs) {
        scratch.track(buf);
        if (code == 0) code = halide_device_malloc(&context, buf, interface);
    }
    if (code == 0) {
        code = run_forward_kernel(kernels, &context, c, *m->projections, t, masks, with_probs);
    }
    if (code == 0) code = halide_buffer_copy(&context, t.out.get(), interface, caller.out.get());
    if (code == 0 && with_probs) {
        code = halide_buffer_copy(&context, t.probs.get(), interface, caller.probs.get());
    }
    if (code != 0) return kernel_failure(kernel_name(kernels, with_probs), code, context);
    clear_error();
    return ATTNGEN_OK;
}

extern "C" attngen_status attngen_mha_forward_device(attngen_mha *m, int32_t batch, int32_t q_len,
                                                     int32_t kv_len, uint64_t query, uint64_t key,
                                                     uint64_t value, const attngen_mask *mask,
                                                     uint64_t out, uint64_t weights) {
    return guard_entry_point("attngen_mha_forward_device", [&] {
        return attngen_mha_forward_device_impl(m, batch, q_len, kv_len, query, key, value, mask,
                                               out, weights);
    });
}

extern "C" attngen_status attngen_mha_forward(attngen_mha *m, int32_t batch, int32_t q_len,
                                              int32_t kv_len, const float *query, const float *key,
                                              const float *value, const attngen_mask *mask,
                                              float *out, float *weights) {
    return guard_entry_point("attngen_mha_forward", [&] {
        return attngen_mha_forward_impl(m, batch, q_len, kv_len, query, key, value, mask, out,
                                        weights);
    });
}

extern "C" attngen_status attngen_mha_set_weights(attngen_mha *m, const float *wq, const float *wk,
                                                  const float *wv, const float *wo, const float *bq,
                                                  const float *bk, const float *bv,
                                                  const float *bo) {
    return guard_entry_point("attngen_mha_set_weights", [&] {
        return attngen_mha_set_weights_impl(m, wq, wk, wv, wo, bq, bk, bv, bo);
    });
}

extern "C" attngen_status attngen_mha_create(const attngen_mha_config *config, attngen_mha **out) {
    return guard_entry_point("attngen_mha_create",
                             [&] { return attngen_mha_create_impl(config, nullptr, out); });
}

extern "C" attngen_status attngen_mha_create_in_context(const attngen_mha_config *config,
                                                        const attngen_gpu_context *gpu,
                                                        attngen_mha **out) {
    return guard_entry_point("attngen_mha_create_in_context",
                             [&] { return attngen_mha_create_impl(config, gpu, out); });
}

extern "C" attngen_status attngen_mha_set_queue(attngen_mha *m, void *queue) {
    return guard_entry_point("attngen_mha_set_queue",
                             [&] { return attngen_mha_set_queue_impl(m, queue); });
}
