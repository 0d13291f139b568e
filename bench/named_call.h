// The call that a named shape stands for: one decoding step (decode_step.h) for a decode shape,
// one MHA forward (mha_forward_call.h) for an MHA shape. Shared by the parallel-loop timeline
// (parallel_timeline.cpp) and the paired-call server (call_server.cpp).
#ifndef ATTNGEN_BENCH_NAMED_CALL_H
#define ATTNGEN_BENCH_NAMED_CALL_H

#include <attngen/attngen.h>

#include <functional>
#include <string>

namespace attngen_bench {

// The call, set up and ready to repeat, or an empty function with the reason in `error`.
std::function<attngen_status()> named_call(const char *name, attngen_precision precision,
                                           std::string &error);

}  // namespace attngen_bench

#endif  // ATTNGEN_BENCH_NAMED_CALL_H
