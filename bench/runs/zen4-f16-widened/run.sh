#!/usr/bin/env bash
# Session 90 (2026-12-07), AMD EPYC Zen 4, 2 threads: float16 weights widened once per block on
# the variants without F16C. OLD is a build of the commit before (its generator changes
# reverted: `git revert --no-commit 03b0799` in a worktree), NEW this tree's build.
set -euo pipefail
OLD=${OLD:-/work/old/build}
NEW=${NEW:-build}
# peaks.txt
$NEW/bench/attngen_bench --benchmark_filter='^(fma_peak|fma_peak_avx2|fma_peak_sse41|fma_peak_bf16|resident_read_bandwidth|read_bandwidth)'
# paired_f16.txt: the two builds' calls alternated, per dispatch variant
for d in sse41 avx2 avx512; do
    echo "== ATTNGEN_CPU_DISPATCH=$d"
    ATTNGEN_CPU_DISPATCH=$d .venv/bin/python scripts/paired_ab.py $OLD/bench/attngen_call_server \
        $NEW/bench/attngen_call_server tutorial,bert-128,bert-512,llama3-8b-prefill,gpt2-decode \
        --f16 --pairs 6 --sessions 2 --request-ms 60
done
# forward_old_new.txt: whole attngen_bench processes, old and new alternated twice, float32
# weights beside float16 in each process
for i in 1 2; do
    for b in $OLD/bench/attngen_bench $NEW/bench/attngen_bench; do
        for d in sse41 avx2 avx512; do
            ATTNGEN_CPU_DISPATCH=$d $b --benchmark_filter='^mha_forward(|_f16)/(bert-128|bert-512)/' \
                --benchmark_min_time=0.3
        done
    done
done
# survey_variants_precisions.txt: every dispatch variant and precision, the new build
for d in avx512 avx2 sse41 baseline; do
    ATTNGEN_CPU_DISPATCH=$d $NEW/bench/attngen_bench --benchmark_min_time=0.2 \
        --benchmark_filter='^mha_forward(|_bf16|_f16)/(bert-128)/|^decode(|_bf16|_f16)/(gpt2-decode|llama3-8b-prefill)/'
done
