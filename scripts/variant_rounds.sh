#!/usr/bin/env bash
# attngen_bench on the AVX-512 (the dispatcher's default) and AVX2 variants, alternated round by
# round, so that each variant's fraction of the FMA peak (the `peak` counter, against fma_peak
# measured in the same process) is compared with the other's measured minutes apart.
# Writes OUT_DIR/variants_{default,avx2}_round<N>.txt.
#
#     scripts/variant_rounds.sh OUT_DIR BENCHMARK_FILTER [ROUNDS (2)]
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 OUT_DIR BENCHMARK_FILTER [ROUNDS]" >&2
    exit 2
fi
out=$1 filter=$2 rounds=${3:-2}
cd "$(dirname "$0")/.."
for round in $(seq 1 "$rounds"); do
    for variant in default avx2; do
        dispatch=()
        [ "$variant" = avx2 ] && dispatch=(ATTNGEN_CPU_DISPATCH=avx2)
        env "${dispatch[@]}" build/bench/attngen_bench \
            --benchmark_filter="$filter" --benchmark_repetitions=3 \
            --benchmark_report_aggregates_only=true --benchmark_min_time=1 \
            > "$out/variants_${variant}_round${round}.txt" 2>&1
    done
done
