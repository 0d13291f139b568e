// Kernels write into staging memory that is copied to the caller's buffer only when the kernel
// succeeded, so a failure part-way (out of memory, a device error) leaves the caller's output
// untouched. The copy is O(output) against a kernel that is O(output x reduction length).
// A kernel that can no longer fail once it writes an output, and reads no input after that,
// writes the caller's buffer in place.
#ifndef ATTNGEN_RUNTIME_STAGED_OUTPUT_H
#define ATTNGEN_RUNTIME_STAGED_OUTPUT_H

#include <attngen/attngen.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

#include "errors.h"
#include "parallel_chunks.h"

namespace attngen::rt {

class StagedOutput {
  public:
    // A null destination stages nothing (an optional output that was not requested); in place,
    // the kernel writes the destination itself.
    StagedOutput(float *destination, size_t elements, bool in_place = false)
        : destination_(destination), elements_(elements), in_place_(in_place) {}

    // Allocates the staging memory; fails with ATTNGEN_ERROR_OUT_OF_MEMORY.
    attngen_status allocate(const char *name) {
        if (destination_ == nullptr || in_place_) return ATTNGEN_OK;
        staging_.reset(new (std::nothrow) float[elements_]);
        if (staging_) return ATTNGEN_OK;
        return fail(ATTNGEN_ERROR_OUT_OF_MEMORY, std::string("cannot allocate ") +
                                                     std::to_string(elements_ * sizeof(float)) +
                                                     " bytes to stage " + name);
    }

    float *data() const { return in_place_ ? destination_ : staging_.get(); }

    void commit() const {
        if (destination_ != nullptr && !in_place_) {
            // On the pool: one thread copied bert-512's 1.5 MB output in about 110 us (0.7%
            // of the forward), two in 85 (attngen_parallel_timeline, AVX-512, Zen 4); the
            // destination's lines come from memory. Smaller outputs as well (kCopyGrain).
            parallel_chunks(elements_, kCopyGrain, [this](size_t begin, size_t end) {
                std::memcpy(destination_ + begin, staging_.get() + begin,
                            (end - begin) * sizeof(float));
            });
        }
    }

  private:
    float *destination_;
    size_t elements_;
    bool in_place_;
    std::unique_ptr<float[]> staging_;
};

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_STAGED_OUTPUT_H
