#!/usr/bin/env bash
# Both sides of a GPU knob A/B in one go, for scripts/gpu_session.sh's ab and ab-kernels phases:
# the build with the default GPU knobs packed into .gpu-base, the build with the given knobs into
# .gpu. The build tree is reconfigured back to the defaults afterwards (its GPU kernels rebuilt,
# about 30 s), also when a step fails, so that no later build or test run takes the knobs by
# accident. Only the GPU kernels differ between the two builds.
#
#   scripts/gpu_knob_ab.sh "gpu_decode_rows_per_thread=4" [build-dir]
#   # then carry .gpu and .gpu-base; on the GPU machine:
#   scripts/gpu_session.sh info ab-kernels ab tests
set -eu
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ -z "$1" ]; then
    echo "usage: $0 \"knob=value;...\" [build-dir]" >&2
    exit 2
fi
knobs=$1
build=${2:-build}
export PATH=$PWD/.venv/bin:$PATH
if [ ! -f "$build/CMakeCache.txt" ]; then
    echo "$build is not a configured build (run scripts/setup.sh)" >&2
    exit 1
fi

configure() { cmake -B "$build" -DATTNGEN_GPU_SCHEDULE_PARAMS="$1" >/dev/null; }
restore() { configure "" && cmake --build "$build" -j "${ATTNGEN_JOBS:-$(nproc)}" >/dev/null; }
trap restore EXIT

configure ""
cmake --build "$build" -j "${ATTNGEN_JOBS:-$(nproc)}" >/dev/null
scripts/gpu_bundle.sh "$build"
rm -rf .gpu-base && mv .gpu .gpu-base
configure "$knobs"
cmake --build "$build" -j "${ATTNGEN_JOBS:-$(nproc)}" >/dev/null
scripts/gpu_bundle.sh "$build"
echo "base (default knobs) in .gpu-base, \"$knobs\" in .gpu: carry both"
