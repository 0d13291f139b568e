#!/usr/bin/env bash
# Packs what scripts/gpu_session.sh needs on a lent GPU machine into .gpu/ (ignored by git,
# carried by the device tool): the CUDA device suite with its ctest files, attngen_bench_device
# and the shared libraries they need that such a machine lacks. AOT kernels need no libHalide.
# The stand-alone schedule experiments' runners go in too where bench/gpu_experiments/build.sh
# left them in <build-dir>/gpu_experiments.
#
#   scripts/gpu_bundle.sh [build-dir]      # then carry .gpu
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .gpu && mkdir -p .gpu/lib
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo /.gpu/ >>.git/info/exclude; }
cp -L "$(ldd "$build/bench/attngen_bench_device" | awk '/libbenchmark/ {print $3}')" .gpu/lib/
realpath "$build/.." >.gpu/build_root
staging=$(mktemp -d)
mkdir -p "$staging/build/tests" "$staging/build/bench"
strip -o "$staging/build/tests/attngen_device_tests" "$build/tests/attngen_device_tests"
strip -o "$staging/build/bench/attngen_bench_device" "$build/bench/attngen_bench_device"
cp "$build"/tests/*.cmake "$staging/build/tests/"
for runner in "$build"/gpu_experiments/*_runner; do
    [ -x "$runner" ] || continue
    # A runner built before the generator last changed times kernels of an older schedule.
    if [ "$runner" -ot "$build/generators/attngen_generators" ]; then
        echo "skipping $runner: older than the generator (rebuild with bench/gpu_experiments/build.sh)"
        continue
    fi
    mkdir -p "$staging/build/gpu_experiments"
    strip -o "$staging/build/gpu_experiments/$(basename "$runner")" "$runner"
done
tar -C "$staging" -cf - build | xz -T2 -2 >.gpu/bundle.tar.xz
rm -rf "$staging"
du -sh .gpu
