// Google Benchmark suite for the GPU: attngen_mha_forward_device and attngen_sdpa_device (the
// attention alone) on device-resident inputs (no host copies), at the named shapes and the GPU
// issue's long self-attention, with GFLOP/s as a rate counter (FLOPs counted as bench_shapes.h
// does); and decode_device/, one decoding step of a GPU handle's KV cache at the decode shapes
// (decode_step.h: host tokens in and out, the cache on the device), with GB/s of the bytes it
// must read.
//
//   ATTNGEN_BENCH_DEVICE=cuda build/bench/attngen_bench_device --benchmark_min_time=1s
//
// ATTNGEN_BENCH_DEVICE is cuda (the default) or opencl. A call is timed to the end of its work:
// each iteration reads 4 bytes of the output back, which waits for the device.
#include <attngen/attngen.h>
#include <benchmark/benchmark.h>

#include "bench_shapes.h"
#include "decode_step.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace attngen_bench;

attngen_device bench_device() {
    const char *name = std::getenv("ATTNGEN_BENCH_DEVICE");
    if (name != nullptr && std::strcmp(name, "opencl") == 0) return ATTNGEN_DEVICE_OPENCL;
    return ATTNGEN_DEVICE_CUDA;
}

// Device memory holding a copy of a host vector, freed with the object.
class DeviceTensor {
  public:
    DeviceTensor(attngen_device device, const std::vector<float> &host) : device_(device) {
        const uint64_t bytes = host.size() * sizeof(float);
        ok_ = attngen_device_alloc(device, bytes, &address_) == ATTNGEN_OK &&
              attngen_device_upload(device, address_, host.data(), bytes) == ATTNGEN_OK;
    }
    DeviceTensor(const DeviceTensor &) = delete;
    DeviceTensor &operator=(const DeviceTensor &) = delete;
    ~DeviceTensor() {
        if (address_ != 0) attngen_device_free(device_, address_);
    }
    bool ok() const { return ok_; }
    uint64_t address() const { return address_; }

  private:
    attngen_device device_;
    uint64_t address_ = 0;
    bool ok_ = false;
};

// Times `call` (one call to the end of its work, true on success) in the benchmark loop. The
// first call of a process loads the kernels' PTX, which the driver compiles for the GPU at
// hand: it is timed on its own (first_call_ms) and kept out of the timed calls.
template <typename Call>
void time_device_calls(benchmark::State &state, Call &&call, double flops) {
    const auto start = std::chrono::steady_clock::now();
    const bool warm = call();
    const double first_call_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (auto _ : state) {
        if (!warm || !call()) {
            state.SkipWithError(attngen_last_error());
            break;
        }
    }
    state.counters["first_call_ms"] = first_call_ms;
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MhaForwardDevice(benchmark::State &state, Shape s, attngen_precision precision) {
    const attngen_device device = bench_device();
    const attngen_mha_config config{s.d_model, s.heads,           0, 0,   0, 1, device, 0, 0,
                                    precision, ATTNGEN_ROPE_NONE, 0, 0.0f};
    attngen_mha *m = nullptr;
    if (attngen_mha_create(&config, &m) != ATTNGEN_OK) {
        state.SkipWithError(attngen_last_error());
        return;
    }
    const size_t dd = size_t(s.d_model) * s.d_model;
    const float w_scale = 1.0f / std::sqrt(float(s.d_model));
    auto wq = random_vector(dd, w_scale, 1), wk = random_vector(dd, w_scale, 2);
    auto wv = random_vector(dd, w_scale, 3), wo = random_vector(dd, w_scale, 4);
    auto b = random_vector(s.d_model, 0.1f, 5);
    if (attngen_mha_set_weights(m, wq.data(), wk.data(), wv.data(), wo.data(), b.data(), b.data(),
                                b.data(), b.data()) != ATTNGEN_OK) {
        state.SkipWithError(attngen_last_error());
        attngen_mha_destroy(m);
        return;
    }
    DeviceTensor q(device, random_vector(size_t(s.batch) * s.q_len * s.d_model, 1.0f, 6));
    DeviceTensor kv(device, random_vector(size_t(s.batch) * s.kv_len * s.d_model, 1.0f, 7));
    DeviceTensor out(device, std::vector<float>(size_t(s.batch) * s.q_len * s.d_model));
    if (!q.ok() || !kv.ok() || !out.ok()) {
        state.SkipWithError(attngen_last_error());
        attngen_mha_destroy(m);
        return;
    }
    attngen_mask mask{};
    mask.causal = s.causal ? ATTNGEN_CAUSAL_TOP_LEFT : ATTNGEN_CAUSAL_NONE;
    float first = 0.0f;
    const auto call = [&] {
        return attngen_mha_forward_device(m, s.batch, s.q_len, s.kv_len, q.address(), kv.address(),
                                          kv.address(), &mask, out.address(), 0) == ATTNGEN_OK &&
               attngen_device_download(device, &first, out.address(), sizeof first) == ATTNGEN_OK;
    };
    time_device_calls(state, call, mha_flops(s));
    attngen_mha_destroy(m);
}

// The attention of the same shape on projected heads: q [B, H, Lq, d/H], k and v
// [B, H, Lkv, d/H], no weights output (the flash kernel).
void BM_SdpaDevice(benchmark::State &state, Shape s) {
    const attngen_device device = bench_device();
    const int32_t dh = s.d_model / s.heads;
    const size_t rows = size_t(s.batch) * s.heads;
    DeviceTensor q(device, random_vector(rows * s.q_len * dh, 1.0f, 6));
    DeviceTensor k(device, random_vector(rows * s.kv_len * dh, 1.0f, 7));
    DeviceTensor v(device, random_vector(rows * s.kv_len * dh, 1.0f, 8));
    DeviceTensor out(device, std::vector<float>(rows * s.q_len * dh));
    if (!q.ok() || !k.ok() || !v.ok() || !out.ok()) {
        state.SkipWithError(attngen_last_error());
        return;
    }
    attngen_mask mask{};
    mask.causal = s.causal ? ATTNGEN_CAUSAL_TOP_LEFT : ATTNGEN_CAUSAL_NONE;
    float first = 0.0f;
    const auto call = [&] {
        return attngen_sdpa_device(device, nullptr, s.batch, s.heads, s.heads, s.q_len, s.kv_len,
                                   dh, dh, q.address(), k.address(), v.address(), &mask, 0.0f,
                                   out.address(), 0) == ATTNGEN_OK &&
               attngen_device_download(device, &first, out.address(), sizeof first) == ATTNGEN_OK;
    };
    time_device_calls(state, call, attention_flops(s));
}

void register_benchmarks() {
    std::vector<Shape> shapes = attngen_bench::shapes();
    // The GPU issue's long self-attention: 32768 tokens, BERT-base's width.
    shapes.push_back({"long-self-32k", 1, 32768, 32768, 768, 12, false, false});
    for (const Shape &s : shapes) {
        // Half-precision handles hold half the bytes of weights; they multiply float32.
        for (const auto &[prefix, precision] :
             {std::pair{"mha_forward_device/", ATTNGEN_PRECISION_F32},
              std::pair{"mha_forward_device_bf16/", ATTNGEN_PRECISION_BF16},
              std::pair{"mha_forward_device_f16/", ATTNGEN_PRECISION_F16}}) {
            benchmark::RegisterBenchmark((std::string(prefix) + s.name).c_str(),
                                         BM_MhaForwardDevice, s, precision)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        }
        benchmark::RegisterBenchmark((std::string("sdpa_device/") + s.name).c_str(), BM_SdpaDevice,
                                     s)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    for (const attngen::DecodeShape &s : attngen::decode_shapes()) {
        for (const auto &[prefix, precision] :
             {std::pair{"decode_device/", ATTNGEN_PRECISION_F32},
              std::pair{"decode_device_bf16/", ATTNGEN_PRECISION_BF16},
              std::pair{"decode_device_f16/", ATTNGEN_PRECISION_F16}}) {
            benchmark::RegisterBenchmark((std::string(prefix) + s.name).c_str(),
                                         [s, precision = precision](benchmark::State &state) {
                                             run_decode_steps(state, s, precision, bench_device(),
                                                              nullptr);
                                         })
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        }
    }
}

}  // namespace

int main(int argc, char **argv) {
    register_benchmarks();
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
