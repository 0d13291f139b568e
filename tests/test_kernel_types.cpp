// The element types the runtime gives weight, cache and row buffers (runtime/tensor_buffer.h)
// against the types each linked kernel declares, read from the kernels' metadata: a mismatch is
// an error from Halide at the kernel's first call, which for the GPU kernels happens only where a
// GPU runs them. On 2026-11-28 an H200 was the first to see float16 caches on CUDA refused by
// the store kernel ("Output buffer k_cache has type uint16 but type of the buffer passed in is
// float16"); this test, which needs no GPU, fails on that build.
#include <HalideRuntime.h>
#include <attngen/attngen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "attngen_kv_project_bf16_cpu.h"
#include "attngen_kv_project_cpu.h"
#include "attngen_kv_project_f16_cpu.h"
#include "attngen_mha_decode_bf16_cpu.h"
#include "attngen_mha_decode_cpu.h"
#include "attngen_mha_decode_f16_cpu.h"
#include "attngen_mha_forward_bf16_cpu.h"
#include "attngen_mha_forward_cpu.h"
#include "attngen_mha_forward_f16_cpu.h"
#include "attngen_mha_forward_weights_bf16_cpu.h"
#include "attngen_mha_forward_weights_cpu.h"
#include "attngen_mha_forward_weights_f16_cpu.h"
#include "tensor_buffer.h"
#ifdef ATTNGEN_HAVE_CUDA
#include "attngen_kv_project_bf16_cuda.h"
#include "attngen_kv_project_cuda.h"
#include "attngen_kv_project_f16_cuda.h"
#include "attngen_kv_store_bits16_cuda.h"
#include "attngen_kv_store_cuda.h"
#include "attngen_mha_decode_bf16_cuda.h"
#include "attngen_mha_decode_cuda.h"
#include "attngen_mha_decode_f16_cuda.h"
#include "attngen_mha_forward_bf16_cuda.h"
#include "attngen_mha_forward_cuda.h"
#include "attngen_mha_forward_f16_cuda.h"
#include "attngen_mha_forward_weights_bf16_cuda.h"
#include "attngen_mha_forward_weights_cuda.h"
#include "attngen_mha_forward_weights_f16_cuda.h"
#endif
#ifdef ATTNGEN_HAVE_OPENCL
#include "attngen_kv_project_bf16_opencl.h"
#include "attngen_kv_project_f16_opencl.h"
#include "attngen_kv_project_opencl.h"
#include "attngen_kv_store_bits16_opencl.h"
#include "attngen_kv_store_opencl.h"
#include "attngen_mha_decode_bf16_opencl.h"
#include "attngen_mha_decode_f16_opencl.h"
#include "attngen_mha_decode_opencl.h"
#include "attngen_mha_forward_bf16_opencl.h"
#include "attngen_mha_forward_f16_opencl.h"
#include "attngen_mha_forward_opencl.h"
#include "attngen_mha_forward_weights_bf16_opencl.h"
#include "attngen_mha_forward_weights_f16_opencl.h"
#include "attngen_mha_forward_weights_opencl.h"
#endif

namespace {

using attngen::rt::cache_element_type;
using attngen::rt::weight_element_type;

struct Kernel {
    std::string name;
    const halide_filter_metadata_t *metadata;
    attngen_device device;
    attngen_precision precision;
    // How many of its arguments are weights (wq_t ... wo_t) and how many caches or rows: a
    // renamed argument would otherwise go unchecked.
    int weights, caches;
};

bool is_weight(const char *argument) {
    for (const char *w : {"wq_t", "wk_t", "wv_t", "wo_t"}) {
        if (std::strcmp(argument, w) == 0) return true;
    }
    return false;
}

bool is_cache_or_rows(const char *argument) {
    for (const char *c : {"k_cache", "v_cache", "k_rows", "v_rows"}) {
        if (std::strcmp(argument, c) == 0) return true;
    }
    return false;
}

std::string type_name(halide_type_t t) {
    static const char *const codes[] = {"int", "uint", "float", "handle", "bfloat"};
    return std::string(t.code < 5 ? codes[t.code] : "?") + std::to_string(t.bits);
}

// clang-format off
// A generator's kernels for one device in the three precisions: <prefix><device>,
// <prefix>bf16_<device>, <prefix>f16_<device>, each with `weights` weights and `caches` caches
// or rows among its arguments.
#define ATTNGEN_THREE_PRECISIONS(prefix, device_suffix, device, weights, caches)                \
    Kernel{#prefix #device_suffix, prefix##device_suffix##_metadata(), device,                  \
           ATTNGEN_PRECISION_F32, weights, caches},                                             \
    Kernel{#prefix "bf16_" #device_suffix, prefix##bf16_##device_suffix##_metadata(), device,   \
           ATTNGEN_PRECISION_BF16, weights, caches},                                            \
    Kernel{#prefix "f16_" #device_suffix, prefix##f16_##device_suffix##_metadata(), device,     \
           ATTNGEN_PRECISION_F16, weights, caches}
// The kernels the runtime calls with a handle's weights or a cache's buffers on one device.
#define ATTNGEN_DEVICE_KERNELS(device_suffix, device)                                           \
    ATTNGEN_THREE_PRECISIONS(attngen_mha_forward_, device_suffix, device, 4, 0),                \
    ATTNGEN_THREE_PRECISIONS(attngen_mha_forward_weights_, device_suffix, device, 4, 0),        \
    ATTNGEN_THREE_PRECISIONS(attngen_kv_project_, device_suffix, device, 2, 2),                 \
    ATTNGEN_THREE_PRECISIONS(attngen_mha_decode_, device_suffix, device, 2, 2)
// A GPU's scatter into its cache; the 16-bit formats' serves both.
#define ATTNGEN_STORE_KERNELS(device_suffix, device)                                            \
    Kernel{"attngen_kv_store_" #device_suffix, attngen_kv_store_##device_suffix##_metadata(),   \
           device, ATTNGEN_PRECISION_F32, 0, 4},                                                \
    Kernel{"attngen_kv_store_bits16_" #device_suffix " (bf16)",                                 \
           attngen_kv_store_bits16_##device_suffix##_metadata(), device, ATTNGEN_PRECISION_BF16, \
           0, 4},                                                                               \
    Kernel{"attngen_kv_store_bits16_" #device_suffix " (f16)",                                  \
           attngen_kv_store_bits16_##device_suffix##_metadata(), device, ATTNGEN_PRECISION_F16, \
           0, 4}
// clang-format on

std::vector<Kernel> linked_kernels() {
    return {
        ATTNGEN_DEVICE_KERNELS(cpu, ATTNGEN_DEVICE_CPU),
#ifdef ATTNGEN_HAVE_CUDA
        ATTNGEN_DEVICE_KERNELS(cuda, ATTNGEN_DEVICE_CUDA),
        ATTNGEN_STORE_KERNELS(cuda, ATTNGEN_DEVICE_CUDA),
#endif
#ifdef ATTNGEN_HAVE_OPENCL
        ATTNGEN_DEVICE_KERNELS(opencl, ATTNGEN_DEVICE_OPENCL),
        ATTNGEN_STORE_KERNELS(opencl, ATTNGEN_DEVICE_OPENCL),
#endif
    };
}

bool same_type(halide_type_t a, halide_type_t b) {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

TEST(KernelTypes, WeightAndCacheBuffersAsTheKernelsDeclareThem) {
    for (const Kernel &k : linked_kernels()) {
        SCOPED_TRACE(k.name);
        ASSERT_NE(k.metadata, nullptr);
        int weights = 0, caches = 0;
        for (int i = 0; i < k.metadata->num_arguments; ++i) {
            const halide_filter_argument_t &a = k.metadata->arguments[i];
            if (is_weight(a.name)) {
                const halide_type_t expected = weight_element_type(k.precision, k.device);
                EXPECT_TRUE(same_type(a.type, expected))
                    << a.name << ": the kernel declares " << type_name(a.type)
                    << ", the runtime passes " << type_name(expected);
                ++weights;
            } else if (is_cache_or_rows(a.name)) {
                const halide_type_t expected = cache_element_type(k.precision, k.device);
                EXPECT_TRUE(same_type(a.type, expected))
                    << a.name << ": the kernel declares " << type_name(a.type)
                    << ", the runtime passes " << type_name(expected);
                ++caches;
            }
        }
        EXPECT_EQ(weights, k.weights) << "weight arguments found by name";
        EXPECT_EQ(caches, k.caches) << "cache and row arguments found by name";
    }
}

}  // namespace
