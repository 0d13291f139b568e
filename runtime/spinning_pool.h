// The thread pool the kernels' parallel loops run on: Halide's halide_do_par_for hook, replaced
// by workers that keep polling for the next loop for a while before they sleep.
//
// Halide's own pool lets an idle worker yield 40 times (a few microseconds) and then sleep on a
// condition variable. A forward or a decoding step is 5-9 parallel loops, and on the virtual
// machines attngen is measured on a sleeping worker took 40-70 us to start its first task
// (the median over 400 calls of attngen_linear_packed_cpu at 320 x 512 x 512 and 128 x 768 x
// 768, 2 threads, Intel Xeon model 207 under Firecracker): a loop of 40-800 us ran on one
// thread for that long. OpenMP runtimes (KMP_BLOCKTIME) and ONNX Runtime's pool spin too.
#ifndef ATTNGEN_RUNTIME_SPINNING_POOL_H
#define ATTNGEN_RUNTIME_SPINNING_POOL_H

#include <HalideRuntime.h>

#include <cstdint>

namespace attngen::rt {

// The most threads a call may use (attngen_set_num_threads), the calling thread among them:
// the Halide runtime keeps the count and silently caps it here (MAX_THREADS of its POSIX
// runtime), so attngen refuses more instead.
constexpr int32_t kMaxPoolThreads = 256;

// Runs f(user_context, i, closure) for i in [min, min + size), each through halide_do_task, on
// up to attngen_get_num_threads() threads, the caller among them, and returns 0 or the nonzero
// result of a failed task (the tasks not yet started when one fails are skipped). Each thread
// runs its own contiguous share of the tasks first, the caller the first share, in order, and
// then helps with what is left of the others'. A loop
// started from inside a task, or while another application thread's loop holds the workers,
// runs serially on the calling thread.
int spinning_do_par_for(void *user_context, halide_task_t f, int min, int size, uint8_t *closure);

// Installs spinning_do_par_for as Halide's halide_do_par_for hook, unless an application
// installed its own first (which then stays).
void install_spinning_pool();

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_SPINNING_POOL_H
