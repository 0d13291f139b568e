// halide_buffer_t views of the caller's row-major tensors, built without copying.
#ifndef ATTNGEN_RUNTIME_TENSOR_BUFFER_H
#define ATTNGEN_RUNTIME_TENSOR_BUFFER_H

#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include <array>
#include <cstdint>

#include "layout.h"

namespace attngen::rt {

template <typename T>
halide_type_t halide_type_for();
template <>
inline halide_type_t halide_type_for<float>() {
    return halide_type_t(halide_type_float, 32);
}
template <>
inline halide_type_t halide_type_for<double>() {
    return halide_type_t(halide_type_float, 64);
}
template <>
inline halide_type_t halide_type_for<int32_t>() {
    return halide_type_t(halide_type_int, 32);
}
template <>
inline halide_type_t halide_type_for<uint8_t>() {
    return halide_type_t(halide_type_uint, 8);
}
template <>
inline halide_type_t halide_type_for<uint16_t>() {
    return halide_type_t(halide_type_uint, 16);
}

// The Halide type of the elements a handle of precision p stores (weights, KV cache), for a
// TensorBuffer over their bits where T alone does not say it.
inline halide_type_t precision_type(attngen_precision p) {
    switch (p) {
        case ATTNGEN_PRECISION_BF16:
            return halide_type_t(halide_type_bfloat, 16);
        case ATTNGEN_PRECISION_F16:
            return halide_type_t(halide_type_float, 16);
        case ATTNGEN_PRECISION_F32:
            break;
    }
    return halide_type_t(halide_type_float, 32);
}

// The type of weights as a kernel for `device` takes them: GPU kernels take the 16-bit formats as
// their bits, uint16, but for float16 on CUDA (generators/layout.h, half_weights_as_bits).
inline halide_type_t weight_element_type(attngen_precision p, attngen_device device) {
    const bool as_bits =
        p != ATTNGEN_PRECISION_F32 &&
        half_weights_as_bits(p == ATTNGEN_PRECISION_BF16, device != ATTNGEN_DEVICE_CPU,
                             device == ATTNGEN_DEVICE_CUDA);
    return as_bits ? halide_type_t(halide_type_uint, 16) : precision_type(p);
}

// The type of a KV cache's elements, and of rows stored into it, as a kernel for `device` takes
// them: on GPUs the 16-bit formats as their bits (generators/layout.h, half_cache_as_bits).
inline halide_type_t cache_element_type(attngen_precision p, attngen_device device) {
    const bool as_bits =
        p != ATTNGEN_PRECISION_F32 && half_cache_as_bits(device != ATTNGEN_DEVICE_CPU);
    return as_bits ? halide_type_t(halide_type_uint, 16) : precision_type(p);
}

// A dense row-major tensor seen as a Halide buffer: shape is outermost first, as in the C API,
// and becomes Halide dimensions innermost first. A dimension marked broadcast has stride 0, so
// one slice serves every index (a mask of batch 1 used for every batch item, or a single
// neutral element standing in for an absent mask).
template <typename T, int N>
class TensorBuffer {
  public:
    // type: the elements' Halide type where T alone does not say it (uint16_t bits of bfloat16
    // or float16).
    TensorBuffer(const T *data, const std::array<int32_t, N> &shape,
                 const std::array<bool, N> &broadcast = {},
                 halide_type_t type = halide_type_for<T>()) {
        int32_t stride = 1;
        for (int k = N - 1; k >= 0; --k) {
            halide_dimension_t &dim = dims_[N - 1 - k];
            dim.min = 0;
            dim.extent = shape[k];
            dim.stride = broadcast[k] ? 0 : stride;
            dim.flags = 0;
            if (!broadcast[k]) stride *= shape[k];
        }
        buffer_.device = 0;
        buffer_.device_interface = nullptr;
        // Kernels never write inputs; halide_buffer_t has no const host pointer.
        buffer_.host = reinterpret_cast<uint8_t *>(const_cast<T *>(data));
        buffer_.flags = 0;
        buffer_.type = type;
        buffer_.dimensions = N;
        buffer_.dim = dims_.data();
        buffer_.padding = nullptr;
    }
    TensorBuffer(const TensorBuffer &) = delete;
    TensorBuffer &operator=(const TensorBuffer &) = delete;

    halide_buffer_t *get() { return &buffer_; }

    // For a kernel on a GPU: the host data is current, so Halide copies it to the device.
    void mark_host_dirty() { buffer_.flags = halide_buffer_flag_host_dirty; }

  private:
    std::array<halide_dimension_t, N> dims_{};
    halide_buffer_t buffer_{};
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_TENSOR_BUFFER_H
