#!/usr/bin/env bash
# Builds sdpa_knobs_ab.cpp with one attngen_sdpa kernel per knob setting, into OUT_DIR:
#     bench/cpu_experiments/sdpa_knobs_ab.sh OUT_DIR NAME:k=v,k=v [NAME:k=v,...]...
# Each setting overrides the x86 tuned file's knobs (generators/tuned/x86-64-linux.json,
# all_shapes); the first is the baseline the others are compared with. Needs a configured and
# built tree in build/ (its generator and libattngen.a). TARGET defaults to the AVX-512 variant.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$1"
shift
target="${TARGET:-x86-64-linux-avx512_skylake-user_context-no_runtime}"
mkdir -p "$out"
: > "$out/variants.h"
list=""
for setting in "$@"; do
    name="${setting%%:*}"
    knobs="${setting#*:}"
    params=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["shapes"]["all_shapes"]["params"]
p.update(kv.split("=") for kv in sys.argv[2].split(",") if kv)
print(" ".join(f"{k}={v}" for k, v in sorted(p.items())))' \
        "$root/generators/tuned/x86-64-linux.json" "$knobs")
    "$root/build/generators/attngen_generators" -g attngen_sdpa -f "sdpa_$name" \
        -n "sdpa_$name" -e c_header,object -o "$out" "target=$target" $params
    echo "#include \"sdpa_$name.h\"" >> "$out/variants.h"
    list="$list{\"$name\", sdpa_$name},"
done
echo "#define ATTNGEN_VARIANTS $list" >> "$out/variants.h"
runtime_header=$(find "$root/.venv" -name HalideRuntime.h | head -1)
if [ -z "$runtime_header" ]; then
    echo "no HalideRuntime.h under $root/.venv (run scripts/setup.sh)" >&2
    exit 1
fi
halide_include=$(dirname "$runtime_header")
g++ -O2 -std=c++17 -I"$out" -I"$root/include" -I"$root/runtime" -I"$root/generators" \
    -I"$halide_include" "$root/bench/cpu_experiments/sdpa_knobs_ab.cpp" "$out"/sdpa_*.o \
    "$root/build/runtime/libattngen.a" -lpthread -ldl -o "$out/sdpa_knobs_ab"
echo "built $out/sdpa_knobs_ab"
