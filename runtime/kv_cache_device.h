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

namespace attngen::rt {

class DeviceKvStorage {
  public:
    // Shapes outermost first, as TensorBuffer takes them: keys [max_batch][kv_heads][blocks]
    // [head_dim][kCacheKeyBlock], values [max_batch][kv_heads][max_len][v_head_dim]. Elements are
    // float32 or a 16-bit format's bits (uint16), as the GPU kernels take them. Every element
    // starts at +0: the flash kernel multiplies the values of masked positions by probability 0,
    // and uninitialized memory could hold a NaN.
    static attngen_status create(attngen_device device, const GpuBinding &gpu,
                                 const std::array<int32_t, 5> &key_shape,
                                 const std::array<int32_t, 4> &value_shape, bool bits16,
                                 std::unique_ptr<DeviceKvStorage> *out);
    DeviceKvStorage(const DeviceKvStorage &) = delete;
    DeviceKvStorage &operator=(const DeviceKvStorage &) = delete;
    ~DeviceKvStorage();

    halide_buffer_t *keys() { return &keys_; }
    halide_buffer_t *values() { return &values_; }
    // Frees the memory on this binding's queue (the handle's, which set_queue may change).
    void rebind(const GpuBinding &gpu) { gpu_ = gpu; }

  private:
    DeviceKvStorage() = default;
    GpuBinding gpu_;
    std::array<halide_dimension_t, 5> key_dims_{};
    std::array<halide_dimension_t, 4> value_dims_{};
    halide_buffer_t keys_{}, values_{};
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_KV_CACHE_DEVICE_H
