#!/usr/bin/env bash
# Builds the stand-alone GPU schedule experiments (not part of the library build) into OUT_DIR:
# projection_runner, few_rows_runner and sdpa_knobs_runner, which need only a CUDA driver. Carry
# them to a lent GPU machine (scripts/gpu_session.sh's notes) and run them there.
# ATTNGEN_GPU_EXPERIMENTS names the runners to build (default: all three); ATTNGEN_SDPA_KNOBS
# lists the sdpa variants (below). ATTNGEN_EXPERIMENT_API=opencl builds the product runners for
# OpenCL instead (<kind>_runner_opencl), which check each variant's results through PoCL here.
#
#   bench/gpu_experiments/build.sh OUT_DIR [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=$(cd "${2:-$here/../../build}" && pwd)
halide=$(python3 -c 'import halide, os; print(os.path.dirname(halide.__file__))')
flags=(-std=c++17 -I"$halide/include")

# product_runner, once per variant library: projection_runner and few_rows_runner.
suffix="" api_define=()
if [ "${ATTNGEN_EXPERIMENT_API:-cuda}" = opencl ]; then
    suffix=_opencl api_define=(-DATTNGEN_EXPERIMENT_OPENCL)
fi
for kind in ${ATTNGEN_GPU_EXPERIMENTS:-projection few_rows sdpa}; do
    [ "$kind" = sdpa ] && continue
    lib="$out/$kind$suffix"
    rm -rf "$lib" && mkdir -p "$lib"
    g++ -O1 "${flags[@]}" "$here/${kind}_variants.cpp" -L"$halide/lib64" -lHalide \
        -Wl,-rpath,"$halide/lib64" -o "$lib/variants"
    "$lib/variants" "$lib"
    defines=("${api_define[@]}")
    [ "$kind" = few_rows ] && defines+=(-DATTNGEN_FEW_ROWS)
    g++ -O2 "${flags[@]}" "${defines[@]}" -I"$lib" "$here/product_runner.cpp" \
        "$lib"/g_*.a "$lib/runtime.a" -ldl -lpthread -o "$out/${kind}_runner$suffix"
done

case " ${ATTNGEN_GPU_EXPERIMENTS:-sdpa} " in *" sdpa "*) ;; *) exit 0 ;; esac

# sdpa_knobs_runner: one attngen_sdpa kernel per entry of ATTNGEN_SDPA_KNOBS, each
# query_block_key_block_query_tile_value_tile (schedule_knobs.h's gpu_ knobs), at every head size
# (the small-head knobs set to the same). With ATTNGEN_SDPA_API=opencl, an OpenCL build of
# them (sdpa_knobs_runner_opencl), whose results PoCL checks on a machine without a GPU.
api=${ATTNGEN_SDPA_API:-cuda}
if [ "$api" = opencl ]; then
    target=x86-64-linux-opencl-user_context
    defines=(-DATTNGEN_SDPA_OPENCL) runner=sdpa_knobs_runner_opencl
else
    target=x86-64-linux-cuda-cuda_capability_70-user_context
    defines=() runner=sdpa_knobs_runner
fi
sdpa="$out/sdpa_$api"
rm -rf "$sdpa" && mkdir -p "$sdpa"  # no variant of an earlier, longer list is linked in
table=() n=0
: >"$sdpa/sdpa_variants.h"
for knobs in ${ATTNGEN_SDPA_KNOBS:-16_32_1_1 16_32_2_2 16_64_2_2 32_32_2_2}; do
    IFS=_ read -r q k qt vt <<<"$knobs"
    "$build/generators/attngen_generators" -n "sdpa_v$n" -d 0 -g attngen_sdpa -f "sdpa_v$n" \
        -e object,c_header -o "$sdpa" "target=$target-no_runtime" "gpu_query_block=$q" \
        "gpu_key_block=$k" "gpu_query_tile=$qt" "gpu_value_tile=$vt" \
        "gpu_small_head_key_block=$k" "gpu_small_head_value_tile=$vt"
    echo "#include \"sdpa_v$n.h\"" >>"$sdpa/sdpa_variants.h"
    table+=("{\"q${q}_k${k}_t${qt}x${vt}\", sdpa_v$n}")
    n=$((n + 1))
done
{
    echo "using SdpaFn = decltype(&sdpa_v0);"
    echo "struct SdpaVariant { const char *name; SdpaFn fn; };"
    echo "static const SdpaVariant sdpa_variants[] = {$(IFS=,; echo "${table[*]}")};"
} >>"$sdpa/sdpa_variants.h"
"$build/generators/attngen_generators" -r runtime -e object -o "$sdpa" "target=$target"
g++ -O2 "${flags[@]}" "${defines[@]}" -I"$sdpa" -I"$here" "$here/sdpa_knobs_runner.cpp" \
    "$sdpa"/sdpa_v*.o "$sdpa/runtime.o" -ldl -lpthread -o "$out/$runner"
