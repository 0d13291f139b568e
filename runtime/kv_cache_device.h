// The keys and values of a KV cache created from a GPU handle: device memory in the handle's
// context, never on the host (the append's scatter kernel writes it, the cached forward reads
// it in place).
#ifndef ATTNGEN_RUNTIME_KV_CACHE_DEVICE_H
#define ATTNGEN_RUNTIME_KV_CACHE_DEVICE_H

#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include <array>
#include <memory>

#include "device.h"
#include "tensor_buffer.h"

namespace attngen::rt {

class DeviceKvStorage {
  public:
    // Shapes outermost first, as TensorBuffer takes them: keys [max_batch][kv_heads][blocks]
    // [head_dim][kCacheKeyBlock], values [max_batch][kv_heads][panels][max_len]
    // [kCacheValuePanel], elements of `element` (cache_element_type). Every element starts at
    // +0: the kernels multiply the values of masked positions by probability 0, and
    // uninitialized memory could hold a NaN.
    static attngen_status create(attngen_device device, const GpuBinding &gpu,
                                 const std::array<int32_t, 5> &key_shape,
                                 const std::array<int32_t, 5> &value_shape, halide_type_t element,
                                 std::unique_ptr<DeviceKvStorage> *out);
    DeviceKvStorage(const DeviceKvStorage &) = delete;
    DeviceKvStorage &operator=(const DeviceKvStorage &) = delete;
    ~DeviceKvStorage();

    halide_buffer_t *keys() { return keys_.get(); }
    halide_buffer_t *values() { return values_.get(); }
    // Frees the memory on this binding's queue (the handle's, which set_queue may change).
    void rebind(const GpuBinding &gpu) { gpu_ = gpu; }

  private:
    // No host memory: the buffers only ever hold device allocations.
    DeviceKvStorage(const GpuBinding &gpu, const std::array<int32_t, 5> &key_shape,
                    const std::array<int32_t, 5> &value_shape, halide_type_t element)
        : gpu_(gpu),
          keys_(nullptr, key_shape, {}, element),
          values_(nullptr, value_shape, {}, element) {}
    GpuBinding gpu_;
    TensorBuffer<uint8_t, 5> keys_;
    TensorBuffer<uint8_t, 5> values_;
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_KV_CACHE_DEVICE_H
