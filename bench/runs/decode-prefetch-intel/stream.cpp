#include <immintrin.h>
#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
// Mimics decode long-decode: 8 kv heads x 32768 keys x 128 features, K blocks (32 pos, 128 f), V
// rows.
constexpr int H = 8, L = 32768, D = 128;
static float *alloc(size_t n) {
    void *p = aligned_alloc(2 << 20, n * 4);
    madvise(p, n * 4, MADV_HUGEPAGE);
    for (size_t i = 0; i < n; ++i) ((float *)p)[i] = 0.001f * (i % 7);
    return (float *)p;
}
float *K, *V;
float q[4][D];
volatile float sinkv;
int split = 256, pf = 0, mode = 0, pfv = 0;
// Mode 10: the block copied first (64 floats per step, 4 vectors), then read from the copy.
static const float *copy_block(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i += 64) {
        __m512 a0 = _mm512_load_ps(src + i), a1 = _mm512_load_ps(src + i + 16),
               a2 = _mm512_load_ps(src + i + 32), a3 = _mm512_load_ps(src + i + 48);
        _mm512_store_ps(dst + i, a0);
        _mm512_store_ps(dst + i + 16, a1);
        _mm512_store_ps(dst + i + 32, a2);
        _mm512_store_ps(dst + i + 48, a3);
    }
    return dst;
}
__attribute__((noinline)) float task(int t) {
    int nsplit = L / split;
    int hk = t / nsplit, s = t % nsplit;
    const float *k = K + ((size_t)hk * L + (size_t)s * split) * D;
    const float *v = V + ((size_t)hk * L + (size_t)s * split) * D;
    static thread_local float *kl = (float *)aligned_alloc(64, 8192 * D * 4),
                              *vl = (float *)aligned_alloc(64, 8192 * D * 4);
    if (mode == 10) k = copy_block(kl, k, (size_t)split * D);
    alignas(64) float sc[4][8192];
    if (mode == 1) {  // pure streaming sum
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = 0; i < (size_t)split * D; i += 64) {
            a0 = _mm512_add_ps(a0, _mm512_load_ps(k + i));
            a1 = _mm512_add_ps(a1, _mm512_load_ps(k + i + 16));
            a2 = _mm512_add_ps(a2, _mm512_load_ps(k + i + 32));
            a3 = _mm512_add_ps(a3, _mm512_load_ps(k + i + 48));
        }
        for (size_t i = 0; i < (size_t)split * D; i += 64) {
            a0 = _mm512_add_ps(a0, _mm512_load_ps(v + i));
            a1 = _mm512_add_ps(a1, _mm512_load_ps(v + i + 16));
            a2 = _mm512_add_ps(a2, _mm512_load_ps(v + i + 32));
            a3 = _mm512_add_ps(a3, _mm512_load_ps(v + i + 48));
        }
        return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    if (mode == 6 || mode == 7)
        for (size_t i = 0; i < (size_t)split * D; i += 64) {
            s0 = _mm512_add_ps(s0, _mm512_load_ps(k + i));
            s1 = _mm512_add_ps(s1, _mm512_load_ps(k + i + 16));
            s2 = _mm512_add_ps(s2, _mm512_load_ps(k + i + 32));
            s3 = _mm512_add_ps(s3, _mm512_load_ps(k + i + 48));
        }
    if (mode == 5) {
        for (size_t i = 0; i < (size_t)split * D; i += 64) {
            s0 = _mm512_add_ps(s0, _mm512_load_ps(v + i));
            s1 = _mm512_add_ps(s1, _mm512_load_ps(v + i + 16));
            s2 = _mm512_add_ps(s2, _mm512_load_ps(v + i + 32));
            s3 = _mm512_add_ps(s3, _mm512_load_ps(v + i + 48));
        }
    }
    float extra = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    for (int blk = 0; blk < split / 32 && mode != 6 && mode != 7; ++blk) {
        const float *kb = k + (size_t)blk * 32 * D;
        __m512 acc[4][2] = {};
        for (int f = 0; f < D; ++f) {
            if (pf) {
                _mm_prefetch((const char *)(kb + pf * 1024 + f * 32), _MM_HINT_T0);
                _mm_prefetch((const char *)(kb + pf * 1024 + f * 32 + 16), _MM_HINT_T0);
            }
            __m512 k0 = _mm512_load_ps(kb + f * 32), k1 = _mm512_load_ps(kb + f * 32 + 16);
            for (int r = 0; r < 4; ++r) {
                __m512 b = _mm512_set1_ps(q[r][f]);
                acc[r][0] = _mm512_fmadd_ps(b, k0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(b, k1, acc[r][1]);
            }
        }
        for (int r = 0; r < 4; ++r) {
            _mm512_store_ps(&sc[r][blk * 32], acc[r][0]);
            _mm512_store_ps(&sc[r][blk * 32 + 16], acc[r][1]);
        }
    }
    for (int r = 0; r < 4; ++r)
        for (int j = 0; j < split; ++j) sc[r][j] = sc[r][j] * 0.01f;
    float tot = 0;
    if (mode == 10) v = copy_block(vl, v, (size_t)split * D);
    if (mode == 8) {
        alignas(64) float accm[4][D] = {};
        for (int j0 = 0; j0 < split; j0 += 32) {
            for (int rt = 0; rt < 2; ++rt) {
                __m512 acc[2][8];
                for (int c = 0; c < 8; ++c) {
                    acc[0][c] = _mm512_load_ps(&accm[rt * 2][c * 16]);
                    acc[1][c] = _mm512_load_ps(&accm[rt * 2 + 1][c * 16]);
                }
                for (int j = j0; j < j0 + 32; ++j) {
                    if (pfv && rt == 0)
                        for (int c = 0; c < 8; ++c)
                            _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + c * 16),
                                         _MM_HINT_T0);
                    __m512 p0 = _mm512_set1_ps(sc[rt * 2][j]),
                           p1 = _mm512_set1_ps(sc[rt * 2 + 1][j]);
                    for (int c = 0; c < 8; ++c) {
                        __m512 x = _mm512_load_ps(v + (size_t)j * D + c * 16);
                        acc[0][c] = _mm512_fmadd_ps(p0, x, acc[0][c]);
                        acc[1][c] = _mm512_fmadd_ps(p1, x, acc[1][c]);
                    }
                }
                for (int c = 0; c < 8; ++c) {
                    _mm512_store_ps(&accm[rt * 2][c * 16], acc[0][c]);
                    _mm512_store_ps(&accm[rt * 2 + 1][c * 16], acc[1][c]);
                }
            }
        }
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < D; ++c) tot += accm[r][c];
        return tot + extra;
    }
    for (int rt = 0; rt < (mode == 2 || mode == 7 ? 1 : mode == 5 ? 0 : 2); ++rt) {
        __m512 acc[2][8] = {};
        for (int j = 0; j < split; ++j) {
            if (pfv && rt == 0)
                _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D), _MM_HINT_T0),
                    _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + 16), _MM_HINT_T0),
                    _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + 32), _MM_HINT_T0),
                    _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + 48), _MM_HINT_T0),
                    _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + 64), _MM_HINT_T0),
                    _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + 80), _MM_HINT_T0),
                    _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + 96), _MM_HINT_T0),
                    _mm_prefetch((const char *)(v + (size_t)(j + pfv) * D + 112), _MM_HINT_T0);
            __m512 p0 = _mm512_set1_ps(sc[rt * 2][j]), p1 = _mm512_set1_ps(sc[rt * 2 + 1][j]);
            for (int c = 0; c < 8; ++c) {
                __m512 x = _mm512_load_ps(v + (size_t)j * D + c * 16);
                acc[0][c] = _mm512_fmadd_ps(p0, x, acc[0][c]);
                acc[1][c] = _mm512_fmadd_ps(p1, x, acc[1][c]);
            }
        }
        for (int c = 0; c < 8; ++c)
            tot += _mm512_reduce_add_ps(_mm512_add_ps(acc[0][c], acc[1][c]));
    }
    return tot + extra;
}
int main(int argc, char **argv) {
    split = atoi(argv[1]);
    pf = atoi(argv[2]);
    mode = atoi(argv[3]);
    int threads = argc > 4 ? atoi(argv[4]) : 2;
    pfv = argc > 5 ? atoi(argv[5]) : 0;
    K = alloc((size_t)H * L * D);
    V = alloc((size_t)H * L * D);
    for (int r = 0; r < 4; ++r)
        for (int f = 0; f < D; ++f) q[r][f] = 0.01f * f;
    int ntasks = H * (L / split);
    std::vector<double> times;
    for (int it = 0; it < 15; ++it) {
        std::atomic<int> next{0};
        auto t0 = std::chrono::steady_clock::now();
        auto work = [&] {
            float s = 0;
            for (int t; (t = next.fetch_add(1)) < ntasks;) s += task(t);
            sinkv = s;
        };
        std::vector<std::thread> th;
        for (int i = 1; i < threads; ++i) th.emplace_back(work);
        work();
        for (auto &t : th) t.join();
        times.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    double bytes = 2.0 * H * L * D * 4;
    printf("pfv %d split %d pf %d mode %d threads %d: median %.2f ms %.1f GB/s  best %.1f GB/s\n",
           pfv, split, pf, mode, threads, times[7] * 1e3, bytes / times[7] * 1e-9,
           bytes / times[0] * 1e-9);
}
