// Shared by the stand-alone GPU schedule experiments: writing a library of AOT-compiled
// variants with the table its runner iterates (the *_variants.cpp side), and uploading, poisoning
// and timing on the device (the runners' side).
#ifndef ATTNGEN_BENCH_GPU_EXPERIMENTS_EXPERIMENT_UTIL_H
#define ATTNGEN_BENCH_GPU_EXPERIMENTS_EXPERIMENT_UTIL_H

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef ATTNGEN_EXPERIMENT_GENERATOR
#include "Halide.h"

// Compiles each variant of result(o, n) = bias(o) + sum_f x(f, n) w(o, f) into dir as
// g_<name>.a, and writes dir/variants.h listing them as `variants` for product_runner.cpp.
class VariantLibrary {
  public:
    explicit VariantLibrary(std::string dir)
        : dir_(std::move(dir)), header_(std::fopen((dir_ + "/variants.h").c_str(), "w")) {
        std::fprintf(header_, "#include \"HalideBuffer.h\"\n");
    }
    ~VariantLibrary() {
        std::fprintf(header_,
                     "struct V { const char *name; int (*fn)(const void*, halide_buffer_t*, "
                     "halide_buffer_t*, halide_buffer_t*, halide_buffer_t*); };\n"
                     "static V variants[] = {\n%s};\n",
                     table_.c_str());
        std::fclose(header_);
        Halide::compile_standalone_runtime(
            dir_ + "/runtime.a", Halide::Target("x86-64-linux-" + api() + "-user_context"));
    }

    // The buffers' constraints every variant assumes (zero mins, 16-byte alignment, weight rows
    // of a multiple of 64 and, with aligned_rows, input rows of a multiple of 4), then the
    // library itself.
    void add(const std::string &name, Halide::ImageParam x, Halide::ImageParam w,
             const Halide::ImageParam &bias, Halide::Func out, bool aligned_rows) {
        x.dim(0).set_min(0).dim(1).set_min(0);
        if (aligned_rows) x.dim(1).set_stride((x.dim(1).stride() / 4) * 4);
        x.set_host_alignment(16);
        w.set_host_alignment(16);
        w.dim(0).set_min(0).dim(1).set_min(0).dim(1).set_stride((w.dim(1).stride() / 64) * 64);
        out.output_buffer().dim(0).set_min(0).dim(1).set_min(0);
        const std::string fn = "g_" + name;
        const std::string device = api() == "cuda" ? "cuda-cuda_capability_70" : api();
        const Halide::Target t("x86-64-linux-" + device + "-user_context-no_runtime");
        Halide::Pipeline(out).compile_to_static_library(dir_ + "/" + fn, {x, w, bias}, fn, t);
        std::fprintf(header_, "#include \"%s.h\"\n", fn.c_str());
        table_ += "{\"" + name + "\", " + fn + "},\n";
    }

  private:
    // CUDA, or OpenCL (ATTNGEN_EXPERIMENT_API=opencl) so that PoCL can check the variants on a
    // machine without a GPU.
    static std::string api() {
        const char *env = std::getenv("ATTNGEN_EXPERIMENT_API");
        return env && std::string(env) == "opencl" ? "opencl" : "cuda";
    }

    std::string dir_;
    std::FILE *header_;
    std::string table_;
};

// main() for a variants program: Halide's errors reach stderr and the exit status.
template <typename Body>
int run_reporting_errors(Body body) {
    try {
        return body();
    } catch (Halide::Error &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
#else
#include "HalideBuffer.h"
#ifdef ATTNGEN_EXPERIMENT_OPENCL
#include "HalideRuntimeOpenCL.h"
inline const halide_device_interface_t *experiment_device() {
    return halide_opencl_device_interface();
}
#else
#include "HalideRuntimeCuda.h"
inline const halide_device_interface_t *experiment_device() {
    return halide_cuda_device_interface();
}
#endif

// Host values to the device.
template <typename T>
void upload(Halide::Runtime::Buffer<T> &b, const halide_device_interface_t *device) {
    b.set_host_dirty();
    b.copy_to_device(device);
}

// NaN in every element of out, on the device, so an unwritten output cannot pass a check.
inline void poison(Halide::Runtime::Buffer<float> &out, const halide_device_interface_t *device) {
    out.set_device_dirty(false);
    out.fill(NAN);
    upload(out, device);
}

// Median over `repetitions` of the mean time of `iterations` calls, each run timed to the end
// of its device work.
template <typename Call>
double median_call_ms(Call call, halide_buffer_t *result, int repetitions, int iterations) {
    std::vector<double> ms;
    for (int rep = 0; rep < repetitions; ++rep) {
        halide_device_sync(nullptr, result);
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iterations; ++i) call();
        halide_device_sync(nullptr, result);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count() /
            iterations);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}
#endif

#endif
