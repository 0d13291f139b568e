// Header-only: installed (attngen/detail/) for kernels made by attngen_add_library.
// The mask arguments every attention kernel takes, built from an attngen_mask. An absent part
// becomes one neutral row (extent 1 outside the key dimension, which kernels require dense for
// vector loads), with its has_* flag false; a part given for one item or head has extent 1
// there. Kernels broadcast dimensions of extent 1 (generators.cpp, broadcast_outer), never
// see a missing buffer or need a bounds query, and no buffer is larger than its memory.
#ifndef ATTNGEN_RUNTIME_MASK_BUFFERS_H
#define ATTNGEN_RUNTIME_MASK_BUFFERS_H

#include <attngen/attngen.h>

#include <vector>

#include "tensor_buffer.h"

namespace attngen::rt {

class MaskBuffers {
  public:
    // mask must have passed validate_mask (it may be NULL). Throws std::bad_alloc.
    MaskBuffers(const attngen_mask *mask, int32_t batch, int32_t heads, int32_t q_len,
                int32_t kv_len)
        : MaskBuffers(mask ? *mask : attngen_mask{}, batch, heads, q_len, kv_len) {}

    int32_t causal() const { return causal_; }
    halide_buffer_t *kv_lengths() { return kv_lengths_.get(); }
    bool has_bool_mask() const { return has_bool_mask_; }
    halide_buffer_t *bool_mask() { return bool_mask_.get(); }
    bool has_additive() const { return has_additive_; }
    halide_buffer_t *additive() { return additive_.get(); }

  private:
    MaskBuffers(const attngen_mask &m, int32_t batch, int32_t heads, int32_t q_len, int32_t kv_len)
        : causal_(static_cast<int32_t>(m.causal)),
          all_keys_(m.kv_lengths ? 0 : batch, kv_len),
          unmasked_row_(m.bool_mask ? 0 : kv_len, 0),
          zero_row_(m.additive ? 0 : kv_len, 0.0f),
          has_bool_mask_(m.bool_mask != nullptr),
          has_additive_(m.additive != nullptr),
          kv_lengths_(m.kv_lengths ? m.kv_lengths : all_keys_.data(), {batch}),
          bool_mask_(has_bool_mask_ ? m.bool_mask : unmasked_row_.data(),
                     {!has_bool_mask_ || m.bool_mask_batch == 1 ? 1 : batch,
                      has_bool_mask_ ? q_len : 1, kv_len}),
          additive_(has_additive_ ? m.additive : zero_row_.data(),
                    {!has_additive_ || m.additive_batch == 1 ? 1 : batch,
                     !has_additive_ || m.additive_heads == 1 ? 1 : heads, has_additive_ ? q_len : 1,
                     kv_len}) {}

    int32_t causal_;
    std::vector<int32_t> all_keys_;  // the kv_lengths of every item when none are given
    std::vector<uint8_t> unmasked_row_;
    std::vector<float> zero_row_;
    bool has_bool_mask_;
    bool has_additive_;
    TensorBuffer<int32_t, 1> kv_lengths_;
    TensorBuffer<uint8_t, 3> bool_mask_;
    TensorBuffer<float, 4> additive_;
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_MASK_BUFFERS_H
