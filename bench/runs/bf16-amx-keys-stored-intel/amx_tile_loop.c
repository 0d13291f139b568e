// An experiment, not part of the build: the AMX projection task's tile loop (one accumulator,
// as Halide 21 emits it) in C, to see what the loop costs on its own. Results and the variants:
// amx_tile_loop.txt. gcc -O2 -mamx-tile -mamx-bf16 amx_tile_loop.c; arguments: task share
// (thread index, thread count) for running two processes at once.
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>
typedef struct {
    uint8_t palette, start;
    uint8_t r[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) cfg_t;
enum { ROWS = 4096, K = 768, OUT = 768, KT = K / 32, TASK_ROWS = 512, GROUP = 128 };
static uint16_t *A, *B;
static float *C;
static float *X;
static double run(int variant, int reps, int tid, int nth) {
    unsigned long long tot = 0;
    for (int r = 0; r < reps; ++r) {
        if (variant >= 2 &&
            variant != 3) {  // rewrite operand rows (like the operand pass), from float input
            for (size_t i = 0; i < (size_t)ROWS * K; ++i)
                A[i] = (uint16_t)(((uint32_t *)X)[i] >> 16);
        }
        unsigned long long t0 = __rdtsc();
        int tasks = (ROWS / TASK_ROWS) * (OUT / GROUP);
        for (int task = tid; task < tasks; task += nth) {
            int g = task % (OUT / GROUP), rb = task / (OUT / GROUP);
            if (variant == 3) {  // prefetch the A rows of this task into L2 first? emulate with
                                 // prefetcht1 per line
            }
            if (variant >= 4) {
                for (int n = 0; n < TASK_ROWS / 16; ++n)
                    for (int t = 0; t < GROUP / 16; ++t) {
                        int nn = variant == 5 ? (n * (GROUP / 16) + t) % (TASK_ROWS / 16) : n,
                            tt = variant == 5 ? (n * (GROUP / 16) + t) / (TASK_ROWS / 16) : t;
                        const uint16_t *a = A + (size_t)(rb * TASK_ROWS + nn * 16) * K;
                        _tile_zero(0);
                        const uint16_t *b = B + (size_t)(g * (GROUP / 16) + tt) * (K / 2) * 32;
                        if (variant == 6)
                            for (int k = 0; k < KT; ++k) {
                                _tile_loadd(1, a + k * 32, K * 2);
                                _tile_loadd(2, b + (size_t)k * 16 * 32, 64);
                                _tile_dpbf16ps(0, 1, 2);
                            }
                        else
                            for (int k = 0; k < KT; ++k) {
                                _tile_loadd(1, a + k * 512, 64);
                                _tile_loadd(2, b + (size_t)k * 16 * 32, 64);
                                _tile_dpbf16ps(0, 1, 2);
                            }
                        _tile_stored(
                            0,
                            C + ((size_t)(rb * TASK_ROWS + nn * 16) * OUT + (g * GROUP + tt * 16)),
                            OUT * 4);
                    }
                continue;
            }
            for (int n = 0; n < TASK_ROWS / 16; ++n) {
                const uint16_t *a = A + (size_t)(rb * TASK_ROWS + n * 16) * K;
                if (variant == 3 && n + 1 < TASK_ROWS / 16)
                    for (int rr = 0; rr < 16; ++rr)
                        for (int c = 0; c < K * 2; c += 64)
                            _mm_prefetch((const char *)(a + 16 * K + rr * K) + c, _MM_HINT_T1);
                for (int t = 0; t < GROUP / 16; ++t) {
                    _tile_zero(0);
                    const uint16_t *b = B + (size_t)(g * (GROUP / 16) + t) * (K / 2) * 32;
                    for (int k = 0; k < KT; ++k) {
                        _tile_loadd(1, a + k * 32, K * 2);
                        _tile_loadd(2, b + (size_t)k * 16 * 32, 64);
                        _tile_dpbf16ps(0, 1, 2);
                    }
                    _tile_stored(
                        0, C + ((size_t)(rb * TASK_ROWS + n * 16) * OUT + (g * GROUP + t * 16)),
                        OUT * 4);
                }
            }
        }
        tot += __rdtsc() - t0;
    }
    return (double)tot / reps / ((ROWS / 16) * (OUT / 16) * KT / nth);
}
int main(int argc, char **argv) {
    int tid = argc > 1 ? atoi(argv[1]) : 0, nth = argc > 2 ? atoi(argv[2]) : 1;
    syscall(SYS_arch_prctl, 0x1023, 18);
    A = aligned_alloc(64, (size_t)ROWS * K * 2);
    B = aligned_alloc(64, (size_t)OUT * K * 2);
    C = aligned_alloc(64, (size_t)ROWS * OUT * 4);
    X = aligned_alloc(64, (size_t)ROWS * K * 4);
    for (size_t i = 0; i < (size_t)ROWS * K; ++i) {
        A[i] = 0x3f00 + (rand() & 0xff);
        X[i] = (float)rand() / RAND_MAX;
    }
    for (size_t i = 0; i < (size_t)OUT * K; ++i) {
        B[i] = 0xbf00 + (rand() & 0xff);
    }
    memset(C, 0, (size_t)ROWS * OUT * 4);
    cfg_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; ++i) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
    double best[7] = {1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9};
    for (int pass = 0; pass < 4; ++pass)
        for (int v = 1; v <= 6; ++v) {
            double x = run(v, 5, tid, nth);
            if (x < best[v]) best[v] = x;
        }
    for (int v = 1; v <= 6; ++v) printf("variant %d: %.1f\n", v, best[v]);
    _tile_release();
}
