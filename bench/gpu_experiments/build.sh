#!/usr/bin/env bash
# Builds the stand-alone GPU schedule experiments (not part of the library build) into OUT_DIR:
# projection_runner, few_rows_runner and sdpa_knobs_runner, which need only a CUDA driver. Carry
# them to a lent GPU machine (scripts/gpu_session.sh's notes) and run them there.
# ATTNGEN_SDPA_KNOBS lists the sdpa variants as query_block_key_block (four of them).
#
#   bench/gpu_experiments/build.sh OUT_DIR [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=$(cd "${2:-$here/../../build}" && pwd)
halide=$(python3 -c 'import halide, os; print(os.path.dirname(halide.__file__))')
flags=(-std=c++17 -I"$halide/include")
cuda=x86-64-linux-cuda-cuda_capability_70-user_context-no_runtime

# product_runner, once per variant library: projection_runner and few_rows_runner.
for kind in projection few_rows; do
    mkdir -p "$out/$kind"
    g++ -O1 "${flags[@]}" "$here/${kind}_variants.cpp" -L"$halide/lib64" -lHalide \
        -Wl,-rpath,"$halide/lib64" -o "$out/$kind/variants"
    "$out/$kind/variants" "$out/$kind"
    defines=()
    [ "$kind" = few_rows ] && defines=(-DATTNGEN_FEW_ROWS)
    g++ -O2 "${flags[@]}" "${defines[@]}" -I"$out/$kind" "$here/product_runner.cpp" \
        "$out/$kind"/g_*.a "$out/$kind/runtime.a" -ldl -lpthread -o "$out/${kind}_runner"
done

mkdir -p "$out/sdpa"
labels=() n=0
for knobs in ${ATTNGEN_SDPA_KNOBS:-16_32 16_64 8_32 16_16}; do
    q=${knobs%_*} k=${knobs#*_}
    "$build/generators/attngen_generators" -n "sdpa_v$n" -d 0 -g attngen_sdpa -f "sdpa_v$n" \
        -e object -o "$out/sdpa" "target=$cuda" "gpu_query_block=$q" "gpu_key_block=$k"
    labels+=("\"q${q}_k${k}\"") n=$((n + 1))
done
g++ -O2 "${flags[@]}" "-DSDPA_LABELS=$(IFS=,; echo "${labels[*]}")" "$here/sdpa_knobs_runner.cpp" \
    "$out/sdpa"/sdpa_v*.o "$out/projection/runtime.a" -ldl -lpthread -o "$out/sdpa_knobs_runner"
