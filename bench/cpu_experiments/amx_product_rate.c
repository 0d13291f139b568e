// What does one AMX tile product (tdpbf16ps: 16 x 16 float32 sums over 32 bfloat16 features,
// 16384 flops) cost on this CPU, with the operands a projection gives it? The loop is the AMX
// projection's (generators/schedule_cpu_projection.cpp): one accumulator, both tiles loaded for
// each product, a task of 128 outputs by 512 rows over 768 features, the weights in panels of
// 16 outputs (one contiguous KiB per tile, layout.h). Two loop orders (the row tiles outside the
// output tiles, as the library runs, or inside them), operands zero or random bfloat16 in
// [0.5, 1) with either sign, the same operands each repetition (warm in L2) or one of 8 sets in
// turn (cold). Then random operands whose rows are rewritten before each pass, by this core
// alone or half of them by the other core (in the forward, each projection task reads rows that
// both cores rounded). Not built by CMake, not a test (pins itself to CPUs 0 and 1):
//
//     gcc -O2 -pthread -mamx-tile -mamx-bf16 -o amx_product_rate
//         bench/cpu_experiments/amx_product_rate.c                           (one command)
//     ./amx_product_rate
//
// Measured on the Intel Xeon with AMX of session 83 (bench/RESULTS.md; TSC 2.6 GHz), in TSC
// cycles a product (bench/runs/intel-amx-d7d8a99/amx_product_rate*.txt). The host's own rate
// moved by 1.5x between runs minutes apart: random operands, warm, 31-34 cycles in some runs and
// 42-56 in others. Within a run: cold operands 1.1-1.35x the warm time; rows rewritten by both
// cores 1.06-1.19x the time of rows rewritten by this core alone (5 runs of 5); the loop order
// and zero against random operands within about 25%. The library's projection tasks in the
// forward (mha_forward_bf16/bert-512: 6144 products a task, 3 tasks a core in 330-380 us) take
// 47-54 cycles a product, inside that range; their rows are rounded by both cores. (A first
// version that left the operands untouched in .bss read every tile from the one zero page, in
// L1: 13 cycles.)
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

enum { kIn = 768, kBlocks = kIn / 32, kOutputs = 128, kRows = 512, kSets = 8, kRepeats = 16 };

typedef struct {
    uint8_t palette, start;
    uint8_t reserved[14];
    uint16_t column_bytes[16];
    uint8_t rows[16];
} TileConfig;

static uint16_t rows_in[kSets][kRows][kIn] __attribute__((aligned(64)));
static uint16_t weights[kSets][kOutputs / 16][kBlocks][512] __attribute__((aligned(64)));
static float sums[kRows][kOutputs] __attribute__((aligned(64)));

static void fill(int random_data) {
    uint32_t state = 12345;
    uint16_t *all[2] = {&rows_in[0][0][0], &weights[0][0][0][0]};
    const size_t counts[2] = {sizeof rows_in / 2, sizeof weights / 2};
    for (int a = 0; a < 2; a++) {
        for (size_t i = 0; i < counts[a]; i++) {
            state = state * 1664525u + 1013904223u;
            all[a][i] = random_data ? (uint16_t)(0x3f00 | ((state >> 16) & 0x807f)) : 0;
        }
    }
}

// Rows [first, last) of set 0, rewritten with values that depend on `pass`.
static void rewrite_rows(int first, int last, int pass) {
    for (int r = first; r < last; r++) {
        for (int f = 0; f < kIn; f++) {
            rows_in[0][r][f] = (uint16_t)(0x3f00 | ((r * 31 + f * 7 + pass) & 0x807f));
        }
    }
}

static void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The other core's half of each pass's rows: pass n starts when `requested` reaches n.
static atomic_int requested, rewritten;
static void *rewrite_on_other_core(void *unused) {
    (void)unused;
    pin_to(1);
    for (int pass = 1; pass <= kRepeats; pass++) {
        while (atomic_load(&requested) < pass) {
        }
        rewrite_rows(kRows / 2, kRows, pass);
        atomic_store(&rewritten, pass);
    }
    return NULL;
}

static inline __attribute__((always_inline)) void product(int row_tile, int output_tile, int set) {
    _tile_zero(0);
    for (int k = 0; k < kBlocks; k++) {
        _tile_loadd(1, &rows_in[set][16 * row_tile][32 * k], 2 * kIn);
        _tile_loadd(2, weights[set][output_tile][k], 64);
        _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, &sums[16 * row_tile][16 * output_tile], 4 * kOutputs);
}

int main(void) {
    pin_to(0);
    // Linux grants AMX's tile data only on request (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
        fprintf(stderr, "Linux did not grant the AMX tile state\n");
        return 1;
    }
    TileConfig config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    for (int t = 0; t < 3; t++) {
        config.column_bytes[t] = 64;
        config.rows[t] = 16;
    }
    _tile_loadconfig(&config);
    const double products = (double)kRepeats * (kRows / 16) * (kOutputs / 16) * kBlocks;
    for (int random_data = 0; random_data < 2; random_data++) {
        fill(random_data);
        for (int cold = 0; cold < 2; cold++) {
            for (int rows_inside = 0; rows_inside < 2; rows_inside++) {
                const uint64_t start = __rdtsc();
                for (int n = 0; n < kRepeats; n++) {
                    const int set = cold ? n % kSets : 0;
                    for (int outer = 0; outer < (rows_inside ? kOutputs : kRows) / 16; outer++) {
                        for (int inner = 0; inner < (rows_inside ? kRows : kOutputs) / 16;
                             inner++) {
                            if (rows_inside) {
                                product(inner, outer, set);
                            } else {
                                product(outer, inner, set);
                            }
                        }
                    }
                }
                printf(
                    "%s operands, %s, row tiles %s the output tiles: %.1f TSC cycles a product\n",
                    random_data ? "random" : "zero", cold ? "cold" : "warm",
                    rows_inside ? "inside" : "outside", (__rdtsc() - start) / products);
            }
        }
    }
    pthread_t other;
    pthread_create(&other, NULL, rewrite_on_other_core, NULL);
    for (int both_cores = 0; both_cores < 2; both_cores++) {
        uint64_t cycles = 0;
        for (int pass = 1; pass <= kRepeats; pass++) {
            if (both_cores) {
                rewrite_rows(0, kRows / 2, pass);
                atomic_store(&requested, pass);
                while (atomic_load(&rewritten) < pass) {
                }
            } else {
                rewrite_rows(0, kRows, pass);
            }
            const uint64_t start = __rdtsc();
            for (int row_tile = 0; row_tile < kRows / 16; row_tile++) {
                for (int output_tile = 0; output_tile < kOutputs / 16; output_tile++) {
                    product(row_tile, output_tile, 0);
                }
            }
            cycles += __rdtsc() - start;
        }
        printf(
            "random operands, rows rewritten by %s before each pass: %.1f TSC cycles a product\n",
            both_cores ? "both cores" : "this core", cycles / products);
    }
    pthread_join(other, NULL);
    _tile_release();
    return 0;
}
