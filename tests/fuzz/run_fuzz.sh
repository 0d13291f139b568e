#!/usr/bin/env bash
# The CI fuzz run: replays the checked-in corpus, then fuzzes from a fixed seed for a bounded
# time and number of inputs. Fails on any crash, sanitizer report, leak or failed check.
# New interesting inputs go to a scratch directory (never into the source tree); to grow the
# checked-in corpus, merge them: attngen_fuzz_capi -merge=1 tests/fuzz/corpus <scratch>.
# usage: run_fuzz.sh <fuzzer> <corpus dir> <max seconds> <max runs>
# ASAN_OPTIONS and UBSAN_OPTIONS come from CTest (cmake/AttngenSanitizers.cmake).
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3 runs=$4
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$here/../../cmake/AttngenSanitizers.supp}
options=(-seed=1 -timeout=20 -rss_limit_mb=4096 -max_len=512 -print_final_stats=1
         -artifact_prefix="$scratch/")
echo "==> replaying $(ls "$corpus" | wc -l) corpus inputs"
"$fuzzer" "${options[@]}" -runs=0 "$corpus"
echo "==> fuzzing for at most ${seconds}s / $runs inputs"
if ! "$fuzzer" "${options[@]}" -max_total_time="$seconds" -runs="$runs" "$scratch" "$corpus"; then
    for crash in "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* "$scratch"/oom-*; do
        [ -e "$crash" ] && echo "failing input ($crash), base64: $(base64 -w0 "$crash")"
    done
    exit 1
fi
