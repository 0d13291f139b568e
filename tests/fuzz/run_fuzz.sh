#!/usr/bin/env bash
# The CI fuzz run: replays the checked-in corpus, then fuzzes from a fixed seed for a bounded
# time and number of inputs. Fails on any crash, sanitizer report, leak or failed check.
# New interesting inputs go to a scratch directory (never into the source tree); to grow the
# checked-in corpus, merge them: attngen_fuzz_capi -merge=1 tests/fuzz/corpus <scratch>/new.
# usage: run_fuzz.sh <fuzzer> <corpus dir> <max seconds> <max runs>
# ASAN_OPTIONS and UBSAN_OPTIONS come from CTest (cmake/AttngenSanitizers.cmake).
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3 runs=$4
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$here/../../cmake/AttngenSanitizers.supp}
mkdir "$scratch/new" "$scratch/artifacts"
options=(-seed=1 -timeout=20 -rss_limit_mb=4096 -max_len=512 -print_final_stats=1
         -artifact_prefix="$scratch/artifacts/")
log=$scratch/fuzzer.log

# libFuzzer prints a line per new input; in a CI log they would bury the one report that
# matters (a failure once went unread that way), so they go to a file, and what is printed is
# the rest: the report, the failing input and the final statistics.
run() {
    local status=0
    "$fuzzer" "${options[@]}" "$@" > "$log" 2>&1 || status=$?
    grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|INITED|RELOAD)[[:space:]]' "$log" | tail -n 200
    if [ "$status" -ne 0 ]; then
        for crash in "$scratch"/artifacts/*; do
            [ -e "$crash" ] && echo "failing input ($crash), base64: $(base64 -w0 "$crash")"
        done
        echo "the fuzzer exited with status $status"
    fi
    return "$status"
}

echo "==> replaying $(ls "$corpus" | wc -l) corpus inputs"
run -runs=0 "$corpus"
# The fuzzing below runs the kernels' richest variant the CPU takes; the corpus (a few seconds)
# also on the AVX2 one, which most x86 CPUs in use run.
echo "==> replaying them on the AVX2 variant"
ATTNGEN_CPU_DISPATCH=avx2 run -runs=0 "$corpus"
echo "==> fuzzing for at most ${seconds}s / $runs inputs"
run -max_total_time="$seconds" -runs="$runs" "$scratch/new" "$corpus"
