#include "app_gpu.h"

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace attngen_test {
namespace {

// The library's symbol `name` as a function pointer of the declared type, or null.
template <typename Function>
bool Load(void *library, const char *name, Function *function) {
    *function = reinterpret_cast<Function>(dlsym(library, name));
    return *function != nullptr;
}

// ---- CUDA, through the driver API (libcuda.so.1) -------------------------------------------

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUstream = void *;
using CUdeviceptr = unsigned long long;
constexpr unsigned kCuStreamNonBlocking = 1;

struct CudaApi {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
    CUresult (*push)(CUcontext);
    CUresult (*pop)(CUcontext *);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*to_device)(CUdeviceptr, const void *, size_t);
    CUresult (*to_host)(void *, CUdeviceptr, size_t);
};

class CudaGpu : public AppGpu {
  public:
    static std::unique_ptr<AppGpu> Create(std::string *why_not) {
        void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) {
            *why_not = "no CUDA driver (libcuda.so.1)";
            return nullptr;
        }
        CudaApi api{};
        if (!(Load(library, "cuInit", &api.init) && Load(library, "cuDeviceGet", &api.device_get) &&
              Load(library, "cuDevicePrimaryCtxRetain", &api.primary_retain) &&
              Load(library, "cuDevicePrimaryCtxRelease_v2", &api.primary_release) &&
              Load(library, "cuCtxPushCurrent_v2", &api.push) &&
              Load(library, "cuCtxPopCurrent_v2", &api.pop) &&
              Load(library, "cuStreamCreate", &api.stream_create) &&
              Load(library, "cuStreamDestroy_v2", &api.stream_destroy) &&
              Load(library, "cuStreamSynchronize", &api.stream_sync) &&
              Load(library, "cuMemAlloc_v2", &api.alloc) &&
              Load(library, "cuMemFree_v2", &api.free) &&
              Load(library, "cuMemcpyHtoD_v2", &api.to_device) &&
              Load(library, "cuMemcpyDtoH_v2", &api.to_host))) {
            *why_not = "the CUDA driver lacks an entry point the test uses";
            return nullptr;
        }
        auto gpu = std::unique_ptr<CudaGpu>(new CudaGpu(api));
        if (api.init(0) != 0 || api.device_get(&gpu->device_, 0) != 0 ||
            api.primary_retain(&gpu->context_, gpu->device_) != 0) {
            *why_not = "no usable CUDA device";
            return nullptr;
        }
        gpu->retained_ = true;
        gpu->Scoped([&] {
            api.stream_create(&gpu->stream_, kCuStreamNonBlocking);
            api.stream_create(&gpu->second_stream_, kCuStreamNonBlocking);
        });
        return gpu;
    }
    ~CudaGpu() override {
        if (!retained_) return;
        Scoped([&] {
            if (stream_ != nullptr) api_.stream_destroy(stream_);
            if (second_stream_ != nullptr) api_.stream_destroy(second_stream_);
        });
        api_.primary_release(device_);
    }
    void *context() const override { return context_; }
    void *queue() const override { return stream_; }
    void *second_queue() const override { return second_stream_; }
    uint64_t Upload(const std::vector<float> &host) override {
        CUdeviceptr address = 0;
        Scoped([&] {
            if (api_.alloc(&address, host.size() * sizeof(float)) != 0) address = 0;
            if (address != 0) api_.to_device(address, host.data(), host.size() * sizeof(float));
        });
        return address;
    }
    std::vector<float> Download(uint64_t address, size_t count) override {
        std::vector<float> host(count);
        Finish();  // the copy runs on the legacy stream, which does not wait for ours
        Scoped([&] { api_.to_host(host.data(), address, count * sizeof(float)); });
        return host;
    }
    void Free(uint64_t address) override {
        if (address != 0) Scoped([&] { api_.free(address); });
    }
    void Finish() override {
        Scoped([&] {
            api_.stream_sync(stream_);
            api_.stream_sync(second_stream_);
        });
    }
    int ContextReferences() const override { return -1; }

  private:
    explicit CudaGpu(const CudaApi &api) : api_(api) {}
    template <typename Body>
    void Scoped(Body &&body) const {
        api_.push(context_);
        body();
        CUcontext popped = nullptr;
        api_.pop(&popped);
    }
    CudaApi api_;
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
    CUstream stream_ = nullptr, second_stream_ = nullptr;
    bool retained_ = false;
};

// ---- OpenCL, through the ICD loader (libOpenCL.so.1) ---------------------------------------

using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_platform_id = void *;
using cl_device_id = void *;
using cl_context = void *;
using cl_command_queue = void *;
using cl_mem = void *;
constexpr uint64_t kClDeviceTypeAll = 0xFFFFFFFF;
constexpr uint64_t kClMemReadWrite = 1 << 0;
constexpr cl_uint kClContextReferenceCount = 0x1080;
constexpr cl_uint kClTrue = 1;

struct OpenClApi {
    cl_int (*platform_ids)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (*device_ids)(cl_platform_id, uint64_t, cl_uint, cl_device_id *, cl_uint *);
    cl_context (*create_context)(const intptr_t *, cl_uint, const cl_device_id *, void *, void *,
                                 cl_int *);
    cl_command_queue (*create_queue)(cl_context, cl_device_id, uint64_t, cl_int *);
    cl_int (*context_info)(cl_context, cl_uint, size_t, void *, size_t *);
    cl_mem (*create_buffer)(cl_context, uint64_t, size_t, void *, cl_int *);
    cl_int (*write)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void *, cl_uint,
                    const void *, void *);
    cl_int (*read)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint, const void *,
                   void *);
    cl_int (*release_mem)(cl_mem);
    cl_int (*finish)(cl_command_queue);
    cl_int (*release_queue)(cl_command_queue);
    cl_int (*release_context)(cl_context);
};

class OpenClGpu : public AppGpu {
  public:
    static std::unique_ptr<AppGpu> Create(std::string *why_not) {
        void *library = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) library = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) {
            *why_not = "no OpenCL loader (libOpenCL.so.1)";
            return nullptr;
        }
        OpenClApi api{};
        if (!(Load(library, "clGetPlatformIDs", &api.platform_ids) &&
              Load(library, "clGetDeviceIDs", &api.device_ids) &&
              Load(library, "clCreateContext", &api.create_context) &&
              Load(library, "clCreateCommandQueue", &api.create_queue) &&
              Load(library, "clGetContextInfo", &api.context_info) &&
              Load(library, "clCreateBuffer", &api.create_buffer) &&
              Load(library, "clEnqueueWriteBuffer", &api.write) &&
              Load(library, "clEnqueueReadBuffer", &api.read) &&
              Load(library, "clReleaseMemObject", &api.release_mem) &&
              Load(library, "clFinish", &api.finish) &&
              Load(library, "clReleaseCommandQueue", &api.release_queue) &&
              Load(library, "clReleaseContext", &api.release_context))) {
            *why_not = "the OpenCL loader lacks an entry point the test uses";
            return nullptr;
        }
        cl_platform_id platform = nullptr;
        cl_device_id device = nullptr;
        cl_uint count = 0;
        if (api.platform_ids(1, &platform, &count) != 0 || count == 0 ||
            api.device_ids(platform, kClDeviceTypeAll, 1, &device, &count) != 0 || count == 0) {
            *why_not = "no OpenCL platform or device";
            return nullptr;
        }
        auto gpu = std::unique_ptr<OpenClGpu>(new OpenClGpu(api));
        cl_int err = 0;
        gpu->context_ = api.create_context(nullptr, 1, &device, nullptr, nullptr, &err);
        if (gpu->context_ == nullptr) {
            *why_not = "clCreateContext failed: " + std::to_string(err);
            return nullptr;
        }
        gpu->queue_ = api.create_queue(gpu->context_, device, 0, &err);
        gpu->second_queue_ = api.create_queue(gpu->context_, device, 0, &err);
        if (gpu->queue_ == nullptr || gpu->second_queue_ == nullptr) {
            *why_not = "clCreateCommandQueue failed: " + std::to_string(err);
            return nullptr;
        }
        return gpu;
    }
    ~OpenClGpu() override {
        if (queue_ != nullptr) api_.release_queue(queue_);
        if (second_queue_ != nullptr) api_.release_queue(second_queue_);
        if (context_ != nullptr) api_.release_context(context_);
    }
    void *context() const override { return context_; }
    void *queue() const override { return queue_; }
    void *second_queue() const override { return second_queue_; }
    uint64_t Upload(const std::vector<float> &host) override {
        const size_t bytes = host.size() * sizeof(float);
        cl_int err = 0;
        cl_mem mem = api_.create_buffer(context_, kClMemReadWrite, bytes, nullptr, &err);
        if (mem == nullptr) return 0;
        api_.write(queue_, mem, kClTrue, 0, bytes, host.data(), 0, nullptr, nullptr);
        return reinterpret_cast<uint64_t>(mem);
    }
    std::vector<float> Download(uint64_t address, size_t count) override {
        std::vector<float> host(count);
        api_.finish(second_queue_);
        api_.read(queue_, reinterpret_cast<cl_mem>(address), kClTrue, 0, count * sizeof(float),
                  host.data(), 0, nullptr, nullptr);
        return host;
    }
    void Free(uint64_t address) override {
        if (address != 0) api_.release_mem(reinterpret_cast<cl_mem>(address));
    }
    void Finish() override {
        api_.finish(queue_);
        api_.finish(second_queue_);
    }
    int ContextReferences() const override {
        cl_uint references = 0;
        if (api_.context_info(context_, kClContextReferenceCount, sizeof(references), &references,
                              nullptr) != 0) {
            return -1;
        }
        return int(references);
    }

  private:
    explicit OpenClGpu(const OpenClApi &api) : api_(api) {}
    OpenClApi api_;
    cl_context context_ = nullptr;
    cl_command_queue queue_ = nullptr, second_queue_ = nullptr;
};

constexpr auto kPoll = std::chrono::milliseconds(10);
constexpr auto kSettle = std::chrono::milliseconds(200);
constexpr auto kGiveUp = std::chrono::seconds(5);

}  // namespace

int AppGpu::SettledContextReferences() {
    Finish();
    const auto start = std::chrono::steady_clock::now();
    int count = ContextReferences();
    auto unchanged_since = start;
    while (count >= 0 && std::chrono::steady_clock::now() - start < kGiveUp) {
        std::this_thread::sleep_for(kPoll);
        const int now = ContextReferences();
        const auto at = std::chrono::steady_clock::now();
        if (now != count) {
            count = now;
            unchanged_since = at;
        } else if (at - unchanged_since >= kSettle) {
            break;
        }
    }
    return count;
}

int AppGpu::ContextReferencesOnceAt(int expected) {
    Finish();
    const auto start = std::chrono::steady_clock::now();
    int count = ContextReferences();
    while (count != expected && std::chrono::steady_clock::now() - start < kGiveUp) {
        std::this_thread::sleep_for(kPoll);
        count = ContextReferences();
    }
    return count;
}

std::unique_ptr<AppGpu> AppGpu::Create(attngen_device device, std::string *why_not) {
    switch (device) {
        case ATTNGEN_DEVICE_CUDA:
            return CudaGpu::Create(why_not);
        case ATTNGEN_DEVICE_OPENCL:
            return OpenClGpu::Create(why_not);
        default:
            *why_not = "not a GPU";
            return nullptr;
    }
}

}  // namespace attngen_test
