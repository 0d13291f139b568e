// A model, in AVX2 intrinsics, of the AVX2 variant's probs x values loop in the split-KV decode
// kernel (schedule_decode_attention_cpu) at long-decode: 8 key/value heads of 32768 positions by
// 128 float32 features, 4 query rows per key/value head, tasks of 256 keys, tiles of 4 vectors by
// 2 rows (8 passes over a task's values: 4 feature tiles x 2 row tiles). It times the values
// stored as rows of features (the cache's layout) against panels of 32 features, (feature % 32,
// position, feature / 32), where each pass reads one contiguous run, and a plain read of the same
// bytes. Not built by CMake, not a test:
//
//     g++ -O3 -mavx2 -mfma -pthread bench/cpu_experiments/decode_value_layout_model.cpp -o model
//     ./model [rounds]
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kHeads = 8, kPositions = 32768, kFeatures = 128, kRows = 4, kSplit = 256;
constexpr int kPanel = 32, kPanels = kFeatures / kPanel;
constexpr int kTasks = kHeads * (kPositions / kSplit);
constexpr size_t kHeadFloats = size_t(kPositions) * kFeatures;

// One task: acc[row][feature] = sum over its keys of p[row][key] * v(key, feature).
// panel_stride and key_stride place v(key, feature) at
// (feature / 32) * panel_stride + key * key_stride + feature % 32.
void task(const float *v, size_t panel_stride, size_t key_stride, const float *p, float *acc) {
    for (int rt = 0; rt < kRows; rt += 2) {
        for (int ft = 0; ft < kPanels; ++ft) {
            __m256 a[2][4];
            for (auto &row : a)
                for (auto &x : row) x = _mm256_setzero_ps();
            const float *base = v + ft * panel_stride;
            for (int k = 0; k < kSplit; ++k) {
                const float *row = base + k * key_stride;
                __m256 x0 = _mm256_loadu_ps(row), x1 = _mm256_loadu_ps(row + 8);
                __m256 x2 = _mm256_loadu_ps(row + 16), x3 = _mm256_loadu_ps(row + 24);
                for (int r = 0; r < 2; ++r) {
                    __m256 b = _mm256_broadcast_ss(p + (rt + r) * kSplit + k);
                    a[r][0] = _mm256_fmadd_ps(b, x0, a[r][0]);
                    a[r][1] = _mm256_fmadd_ps(b, x1, a[r][1]);
                    a[r][2] = _mm256_fmadd_ps(b, x2, a[r][2]);
                    a[r][3] = _mm256_fmadd_ps(b, x3, a[r][3]);
                }
            }
            for (int r = 0; r < 2; ++r)
                for (int x = 0; x < 4; ++x)
                    _mm256_storeu_ps(acc + (rt + r) * kFeatures + ft * kPanel + x * 8, a[r][x]);
        }
    }
}

enum class Layout { Rows, Panels, PlainRead };

double run(const std::vector<float> &v, Layout layout, int threads) {
    std::atomic<int> next{0};
    std::vector<float> sink(threads, 0.0f);
    const auto worker = [&](int t) {
        std::vector<float> p(kRows * kSplit, 1.0f / kSplit), acc(kRows * kFeatures);
        float total = 0;
        for (int i; (i = next.fetch_add(1)) < kTasks;) {
            const int head = i / (kPositions / kSplit), split = i % (kPositions / kSplit);
            const float *h = v.data() + head * kHeadFloats;
            if (layout == Layout::Rows) {
                task(h + size_t(split) * kSplit * kFeatures, kPanel, kFeatures, p.data(),
                     acc.data());
            } else if (layout == Layout::Panels) {
                task(h + size_t(split) * kSplit * kPanel, size_t(kPositions) * kPanel, kPanel,
                     p.data(), acc.data());
            } else {
                const float *run = h + size_t(split) * kSplit * kFeatures;
                __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
                for (int f = 0; f < kSplit * kFeatures; f += 32) {
                    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(run + f));
                    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(run + f + 8));
                    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(run + f + 16));
                    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(run + f + 24));
                }
                _mm256_storeu_ps(acc.data(),
                                 _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
            }
            total += acc[t];
        }
        sink[t] = total;
    };
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (auto &th : pool) th.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (sink[0] == 12345.0f) std::puts("");
    return double(v.size()) * sizeof(float) / s / 1e9;
}

}  // namespace

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
    const int threads = 2;
    std::vector<float> v(kHeads * kHeadFloats);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 7) * 0.25f;
    std::printf("GB/s per round (2 threads, %zu MiB of values): rows, panels, plain read\n",
                v.size() * sizeof(float) >> 20);
    for (int round = 0; round < rounds; ++round) {
        const double rows = run(v, Layout::Rows, threads);
        const double panels = run(v, Layout::Panels, threads);
        const double plain = run(v, Layout::PlainRead, threads);
        std::printf("%6.1f %6.1f %6.1f   panels/rows %.2f\n", rows, panels, plain, panels / rows);
    }
}
