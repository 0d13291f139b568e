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
#endif

namespace {

using attngen::rt::cache_element_type;
using attngen::rt::weight_element_type;

struct Kernel {
    std::string name;
    const halide_filter_metadata_t *metadata;
    attngen_device device;
    attngen_precision precision;
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

std::vector<Kernel> linked_kernels() {
    std::vector<Kernel> kernels = {
        Kernel{"attngen_mha_forward_cpu", attngen_mha_forward_cpu_metadata(), ATTNGEN_DEVICE_CPU,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_mha_forward_bf16_cpu", attngen_mha_forward_bf16_cpu_metadata(),
               ATTNGEN_DEVICE_CPU, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_mha_forward_f16_cpu", attngen_mha_forward_f16_cpu_metadata(),
               ATTNGEN_DEVICE_CPU, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_kv_project_cpu", attngen_kv_project_cpu_metadata(), ATTNGEN_DEVICE_CPU,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_kv_project_bf16_cpu", attngen_kv_project_bf16_cpu_metadata(),
               ATTNGEN_DEVICE_CPU, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_kv_project_f16_cpu", attngen_kv_project_f16_cpu_metadata(),
               ATTNGEN_DEVICE_CPU, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_mha_decode_cpu", attngen_mha_decode_cpu_metadata(), ATTNGEN_DEVICE_CPU,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_mha_decode_bf16_cpu", attngen_mha_decode_bf16_cpu_metadata(),
               ATTNGEN_DEVICE_CPU, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_mha_decode_f16_cpu", attngen_mha_decode_f16_cpu_metadata(),
               ATTNGEN_DEVICE_CPU, ATTNGEN_PRECISION_F16},
    };
#ifdef ATTNGEN_HAVE_CUDA
    const std::vector<Kernel> cuda = {
        Kernel{"attngen_mha_forward_cuda", attngen_mha_forward_cuda_metadata(), ATTNGEN_DEVICE_CUDA,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_mha_forward_bf16_cuda", attngen_mha_forward_bf16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_mha_forward_f16_cuda", attngen_mha_forward_f16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_kv_project_cuda", attngen_kv_project_cuda_metadata(), ATTNGEN_DEVICE_CUDA,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_kv_project_bf16_cuda", attngen_kv_project_bf16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_kv_project_f16_cuda", attngen_kv_project_f16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_mha_decode_cuda", attngen_mha_decode_cuda_metadata(), ATTNGEN_DEVICE_CUDA,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_mha_decode_bf16_cuda", attngen_mha_decode_bf16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_mha_decode_f16_cuda", attngen_mha_decode_f16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_kv_store_cuda", attngen_kv_store_cuda_metadata(), ATTNGEN_DEVICE_CUDA,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_kv_store_bits16_cuda (bf16)", attngen_kv_store_bits16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_kv_store_bits16_cuda (f16)", attngen_kv_store_bits16_cuda_metadata(),
               ATTNGEN_DEVICE_CUDA, ATTNGEN_PRECISION_F16},
    };
    kernels.insert(kernels.end(), cuda.begin(), cuda.end());
#endif
#ifdef ATTNGEN_HAVE_OPENCL
    const std::vector<Kernel> opencl = {
        Kernel{"attngen_mha_forward_opencl", attngen_mha_forward_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_F32},
        Kernel{"attngen_mha_forward_bf16_opencl", attngen_mha_forward_bf16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_mha_forward_f16_opencl", attngen_mha_forward_f16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_kv_project_opencl", attngen_kv_project_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_F32},
        Kernel{"attngen_kv_project_bf16_opencl", attngen_kv_project_bf16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_kv_project_f16_opencl", attngen_kv_project_f16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_mha_decode_opencl", attngen_mha_decode_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_F32},
        Kernel{"attngen_mha_decode_bf16_opencl", attngen_mha_decode_bf16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_mha_decode_f16_opencl", attngen_mha_decode_f16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_F16},
        Kernel{"attngen_kv_store_opencl", attngen_kv_store_opencl_metadata(), ATTNGEN_DEVICE_OPENCL,
               ATTNGEN_PRECISION_F32},
        Kernel{"attngen_kv_store_bits16_opencl (bf16)", attngen_kv_store_bits16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_BF16},
        Kernel{"attngen_kv_store_bits16_opencl (f16)", attngen_kv_store_bits16_opencl_metadata(),
               ATTNGEN_DEVICE_OPENCL, ATTNGEN_PRECISION_F16},
    };
    kernels.insert(kernels.end(), opencl.begin(), opencl.end());
#endif
    return kernels;
}

bool same_type(halide_type_t a, halide_type_t b) {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

TEST(KernelTypes, WeightAndCacheBuffersAsTheKernelsDeclareThem) {
    int weights_checked = 0, caches_checked = 0;
    for (const Kernel &k : linked_kernels()) {
        SCOPED_TRACE(k.name);
        ASSERT_NE(k.metadata, nullptr);
        for (int i = 0; i < k.metadata->num_arguments; ++i) {
            const halide_filter_argument_t &a = k.metadata->arguments[i];
            if (is_weight(a.name)) {
                const halide_type_t expected = weight_element_type(k.precision, k.device);
                EXPECT_TRUE(same_type(a.type, expected))
                    << a.name << ": the kernel declares " << type_name(a.type)
                    << ", the runtime passes " << type_name(expected);
                ++weights_checked;
            } else if (is_cache_or_rows(a.name)) {
                const halide_type_t expected = cache_element_type(k.precision, k.device);
                EXPECT_TRUE(same_type(a.type, expected))
                    << a.name << ": the kernel declares " << type_name(a.type)
                    << ", the runtime passes " << type_name(expected);
                ++caches_checked;
            }
        }
    }
    // Every forward has 4 weights, every KV projection 2 and every decode 2 (times 3 precisions
    // per device); the names above must still be the generators' names.
    EXPECT_GE(weights_checked, 3 * (4 + 2 + 2));
    EXPECT_GE(caches_checked, 3 * (2 + 2));
}

}  // namespace
