// Is a one-row decoding step's score pass held back by its FMA chains? The split-KV kernel's
// one-row score tile (schedule_decode_attention_cpu) keeps two AVX-512 accumulators, one per
// half of a cache block of 32 keys, so each step of the reduction over the head's features waits
// on the FMA before it in the same chain. This is that pass with AVX-512 intrinsics, over blocks
// laid out as the cache's keys (layout.h: 32 positions innermost, 64 features), once with two
// chains and once with four (even and odd features apart, added at the end), run by several
// threads at once, each over its own part of the buffer, in alternating rounds. A buffer of a few
// MiB stays in L3 (a GPT-2 step's 6.3 MB of keys and values); 512 KiB on one thread, in L2.
// Each variant's first block is checked against a double sum before it is timed. Not built by
// CMake, not a test:
//
//     g++ -O2 -std=c++17 -mavx512f -mfma -pthread bench/cpu_experiments/decode_score_chains.cpp
//         -o decode_score_chains                                         (one command)
//     ./decode_score_chains [buffer bytes, default 6 MiB] [threads, default 2]
//
// bench/RESULTS.md (2026-12-03, "the timeline's threads") has what it measured.
#include <immintrin.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kFeatures = 64, kBlockKeys = 32;
constexpr size_t kBlockFloats = size_t(kFeatures) * kBlockKeys;

template <int Chains>
void score_blocks(const float *keys, const float *q, float *scores, size_t blocks) {
    static_assert(Chains == 2 || Chains == 4);
    for (size_t b = 0; b < blocks; ++b) {
        const float *block = keys + b * kBlockFloats;
        __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
        __m512 lo_odd = _mm512_setzero_ps(), hi_odd = _mm512_setzero_ps();
        for (int d = 0; d < kFeatures; d += Chains / 2) {
            const __m512 qd = _mm512_set1_ps(q[d]);
            lo = _mm512_fmadd_ps(qd, _mm512_load_ps(block + d * kBlockKeys), lo);
            hi = _mm512_fmadd_ps(qd, _mm512_load_ps(block + d * kBlockKeys + 16), hi);
            if (Chains == 4) {
                const __m512 qo = _mm512_set1_ps(q[d + 1]);
                lo_odd = _mm512_fmadd_ps(qo, _mm512_load_ps(block + (d + 1) * kBlockKeys), lo_odd);
                hi_odd =
                    _mm512_fmadd_ps(qo, _mm512_load_ps(block + (d + 1) * kBlockKeys + 16), hi_odd);
            }
        }
        _mm512_storeu_ps(scores + b * kBlockKeys, _mm512_add_ps(lo, lo_odd));
        _mm512_storeu_ps(scores + b * kBlockKeys + 16, _mm512_add_ps(hi, hi_odd));
    }
}

using Pass = void (*)(const float *, const float *, float *, size_t);

bool first_block_right(Pass pass, const float *keys, const float *q) {
    float scores[kBlockKeys];
    pass(keys, q, scores, 1);
    for (int j = 0; j < kBlockKeys; ++j) {
        double want = 0.0;
        for (int d = 0; d < kFeatures; ++d) want += double(q[d]) * keys[d * kBlockKeys + j];
        if (std::fabs(scores[j] - want) > 1e-4 * (1.0 + std::fabs(want))) return false;
    }
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t(6) << 20;
    const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
    const size_t blocks_per_thread = bytes / sizeof(float) / kBlockFloats / threads;
    if (threads < 1 || blocks_per_thread == 0) {
        std::fprintf(stderr, "need at least one block (%zu bytes) per thread\n",
                     kBlockFloats * sizeof(float));
        return 2;
    }
    const size_t floats = blocks_per_thread * threads * kBlockFloats;
    auto *keys = static_cast<float *>(std::aligned_alloc(64, floats * sizeof(float)));
    for (size_t i = 0; i < floats; ++i) keys[i] = float(int(i % 13) - 6) * 0.125f;
    alignas(64) float q[kFeatures];
    for (int d = 0; d < kFeatures; ++d) q[d] = 0.015625f * float(d % 9 - 4);
    std::vector<float> scores(blocks_per_thread * threads * kBlockKeys);

    const Pass passes[] = {score_blocks<2>, score_blocks<4>};
    const int chains[] = {2, 4};
    for (int v = 0; v < 2; ++v) {
        if (!first_block_right(passes[v], keys, q)) {
            std::fprintf(stderr, "%d chains: wrong scores\n", chains[v]);
            return 1;
        }
    }
    constexpr int kRounds = 6, kPassesPerRound = 200;
    for (int round = 0; round < kRounds; ++round) {
        for (int v = 0; v < 2; ++v) {
            const auto start = std::chrono::steady_clock::now();
            std::vector<std::thread> workers;
            for (int t = 0; t < threads; ++t) {
                workers.emplace_back([&, t] {
                    const float *mine = keys + t * blocks_per_thread * kBlockFloats;
                    float *out = scores.data() + t * blocks_per_thread * kBlockKeys;
                    for (int r = 0; r < kPassesPerRound; ++r)
                        passes[v](mine, q, out, blocks_per_thread);
                });
            }
            for (std::thread &w : workers) w.join();
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::printf("round %d, %d chains: %.1f GB/s\n", round, chains[v],
                        double(floats) * sizeof(float) * kPassesPerRound / seconds * 1e-9);
        }
    }
    std::free(keys);
    return 0;
}
