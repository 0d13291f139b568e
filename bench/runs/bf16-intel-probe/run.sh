#!/usr/bin/env bash
# The bfloat16 forward with its AVX512-BF16 variant forced (ATTNGEN_CPU_DISPATCH=avx512_bf16)
# against the variant the probe picks (default) and the float32 forward, alternated per round.
set -euo pipefail
bench=${1:-build/bench/attngen_bench}
out=$(dirname "$0")
for round in 1 2 3; do
    for dispatch in default avx512_bf16; do
        env_cap=""
        [ "$dispatch" = default ] || env_cap=$dispatch
        filter='^mha_forward_bf16/'
        [ "$dispatch" = default ] && filter='^(mha_forward|mha_forward_bf16|fma_peak|fma_peak_bf16)/'
        ATTNGEN_CPU_DISPATCH=$env_cap "$bench" --benchmark_filter="$filter" \
            --benchmark_min_time=0.3 --benchmark_repetitions=3 \
            --benchmark_out="$out/${dispatch}_$round.json" --benchmark_out_format=json >/dev/null
    done
done
