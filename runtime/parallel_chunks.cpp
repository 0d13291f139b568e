#include "parallel_chunks.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <cstdint>

namespace attngen::rt {
namespace {

struct Pass {
    size_t n, chunk_elements;
    const std::function<void(size_t, size_t)> *chunk;
};

int run_chunk(void *, int index, uint8_t *closure) {
    const Pass &pass = *reinterpret_cast<const Pass *>(closure);
    const size_t begin = size_t(index) * pass.chunk_elements;
    (*pass.chunk)(begin, std::min(pass.n, begin + pass.chunk_elements));
    return 0;
}

}  // namespace

void parallel_chunks(size_t n, const ChunkGrain &grain,
                     const std::function<void(size_t, size_t)> &chunk) {
    const size_t chunks = (n + grain.elements - 1) / grain.elements;
    if (chunks < grain.min_chunks || chunks > size_t(INT32_MAX)) {
        if (n > 0) chunk(0, n);
        return;
    }
    Pass pass{n, grain.elements, &chunk};
    // The tasks cannot fail, but an application may replace Halide's loop with its own hook
    // (halide_set_custom_do_par_for), and a failed loop may have left ranges undone.
    if (halide_do_par_for(nullptr, run_chunk, 0, int(chunks), reinterpret_cast<uint8_t *>(&pass)) !=
        0) {
        chunk(0, n);
    }
}

}  // namespace attngen::rt
