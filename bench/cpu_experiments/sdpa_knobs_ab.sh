#!/usr/bin/env bash
# Builds sdpa_knobs_ab.cpp with one attngen_sdpa kernel per knob setting, into OUT_DIR:
#     bench/cpu_experiments/sdpa_knobs_ab.sh OUT_DIR NAME:k=v,k=v [NAME:k=v,...]...
# Each setting overrides the x86 tuned file's knobs (generators/tuned/x86-64-linux.json,
# all_shapes); the first is the baseline the others are compared with. Needs a configured and
# built tree in build/ (its generator and libattngen.a). TARGET defaults to the AVX-512 variant.
# KERNEL=projection builds projection_knobs_ab.cpp instead, with one fused forward's projection
# per setting (attngen_linear over packed weights).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$1"
shift
target="${TARGET:-x86-64-linux-avx512_skylake-user_context-no_runtime}"
kernel="${KERNEL:-sdpa}"
case "$kernel" in
    sdpa) generator=(-g attngen_sdpa) ;;
    projection) generator=(-g attngen_linear packed_weights=true) ;;
    *)
        echo "KERNEL is sdpa or projection, not $kernel" >&2
        exit 1
        ;;
esac
mkdir -p "$out"
: > "$out/variants.h"
list=""
for setting in "$@"; do
    name="${setting%%:*}"
    knobs="${setting#*:}"
    # Two entries are not knobs: "target=..." compiles this setting for another Halide target
    # (a tuning, say), "generator=..." with another build's generator binary (a copy of the one
    # before a change to the algorithm or the schedule).
    variant_target="$target"
    variant_generator="$root/build/generators/attngen_generators"
    if [[ ",$knobs," =~ ,target=([^,]*), ]]; then variant_target="${BASH_REMATCH[1]}"; fi
    if [[ ",$knobs," =~ ,generator=([^,]*), ]]; then variant_generator="${BASH_REMATCH[1]}"; fi
    knobs=$(echo ",$knobs," | sed -e "s/,target=[^,]*,/,/" -e "s/,generator=[^,]*,/,/" \
        -e 's/^,//' -e 's/,$//')
    params=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["shapes"]["all_shapes"]["params"]
p.update(kv.split("=") for kv in sys.argv[2].split(",") if kv)
print(" ".join(f"{k}={v}" for k, v in sorted(p.items())))' \
        "$root/generators/tuned/x86-64-linux.json" "$knobs")
    "$variant_generator" "${generator[0]}" "${generator[1]}" \
        -f "${kernel}_$name" -n "${kernel}_$name" -e c_header,object -o "$out" \
        "target=$variant_target" "${generator[@]:2}" $params
    echo "#include \"${kernel}_$name.h\"" >> "$out/variants.h"
    list="$list{\"$name\", ${kernel}_$name},"
done
echo "#define ATTNGEN_VARIANTS $list" >> "$out/variants.h"
runtime_header=$(find "$root/.venv" -name HalideRuntime.h | head -1)
if [ -z "$runtime_header" ]; then
    echo "no HalideRuntime.h under $root/.venv (run scripts/setup.sh)" >&2
    exit 1
fi
halide_include=$(dirname "$runtime_header")
g++ -O2 -std=c++17 -I"$out" -I"$root/include" -I"$root/runtime" -I"$root/generators" \
    -I"$halide_include" "$root/bench/cpu_experiments/${kernel}_knobs_ab.cpp" "$out"/"$kernel"_*.o \
    "$root/build/runtime/libattngen.a" -lpthread -ldl -o "$out/${kernel}_knobs_ab"
echo "built $out/${kernel}_knobs_ab"
