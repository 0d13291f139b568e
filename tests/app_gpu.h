// A GPU context, queue and memory that a test owns, made the way an application makes them:
// through the CUDA driver API (the primary context, as the CUDA runtime and PyTorch use it, and
// a stream of its own) or through OpenCL (a context and an in-order queue on the first device).
// Both libraries are opened at run time, so the test builds where neither exists.
#ifndef ATTNGEN_TESTS_APP_GPU_H
#define ATTNGEN_TESTS_APP_GPU_H

#include <attngen/attngen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attngen_test {

class AppGpu {
  public:
    virtual ~AppGpu() = default;
    // Null, with the reason in *why_not, where the device's driver or a device is missing.
    static std::unique_ptr<AppGpu> Create(attngen_device device, std::string *why_not);

    virtual void *context() const = 0;
    virtual void *queue() const = 0;
    // Another queue of the same context.
    virtual void *second_queue() const = 0;
    // Memory of this context holding `host`, or 0 on failure.
    virtual uint64_t Upload(const std::vector<float> &host) = 0;
    virtual std::vector<float> Download(uint64_t address, size_t count) = 0;
    virtual void Free(uint64_t address) = 0;
    // Waits for everything queued on both queues.
    virtual void Finish() = 0;
    // How many references the driver counts on the context (OpenCL), or -1 where the API has
    // no such count (CUDA).
    virtual int ContextReferences() const = 0;

    // A count read right after clFinish can still hold references that the driver drops a
    // moment later (likely PoCL's worker thread releasing its finished commands): CI once read
    // 12 where 7 were expected, 0.3 s after a release, on a loaded 2-core machine. These read
    // the count once such references have gone. The count once it has held still for 200 ms
    // (at most 5 s):
    int SettledContextReferences();
    // The count once it equals `expected`, or the last one read after a few seconds.
    int ContextReferencesOnceAt(int expected);
};

// Memory of an AppGpu holding some floats, freed when it goes out of scope.
class AppBuffer {
  public:
    AppBuffer(AppGpu &gpu, const std::vector<float> &host)
        : gpu_(gpu), count_(host.size()), address_(gpu.Upload(host)) {}
    ~AppBuffer() { gpu_.Free(address_); }
    AppBuffer(const AppBuffer &) = delete;
    AppBuffer &operator=(const AppBuffer &) = delete;
    uint64_t address() const { return address_; }
    std::vector<float> Download() const { return gpu_.Download(address_, count_); }

  private:
    AppGpu &gpu_;
    size_t count_;
    uint64_t address_;
};

}  // namespace attngen_test

#endif  // ATTNGEN_TESTS_APP_GPU_H
