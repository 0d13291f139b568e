// attngen_kv_cache: projected, rotated keys and values per item, appended step by step, and the
// cached forward that attends to them (attngen_mha_forward_cached).
//
// Layout, chosen for the decode kernel: keys [item][kv_head][blocks][head_dim][kCacheKeyBlock]
// (positions innermost, so a block of keys is a run of whole vectors for the scores), values
// [item][kv_head][panels][max_len][kCacheValuePanel] (a run of positions per panel of features,
// for the probs x values tiles; the last panel padded with zeros). Elements are of the handle's
// precision: float32, or the bits of bfloat16 or float16. A GPU handle's cache has the same
// layout in device memory (kv_cache_device.h).
#include <attngen/attngen.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <shared_mutex>
#include <string>
#include <vector>

#include "attngen_kv_project_bf16_cpu.h"
#include "attngen_kv_project_cpu.h"
#include "attngen_kv_project_f16_cpu.h"
#include "attngen_mha_decode_bf16_cpu.h"
#include "attngen_mha_decode_cpu.h"
#include "attngen_mha_decode_f16_cpu.h"
#ifdef ATTNGEN_HAVE_CUDA
#include "attngen_kv_project_bf16_cuda.h"
#include "attngen_kv_project_cuda.h"
#include "attngen_kv_project_f16_cuda.h"
#include "attngen_kv_store_bits16_cuda.h"
#include "attngen_kv_store_cuda.h"
#include "attngen_mha_decode_bf16_cuda.h"
#include "attngen_mha_decode_cuda.h"
#include "attngen_mha_decode_f16_cuda.h"
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
#endif
#include "device.h"
#include "errors.h"
#include "finite_scan.h"
#include "half_precision.h"
#include "huge_pages.h"
#include "kv_cache_device.h"
#include "layout.h"
#include "mha_handle.h"
#include "staged_output.h"
#include "tensor_buffer.h"
#include "validate.h"

using attngen::kCacheKeyBlock;
using attngen::kCacheValuePanel;
using namespace attngen::rt;

struct attngen_kv_cache {
    const attngen_mha *owner;
    uint64_t owner_serial;  // attngen_mha::serial: the owner, not a handle at its old address
    int32_t max_batch, max_len;
    int32_t blocks;  // of kCacheKeyBlock positions, covering max_len
    int32_t kv_heads, head_dim, v_head_dim;
    int32_t value_panels;  // of kCacheValuePanel features, covering v_head_dim
    attngen_precision precision;
    size_t element;  // bytes per stored element
    // On the CPU; empty for a GPU handle's cache, whose elements are on the device.
    attngen::rt::HugePageBytes keys;  // [max_batch][kv_heads][blocks][head_dim][kCacheKeyBlock]
    // [max_batch][kv_heads][value_panels][max_len][kCacheValuePanel]
    attngen::rt::HugePageBytes values;
    std::unique_ptr<attngen::rt::DeviceKvStorage> on_device;
    std::vector<int32_t> lengths;

    ~attngen_kv_cache() {
        if (on_device) on_device->rebind(owner->gpu());
    }

    size_t key_offset(int32_t item, int32_t hk, int32_t d, int32_t position) const {
        const size_t block = (size_t(item) * kv_heads + hk) * blocks + position / kCacheKeyBlock;
        return (block * head_dim + d) * kCacheKeyBlock + position % kCacheKeyBlock;
    }
    size_t value_offset(int32_t item, int32_t hk, int32_t c, int32_t position) const {
        const size_t panel = (size_t(item) * kv_heads + hk) * value_panels + c / kCacheValuePanel;
        return (panel * max_len + position) * kCacheValuePanel + c % kCacheValuePanel;
    }
    std::array<int32_t, 5> value_shape() const {
        return {max_batch, kv_heads, value_panels, max_len, kCacheValuePanel};
    }
    std::array<int32_t, 5> key_shape() const {
        return {max_batch, kv_heads, blocks, head_dim, kCacheKeyBlock};
    }
};

namespace {

// The cache kernels of one device and precision; every build of a generator has the same
// signature. store: the scatter of appended rows into a GPU cache (null on the CPU, which
// copies them).
using StoreKernel = int (*)(void const *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                            halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
struct CacheKernels {
    decltype(&attngen_kv_project_cpu) project;
    decltype(&attngen_mha_decode_cpu) decode;
    StoreKernel store;
    const char *project_name, *decode_name, *store_name;
};

#define ATTNGEN_CACHE_KERNELS(suffix, store_kernel)                                     \
    CacheKernels {                                                                      \
        attngen_kv_project_##suffix, attngen_mha_decode_##suffix, store_kernel,         \
            "attngen_kv_project_" #suffix, "attngen_mha_decode_" #suffix, #store_kernel \
    }
// Indexed by attngen_precision (F32, BF16, F16); the 16-bit formats share a scatter.
#define ATTNGEN_CACHE_KERNELS_BY_PRECISION(device, f32_store, bits16_store) \
    std::array<CacheKernels, 3> {                                           \
        ATTNGEN_CACHE_KERNELS(device, f32_store),                           \
            ATTNGEN_CACHE_KERNELS(bf16_##device, bits16_store),             \
            ATTNGEN_CACHE_KERNELS(f16_##device, bits16_store)               \
    }

const CacheKernels &cache_kernels(attngen_device device, attngen_precision precision) {
    static const auto cpu = ATTNGEN_CACHE_KERNELS_BY_PRECISION(cpu, nullptr, nullptr);
#ifdef ATTNGEN_HAVE_CUDA
    static const auto cuda = ATTNGEN_CACHE_KERNELS_BY_PRECISION(cuda, attngen_kv_store_cuda,
                                                                attngen_kv_store_bits16_cuda);
    if (device == ATTNGEN_DEVICE_CUDA) return cuda[precision];
#endif
#ifdef ATTNGEN_HAVE_OPENCL
    static const auto opencl = ATTNGEN_CACHE_KERNELS_BY_PRECISION(opencl, attngen_kv_store_opencl,
                                                                  attngen_kv_store_bits16_opencl);
    if (device == ATTNGEN_DEVICE_OPENCL) return opencl[precision];
#endif
    (void)device;  // a GPU handle exists only for a device with kernels
    return cpu[precision];
}
#undef ATTNGEN_CACHE_KERNELS_BY_PRECISION
#undef ATTNGEN_CACHE_KERNELS

// Stored elements (any precision) as a kernel buffer: Halide strides count elements, so the
// bytes' pointer with the elements' type describes them.
template <int N, typename Bytes>
TensorBuffer<uint8_t, N> stored_buffer(const Bytes &bytes, attngen_device device,
                                       attngen_precision p, const std::array<int32_t, N> &shape) {
    return TensorBuffer<uint8_t, N>(bytes.data(), shape, {}, cache_element_type(p, device));
}

// The cache keeps no NaN or infinity: a stored one would reach every later step of its item,
// and kernels multiply the values of masked positions by probability 0. Finite inputs may still
// project to one (beyond float16's 65504, or past float32's range), found here in the projected
// rows before anything is appended.
attngen_status require_finite_rows(const std::vector<uint8_t> &rows, attngen_precision p,
                                   const char *what) {
    bool finite;
    if (p == ATTNGEN_PRECISION_F32) {
        finite = all_finite_parallel(reinterpret_cast<const float *>(rows.data()), rows.size() / 4);
    } else {
        finite = all_finite_16_parallel(
            reinterpret_cast<const uint16_t *>(rows.data()), rows.size() / 2,
            p == ATTNGEN_PRECISION_F16 ? kFloat16Exponent : kBfloat16Exponent);
    }
    if (finite) return ATTNGEN_OK;
    if (p == ATTNGEN_PRECISION_F16) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    std::string("a projected ") + what +
                        " is beyond float16's range (|x| <= 65504) of this "
                        "ATTNGEN_PRECISION_F16 cache; nothing was appended");
    }
    return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                std::string("a projected ") + what +
                    " is not finite (the inputs' projection overflows); nothing was appended");
}

attngen_status require_cache_of(const attngen_mha *m, const attngen_kv_cache *c) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(m, "m"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(c, "c"));
    if (c->owner != m || c->owner_serial != m->serial) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "the cache was created from another handle (or from one destroyed since); a "
                    "cache is bound to the handle it was created from");
    }
    return ATTNGEN_OK;
}

// items: NULL for 0..batch-1, or batch distinct item numbers below max_batch. Fills *resolved.
attngen_status resolve_items(const attngen_kv_cache *c, int32_t batch, const int32_t *items,
                             std::vector<int32_t> *resolved) {
    ATTNGEN_RETURN_IF_ERROR(require_positive(batch, "batch"));
    if (batch > c->max_batch) {
        return fail(ATTNGEN_ERROR_SHAPE, "batch (" + std::to_string(batch) +
                                             ") exceeds the cache's max_batch (" +
                                             std::to_string(c->max_batch) + ")");
    }
    resolved->resize(batch);
    std::vector<bool> seen(c->max_batch, false);
    for (int32_t b = 0; b < batch; ++b) {
        const int32_t item = items ? items[b] : b;
        if (item < 0 || item >= c->max_batch) {
            return fail(ATTNGEN_ERROR_INVALID_ARGUMENT, "items[" + std::to_string(b) +
                                                            "] = " + std::to_string(item) +
                                                            " is not an item of this cache (0.." +
                                                            std::to_string(c->max_batch - 1) + ")");
        }
        if (seen[item]) {
            return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                        "items[" + std::to_string(b) + "] = " + std::to_string(item) +
                            " appears twice; the items of one call must be distinct");
        }
        seen[item] = true;
        (*resolved)[b] = item;
    }
    return ATTNGEN_OK;
}

// Inputs with NaN or infinity are refused up front (require_finite_rows says why). Scanned in
// parallel chunks first; the element is looked for only in an input that holds one.
attngen_status require_finite(const float *x, size_t n, const char *name) {
    const size_t i = first_non_finite(x, n);
    if (i == n) return ATTNGEN_OK;
    return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                std::string(name) + " holds a non-finite value at element " + std::to_string(i));
}

// Appends on the CPU: row block b of k_rows [batch][kv_heads][head_dim][len] and v_rows
// [batch][kv_heads][len][v_head_dim] to item item_of[b] at position first[b].
// Copies `count` runs of `bytes` bytes, each `to_stride` and `from_stride` bytes past the one
// before. A decoding step appends one position, a run of one element per feature: copied
// inline, where a memcpy call per element was most of a GPT-2 step's append outside its kernel.
void copy_runs(uint8_t *to, size_t to_stride, const uint8_t *from, size_t from_stride,
               int32_t count, size_t bytes) {
    const auto each = [&](auto copy) {
        for (int32_t i = 0; i < count; ++i) copy(to + i * to_stride, from + i * from_stride);
    };
    if (bytes == 4) {
        each([](uint8_t *t, const uint8_t *f) { std::memcpy(t, f, 4); });
    } else if (bytes == 2) {
        each([](uint8_t *t, const uint8_t *f) { std::memcpy(t, f, 2); });
    } else {
        each([bytes](uint8_t *t, const uint8_t *f) { std::memcpy(t, f, bytes); });
    }
}

void copy_rows_into_cache(attngen_kv_cache *c, const std::vector<int32_t> &item_of,
                          const std::vector<int32_t> &first, int32_t len,
                          const std::vector<uint8_t> &k_rows, const std::vector<uint8_t> &v_rows) {
    const size_t element = c->element;
    for (size_t b = 0; b < item_of.size(); ++b) {
        const int32_t item = item_of[b], n = first[b];
        for (int32_t hk = 0; hk < c->kv_heads; ++hk) {
            const uint8_t *keys = &k_rows[(b * c->kv_heads + hk) * c->head_dim * len * element];
            // Runs of positions within one block of the cache are contiguous; feature d of a
            // run lies kCacheKeyBlock elements past feature d - 1 there, and len in the rows.
            for (int32_t t = 0; t < len;) {
                const int32_t position = n + t;
                const int32_t run = std::min(len - t, kCacheKeyBlock - position % kCacheKeyBlock);
                copy_runs(&c->keys[c->key_offset(item, hk, 0, position) * element],
                          kCacheKeyBlock * element, keys + size_t(t) * element, len * element,
                          c->head_dim, size_t(run) * element);
                t += run;
            }
            // A panel of a row is a run; a panel's positions lie v_head_dim elements apart in
            // the rows and kCacheValuePanel in the cache.
            const uint8_t *values = &v_rows[(b * c->kv_heads + hk) * len * c->v_head_dim * element];
            for (int32_t panel = 0; panel < c->value_panels; ++panel) {
                const int32_t first_feature = panel * kCacheValuePanel;
                const int32_t run = std::min(kCacheValuePanel, c->v_head_dim - first_feature);
                copy_runs(&c->values[c->value_offset(item, hk, first_feature, n) * element],
                          kCacheValuePanel * element, values + size_t(first_feature) * element,
                          size_t(c->v_head_dim) * element, len, size_t(run) * element);
            }
        }
    }
}

}  // namespace

static attngen_status attngen_kv_cache_create_impl(const attngen_mha *m, int32_t max_batch,
                                                   int32_t max_len, attngen_kv_cache **out) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(m, "m"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(out, "out"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(max_batch, "max_batch"));
    ATTNGEN_RETURN_IF_ERROR(require_positive(max_len, "max_len"));
    const ResolvedConfig &cfg = m->config;
    // In 64 bits: max_len may be INT32_MAX (the fuzzer found the 32-bit sum's overflow).
    const auto blocks = int32_t((int64_t(max_len) + kCacheKeyBlock - 1) / kCacheKeyBlock);
    const int32_t value_panels = (cfg.v_head_dim + kCacheValuePanel - 1) / kCacheValuePanel;
    // In the elements the cache stores: a 16-bit cache holds twice the positions of a float32
    // one within what a kernel can address.
    const int64_t element = element_bytes(cfg.precision);
    ATTNGEN_RETURN_IF_ERROR(require_addressable(
        "the cache's keys", {max_batch, cfg.num_kv_heads, blocks, cfg.head_dim, kCacheKeyBlock},
        element));
    ATTNGEN_RETURN_IF_ERROR(require_addressable(
        "the cache's values",
        {max_batch, cfg.num_kv_heads, value_panels, max_len, kCacheValuePanel}, element));
    std::unique_ptr<attngen_kv_cache> c(new (std::nothrow) attngen_kv_cache);
    if (!c) return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate the cache");
    c->owner = m;
    c->owner_serial = m->serial;
    c->max_batch = max_batch;
    c->max_len = max_len;
    c->blocks = blocks;
    c->kv_heads = cfg.num_kv_heads;
    c->head_dim = cfg.head_dim;
    c->v_head_dim = cfg.v_head_dim;
    c->value_panels = value_panels;
    c->precision = cfg.precision;
    c->element = size_t(element);
    install_halide_runtime_hooks();
    const bool on_cpu = cfg.device == ATTNGEN_DEVICE_CPU;
    try {
        c->lengths.assign(max_batch, 0);
        if (on_cpu) {
            // Zero bytes are +0 in every precision.
            c->keys.assign(size_t(max_batch) * cfg.num_kv_heads * blocks * cfg.head_dim *
                               kCacheKeyBlock * c->element,
                           0);
            c->values.assign(size_t(max_batch) * cfg.num_kv_heads * value_panels * max_len *
                                 kCacheValuePanel * c->element,
                             0);
        }
    } catch (const std::bad_alloc &) {
        return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate a cache of " +
                                                     std::to_string(max_batch) + " items of " +
                                                     std::to_string(max_len) + " positions");
    }
    if (!on_cpu) {
        ATTNGEN_RETURN_IF_ERROR(
            DeviceKvStorage::create(cfg.device, m->gpu(), c->key_shape(), c->value_shape(),
                                    cache_element_type(cfg.precision, cfg.device), &c->on_device));
    }
    *out = c.release();
    clear_error();
    return ATTNGEN_OK;
}

static attngen_status attngen_kv_cache_lengths_impl(const attngen_kv_cache *c, int32_t *lengths) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(c, "c"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(lengths, "lengths"));
    std::copy(c->lengths.begin(), c->lengths.end(), lengths);
    clear_error();
    return ATTNGEN_OK;
}

static attngen_status attngen_kv_cache_reset_impl(attngen_kv_cache *c, int32_t item) {
    ATTNGEN_RETURN_IF_ERROR(require_not_null(c, "c"));
    if (item < -1 || item >= c->max_batch) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "item " + std::to_string(item) + " is neither -1 (every item) nor an item " +
                        "of this cache (0.." + std::to_string(c->max_batch - 1) + ")");
    }
    if (item == -1) {
        std::fill(c->lengths.begin(), c->lengths.end(), 0);
    } else {
        c->lengths[item] = 0;
    }
    clear_error();
    return ATTNGEN_OK;
}

static attngen_status attngen_kv_cache_append_impl(attngen_mha *m, attngen_kv_cache *c,
                                                   int32_t batch, const int32_t *items, int32_t len,
                                                   const float *key, const float *value) {
    ATTNGEN_RETURN_IF_ERROR(require_cache_of(m, c));
    std::vector<int32_t> item_of;
    ATTNGEN_RETURN_IF_ERROR(resolve_items(c, batch, items, &item_of));
    ATTNGEN_RETURN_IF_ERROR(require_positive(len, "len"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(key, "key"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(value, "value"));
    const ResolvedConfig &cfg = m->config;
    ATTNGEN_RETURN_IF_ERROR(require_addressable("key", {batch, len, cfg.kdim}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_addressable("value", {batch, len, cfg.vdim}, 4));
    for (int32_t b = 0; b < batch; ++b) {
        const int32_t n = c->lengths[item_of[b]];
        if (int64_t(n) + len > c->max_len) {
            return fail(ATTNGEN_ERROR_SHAPE,
                        "item " + std::to_string(item_of[b]) + " holds " + std::to_string(n) +
                            " positions; " + std::to_string(len) + " more pass max_len (" +
                            std::to_string(c->max_len) + "); nothing was appended");
        }
    }
    ATTNGEN_RETURN_IF_ERROR(require_finite(key, size_t(batch) * len * cfg.kdim, "key"));
    // Self-attention may pass one tensor as both (the decoding steps of a decoder do): then it
    // is scanned once.
    if (value != key || cfg.vdim != cfg.kdim) {
        ATTNGEN_RETURN_IF_ERROR(require_finite(value, size_t(batch) * len * cfg.vdim, "value"));
    }

    std::shared_lock<std::shared_mutex> lock(m->projections_mutex);
    ATTNGEN_RETURN_IF_ERROR(require_projections(m));
    const ProjectionWeights &w = *m->projections;
    const size_t element = c->element;
    std::vector<uint8_t> k_rows, v_rows;
    std::vector<int32_t> first(batch);
    try {
        k_rows.resize(size_t(batch) * cfg.num_kv_heads * cfg.head_dim * len * element);
        v_rows.resize(size_t(batch) * cfg.num_kv_heads * len * cfg.v_head_dim * element);
    } catch (const std::bad_alloc &) {
        return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, "cannot allocate the projected rows");
    }
    for (int32_t b = 0; b < batch; ++b) first[b] = c->lengths[item_of[b]];
    TensorBuffer<float, 3> key_buf(key, {batch, len, cfg.kdim});
    TensorBuffer<float, 3> value_buf(value, {batch, len, cfg.vdim});
    TensorBuffer<double, 1> inv_freq(cfg.rope_inv_freq.data(), {int32_t(cfg.rope_inv_freq.size())});
    TensorBuffer<int32_t, 1> first_buf(first.data(), {batch});
    TensorBuffer<int32_t, 1> items_buf(item_of.data(), {batch});
    auto k_buf = stored_buffer<4>(k_rows, cfg.device, c->precision,
                                  {batch, cfg.num_kv_heads, cfg.head_dim, len});
    auto v_buf = stored_buffer<4>(v_rows, cfg.device, c->precision,
                                  {batch, cfg.num_kv_heads, len, cfg.v_head_dim});
    const bool on_gpu = c->on_device != nullptr;
    KernelContext context;
    context.gpu = m->gpu();
    // On a GPU, Halide copies the host inputs in; whatever it allocates for this call is freed
    // on the way out, success or not.
    DeviceScratch scratch(context.gpu);
    if (on_gpu) {
        for (halide_buffer_t *buf :
             {key_buf.get(), value_buf.get(), first_buf.get(), items_buf.get()}) {
            buf->flags = halide_buffer_flag_host_dirty;
            scratch.track(buf);
        }
        scratch.track(k_buf.get());
        scratch.track(v_buf.get());
    }
    const CacheKernels &kernels = cache_kernels(cfg.device, c->precision);
    int code =
        kernels.project(&context, key_buf.get(), value_buf.get(), w.wk->weight(), w.wv->weight(),
                        w.wk->bias.get(), w.wv->bias.get(), cfg.head_dim, cfg.v_head_dim, cfg.rope,
                        cfg.rotary_dim, inv_freq.get(), first_buf.get(), k_buf.get(), v_buf.get());
    // The check below reads the rows on the host (a few rows per step: the copy is small next
    // to the weights the projections read).
    if (code == 0 && on_gpu) code = halide_copy_to_host(&context, k_buf.get());
    if (code == 0 && on_gpu) code = halide_copy_to_host(&context, v_buf.get());
    if (code != 0) return kernel_failure(kernels.project_name, code, context);
    ATTNGEN_RETURN_IF_ERROR(require_finite_rows(k_rows, c->precision, "key"));
    ATTNGEN_RETURN_IF_ERROR(require_finite_rows(v_rows, c->precision, "value"));

    // Every check has passed and the kernel succeeded: only now does the cache change. The
    // device's scatter writes only positions at or past each item's length. Forwards read
    // such positions only as masked keys, whose values they multiply by probability 0, and the
    // rows are finite: a scatter that fails part way leaves nothing a later call can see. It
    // is waited for, so that a fault is this call's error and the lengths stay as they were.
    if (on_gpu) {
        code = kernels.store(&context, k_buf.get(), v_buf.get(), items_buf.get(), first_buf.get(),
                             c->on_device->keys(), c->on_device->values());
        if (code == 0) code = halide_device_sync(&context, c->on_device->values());
        if (code != 0) return kernel_failure(kernels.store_name, code, context);
    } else {
        copy_rows_into_cache(c, item_of, first, len, k_rows, v_rows);
    }
    for (int32_t b = 0; b < batch; ++b) c->lengths[item_of[b]] = first[b] + len;
    clear_error();
    return ATTNGEN_OK;
}

static attngen_status attngen_mha_forward_cached_impl(attngen_mha *m, const attngen_kv_cache *c,
                                                      int32_t batch, const int32_t *items,
                                                      int32_t q_len, const float *query,
                                                      int32_t causal_value, float *out) {
    ATTNGEN_RETURN_IF_ERROR(require_cache_of(m, c));
    std::vector<int32_t> item_of;
    ATTNGEN_RETURN_IF_ERROR(resolve_items(c, batch, items, &item_of));
    ATTNGEN_RETURN_IF_ERROR(require_positive(q_len, "q_len"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(query, "query"));
    ATTNGEN_RETURN_IF_ERROR(require_not_null(out, "out"));
    if (causal_value != ATTNGEN_CAUSAL_NONE && causal_value != ATTNGEN_CAUSAL_BOTTOM_RIGHT) {
        return fail(ATTNGEN_ERROR_INVALID_ARGUMENT,
                    "causal must be ATTNGEN_CAUSAL_NONE or ATTNGEN_CAUSAL_BOTTOM_RIGHT (query i "
                    "sees positions <= n - q_len + i), got " +
                        std::to_string(causal_value));
    }
    const ResolvedConfig &cfg = m->config;
    ATTNGEN_RETURN_IF_ERROR(require_addressable("query", {batch, q_len, cfg.d_model}, 4));
    ATTNGEN_RETURN_IF_ERROR(require_finite(query, size_t(batch) * q_len * cfg.d_model, "query"));

    std::shared_lock<std::shared_mutex> lock(m->projections_mutex);
    ATTNGEN_RETURN_IF_ERROR(require_projections(m));
    const ProjectionWeights &w = *m->projections;
    std::vector<int32_t> lengths(batch);
    int32_t key_limit = 0;
    for (int32_t b = 0; b < batch; ++b) {
        lengths[b] = c->lengths[item_of[b]];
        key_limit = std::max(key_limit, lengths[b]);
    }
    StagedOutput staged(out, size_t(batch) * q_len * cfg.d_model);
    ATTNGEN_RETURN_IF_ERROR(staged.allocate("out"));
    TensorBuffer<float, 3> query_buf(query, {batch, q_len, cfg.d_model});
    auto k_cache = stored_buffer<5>(c->keys, cfg.device, c->precision, c->key_shape());
    auto v_cache = stored_buffer<5>(c->values, cfg.device, c->precision, c->value_shape());
    TensorBuffer<int32_t, 1> items_buf(item_of.data(), {batch});
    TensorBuffer<int32_t, 1> lengths_buf(lengths.data(), {batch});
    TensorBuffer<double, 1> inv_freq(cfg.rope_inv_freq.data(), {int32_t(cfg.rope_inv_freq.size())});
    TensorBuffer<float, 2> out_buf(staged.data(), {batch * q_len, cfg.d_model});
    const bool on_gpu = c->on_device != nullptr;
    KernelContext context;
    context.gpu = m->gpu();
    DeviceScratch scratch(context.gpu);
    if (on_gpu) {
        for (halide_buffer_t *buf : {query_buf.get(), items_buf.get(), lengths_buf.get()}) {
            buf->flags = halide_buffer_flag_host_dirty;
            scratch.track(buf);
        }
        scratch.track(out_buf.get());
    }
    const CacheKernels &kernels = cache_kernels(cfg.device, c->precision);
    int code = kernels.decode(
        &context, query_buf.get(), w.wq->weight(), w.wo->weight(), w.wq->bias.get(),
        w.wo->bias.get(), on_gpu ? c->on_device->keys() : k_cache.get(),
        on_gpu ? c->on_device->values() : v_cache.get(), items_buf.get(), lengths_buf.get(),
        cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.v_head_dim, cfg.rope, cfg.rotary_dim,
        inv_freq.get(), cfg.scale(), causal_value, key_limit, out_buf.get());
    if (code == 0 && on_gpu) code = halide_copy_to_host(&context, out_buf.get());
    if (code != 0) return kernel_failure(kernels.decode_name, code, context);
    staged.commit();
    clear_error();
    return ATTNGEN_OK;
}

extern "C" attngen_status attngen_kv_cache_create(const attngen_mha *m, int32_t max_batch,
                                                  int32_t max_len, attngen_kv_cache **out) {
    return guard_entry_point("attngen_kv_cache_create", [&] {
        return attngen_kv_cache_create_impl(m, max_batch, max_len, out);
    });
}

extern "C" void attngen_kv_cache_destroy(attngen_kv_cache *c) {
    delete c;
}

extern "C" attngen_status attngen_kv_cache_lengths(const attngen_kv_cache *c, int32_t *lengths) {
    return guard_entry_point("attngen_kv_cache_lengths",
                             [&] { return attngen_kv_cache_lengths_impl(c, lengths); });
}

extern "C" attngen_status attngen_kv_cache_reset(attngen_kv_cache *c, int32_t item) {
    return guard_entry_point("attngen_kv_cache_reset",
                             [&] { return attngen_kv_cache_reset_impl(c, item); });
}

extern "C" attngen_status attngen_kv_cache_append(attngen_mha *m, attngen_kv_cache *c,
                                                  int32_t batch, const int32_t *items, int32_t len,
                                                  const float *key, const float *value) {
    return guard_entry_point("attngen_kv_cache_append", [&] {
        return attngen_kv_cache_append_impl(m, c, batch, items, len, key, value);
    });
}

extern "C" attngen_status attngen_mha_forward_cached(attngen_mha *m, const attngen_kv_cache *c,
                                                     int32_t batch, const int32_t *items,
                                                     int32_t q_len, const float *query,
                                                     attngen_causal causal, float *out) {
    // Read as an int: a C caller may pass any value, and loading an out-of-range one as the
    // C++ enum type is undefined behaviour (validate.h).
    const int32_t causal_value = raw_enum_value(causal);
    return guard_entry_point("attngen_mha_forward_cached", [&] {
        return attngen_mha_forward_cached_impl(m, c, batch, items, q_len, query, causal_value, out);
    });
}
