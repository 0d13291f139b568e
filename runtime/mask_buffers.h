// The mask arguments every attention kernel takes, built from an attngen_mask. Absent parts
// become buffers of the full logical shape that repeat one neutral row (stride 0 outside the
// innermost dimension, which kernels require dense for vector loads), with their has_* flag
// false; kernels never see a missing buffer or need a bounds query.
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
                int32_t kv_len);

    int32_t causal() const { return causal_; }
    halide_buffer_t *kv_lengths() { return kv_lengths_.get(); }
    bool has_bool_mask() const { return has_bool_mask_; }
    halide_buffer_t *bool_mask() { return bool_mask_.get(); }
    bool has_additive() const { return has_additive_; }
    halide_buffer_t *additive() { return additive_.get(); }

  private:
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
