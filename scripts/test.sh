#!/usr/bin/env bash
# Set up and build attngen, then run the whole test suite with CTest. Exits non-zero when any
# test fails. Pass a CTest label to run one suite only, e.g. scripts/test.sh -L host.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${ATTNGEN_BUILD_DIR:-$root/build}
# The sanitized suite and the fuzzer are on by default where the tools exist; CI insists on them
# (setup.sh installs clang and its runtime), so a missing tool fails instead of skipping them.
"$root/scripts/setup.sh" -DATTNGEN_SANITIZER_TESTS=ON -DATTNGEN_FUZZ=ON
export PATH=$root/.venv/bin:$PATH
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "${ATTNGEN_JOBS:-$(nproc)}" "$@" || status=$?
# Which CPU ran the suite: the kernels' variant, and so what a failure means, depends on it
# (AVX-512, AVX512-BF16, AMX). Last, where a truncated log still shows it.
field() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true; }
model="$(field 'model name') (family $(field 'cpu family'), model $(field model))"
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
        grep -x -E 'avx2|avx512f|avx512_bf16|amx_tile|amx_bf16' | tr '\n' ' ' || true)
echo "tests ran on: $model, $(nproc) cores; ${flags:-none of AVX2, AVX-512, AMX}"
exit "$status"
