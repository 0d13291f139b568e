// Hooks into Halide's GPU runtimes that make a call run in the context and queue its
// KernelContext names (GpuBinding), and in attngen's own context otherwise.
#ifndef ATTNGEN_RUNTIME_GPU_CONTEXT_HOOKS_H
#define ATTNGEN_RUNTIME_GPU_CONTEXT_HOOKS_H

namespace attngen::rt {

// Installs the CUDA hooks (Halide's halide_set_cuda_* setters, chained to the defaults they
// replace). Called by install_halide_runtime_hooks, once, in builds with CUDA kernels. The
// OpenCL runtime has no setters: gpu_context_opencl.cpp defines its acquire and release
// functions outright, so there is nothing to install for it.
void install_cuda_context_hooks();

// Does nothing; calling it makes the linker take gpu_context_opencl.cpp from the archive (its
// definitions replace weak ones the Halide runtime already has, which alone would not).
void link_opencl_context_hooks();

}  // namespace attngen::rt

#endif  // ATTNGEN_RUNTIME_GPU_CONTEXT_HOOKS_H
