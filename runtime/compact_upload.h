// Inputs with broadcast dimensions (stride 0: a mask of batch 1 used for every item, or the
// neutral row standing in for an absent mask) copied to a GPU as the memory they really
// occupy. Halide's own copy walks every index of the logical shape: for the neutral additive
// mask at bert-512 that was 512 x 12 copies of one 2 KiB row, 43 ms of a 50 ms call on an H100.
#ifndef ATTNGEN_RUNTIME_COMPACT_UPLOAD_H
#define ATTNGEN_RUNTIME_COMPACT_UPLOAD_H

#include <HalideRuntime.h>
#include <attngen/attngen.h>

#include "gpu_binding.h"

#include <array>
#include <memory>
#include <vector>

namespace attngen::rt {

class CompactUpload {
  public:
    CompactUpload(attngen_device device, const GpuBinding &gpu) : device_(device), gpu_(gpu) {}
    CompactUpload(const CompactUpload &) = delete;
    CompactUpload &operator=(const CompactUpload &) = delete;
    // Detaches every uploaded buffer from its copy and frees the copies.
    ~CompactUpload();

    // Copies buf's host data (its dimensions of nonzero stride, which are dense) to the device
    // in one copy and points buf at it, strides unchanged. buf must have no device memory yet.
    attngen_status upload(halide_buffer_t *buf, const char *name);

  private:
    struct Copy {
        std::array<halide_dimension_t, 8> dims{};
        halide_buffer_t compact{};
        halide_buffer_t *uploaded = nullptr;
    };
    attngen_device device_;
    GpuBinding gpu_;
    std::vector<std::unique_ptr<Copy>> copies_;
};

class MaskBuffers;

// The mask inputs on a GPU: each copied as the memory it occupies, not as its broadcast
// logical shape.
attngen_status upload_masks(CompactUpload &upload, MaskBuffers &masks);

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_COMPACT_UPLOAD_H
