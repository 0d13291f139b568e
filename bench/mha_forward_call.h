// One MHA forward at a named shape as a benchmark calls it: a handle with random weights (and
// biases) in the given precision, random inputs (one tensor for query, key and value where the
// shape's lengths agree), and the shape's mask. Shared by the CPU suite
// (bench_attngen.cpp) and the parallel-loop timeline (parallel_timeline.cpp).
#ifndef ATTNGEN_BENCH_MHA_FORWARD_CALL_H
#define ATTNGEN_BENCH_MHA_FORWARD_CALL_H

#include <attngen/attngen.h>

#include <string>
#include <vector>

#include "named_shapes.h"

namespace attngen_bench {

class MhaForwardCall {
  public:
    MhaForwardCall(const attngen::NamedShape &s, attngen_precision precision);
    ~MhaForwardCall();
    MhaForwardCall(const MhaForwardCall &) = delete;
    MhaForwardCall &operator=(const MhaForwardCall &) = delete;

    // Empty when the set-up succeeded; otherwise attngen's message.
    const std::string &error() const { return error_; }
    // One forward; on failure the status, with attngen_last_error(). The outputs (and the
    // attention weights where the shape asks for them) go to buffers the object owns.
    attngen_status operator()();
    const float *out() const { return out_.data(); }

  private:
    attngen::NamedShape shape_;
    attngen_mha *m_ = nullptr;
    attngen_mask mask_{};
    std::vector<float> q_, kv_, out_, weights_;  // kv_ empty: self-attention on q_
    std::string error_;
};

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_MHA_FORWARD_CALL_H
