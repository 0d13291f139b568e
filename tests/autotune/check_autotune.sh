#!/usr/bin/env bash
# attngen-autotune end to end on a tiny budget: it writes a file the build accepts, resumes
# from its log without measuring again, and the build rejects malformed tuned files.
# usage: check_autotune.sh <attngen-autotune> <cmake> <source dir>
set -euo pipefail
tune=$1 cmake=$2 source=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
reader="$source/tests/autotune/read_tuned_file.cmake"

# A budget that ends inside the first build: nothing finished, so nothing is logged (a build
# cut by the budget is not the candidate's failure), no file is written, and the status says so.
if "$tune" --shapes "2,16,24,32,2" --budget 1 --candidates 2 --autoschedulers none \
    --seed 3 --out "$work/t.json" 2>"$work/cut.err"; then
    echo "FAIL: a search that measured nothing succeeded"; exit 1
fi
grep -q "no schedule of attngen's finished" "$work/cut.err" && [ ! -e "$work/t.json" ] &&
    [ ! -s "$work/t.json.log" ] || { echo "FAIL: after a cut search:"; cat "$work/cut.err"; exit 1; }
echo "ok  : a budget that ends inside a build logs nothing and writes no file"

# The budget only bounds a slow machine: --candidates ends the search first. At 60 s it ran
# out once while a fuzzer loaded the other core, and fewer measurements were logged. The same
# log as the cut search: its default is measured now.
"$tune" --shapes "2,16,24,32,2" --budget 240 --candidates 2 --autoschedulers none \
    --seed 3 --out "$work/t.json" 2>"$work/first.err"
lines=$(wc -l <"$work/t.json.log")
[ "$lines" -eq 3 ] || { echo "FAIL: expected 3 logged measurements, got $lines"; exit 1; }
awk -F'\t' 'NF != 5 || $5 != "host" { exit 1 }' "$work/t.json.log" ||
    { echo "FAIL: log lines without the target"; cat "$work/t.json.log"; exit 1; }
grep -q '"default_ms": [0-9]' "$work/t.json" || { echo "FAIL: no default time"; cat "$work/t.json"; exit 1; }
"$cmake" -DFILE="$work/t.json" -P "$reader" 2>&1 | tee "$work/params.txt"
grep -q "^params: " "$work/params.txt" || { echo "FAIL: the build cannot read the file"; exit 1; }
echo "ok  : a 2-candidate search wrote a file the build reads"

# Resume: the same search again measures nothing new (the log has every entry).
start=$(date +%s)
"$tune" --shapes "2,16,24,32,2" --budget 240 --candidates 2 --autoschedulers none \
    --seed 3 --out "$work/t2.json" --log "$work/t.json.log" 2>/dev/null
[ "$(wc -l <"$work/t.json.log")" -eq 3 ] || { echo "FAIL: the resumed search measured again"; exit 1; }
cmp -s <(grep -v seed "$work/t.json") <(grep -v seed "$work/t2.json") ||
    { echo "FAIL: the resumed search wrote another result"; diff "$work/t.json" "$work/t2.json"; exit 1; }
echo "ok  : resumed from the log in $(( $(date +%s) - start )) s without measuring again"

# The search order depends on the seed only, and is the order measured.
order() { "$tune" --shapes "2,16,24,32,2" --candidates 5 --seed "$1" --out "$work/o.json" \
    --print-candidates; }
order 3 >"$work/a"; order 3 >"$work/b"; order 4 >"$work/c"
cmp -s "$work/a" "$work/b" || { echo "FAIL: seed 3 gave two orders"; exit 1; }
! cmp -s "$work/a" "$work/c" || { echo "FAIL: seeds 3 and 4 gave the same order"; exit 1; }
"$tune" --shapes "2,16,24,32,2" --candidates 2 --autoschedulers none --seed 3 --out "$work/o.json" \
    --print-candidates | cmp -s - <(cut -f2 "$work/t.json.log") ||
    { echo "FAIL: the printed order is not the measured one"; exit 1; }
grep -q decode_ "$work/a" && { echo "FAIL: the search draws decode_ knobs"; exit 1; }
"$tune" --target x86-64-linux-opencl --shapes "2,16,24,32,2" --candidates 5 --seed 3 \
    --out "$work/o.json" --print-candidates >"$work/g" ||
    { echo "FAIL: no GPU candidates printed"; exit 1; }
grep -q gpu_query_block "$work/g" || { echo "FAIL: the GPU search draws no GPU knobs"; exit 1; }
grep -q decode_ "$work/g" && { echo "FAIL: the GPU search draws gpu_decode_ knobs"; exit 1; }
echo "ok  : the same seed gives the same candidate order, another seed another"

# --try measures the given knobs right after the defaults, and refuses unknown knobs.
"$tune" --shapes "2,16,24,32,2" --budget 240 --candidates 0 --autoschedulers none \
    --try "query_block=8,key_block=64" --out "$work/try.json" 2>/dev/null
[ "$(sed -n 2p "$work/try.json.log" | cut -f2)" = "key_block=64,query_block=8" ] ||
    { echo "FAIL: --try was not measured second"; cat "$work/try.json.log"; exit 1; }
if "$tune" --shapes "2,16,24,32,2" --budget 5 --out "$work/bad-try.json" \
    --try "query_blok=8" 2>"$work/try.err"; then
    echo "FAIL: --try accepted an unknown knob"; exit 1
fi
grep -q "query_blok" "$work/try.err" || { echo "FAIL: no message naming the knob"; exit 1; }
echo "ok  : --try measures the given knobs and names an unknown one"

# Refused before anything is measured: a generator that cannot run, an unknown autoscheduler,
# an output that cannot be written. (A missing generator had logged every candidate as failed,
# so that a rerun with the right one measured nothing.)
refused() {  # <expected status> <expected message part> <arguments...>
    local want=$1 part=$2 rc=0
    shift 2
    "$tune" --shapes "2,16,24,32,2" --budget 60 --candidates 1 "$@" 2>"$work/refused.err" || rc=$?
    [ "$rc" -eq "$want" ] && grep -q -- "$part" "$work/refused.err" ||
        { echo "FAIL: status $rc (want $want) for $*:"; cat "$work/refused.err"; exit 1; }
    echo "ok  : refused with status $rc: $part"
}
refused 1 "cannot be run" --generator /nonexistent/gen --out "$work/gen.json"
[ ! -s "$work/gen.json.log" ] || { echo "FAIL: a missing generator was logged"; exit 1; }
refused 2 "unknown autoscheduler 'Bogus'" --autoschedulers Bogus --out "$work/as.json"
refused 1 "cannot write in" --out "$work/no/such/dir/x.json"
refused 1 "is a directory" --out "$work"
refused 1 "the default schedule failed" --target no-such-target --autoschedulers none \
    --out "$work/target.json"
[ ! -s "$work/target.json.log" ] || { echo "FAIL: a bad target was logged"; exit 1; }

# A signal ends the build in flight, with its generator, and the search: what was measured
# stays in the log, the output is not written, and the status is 128 + the signal.
"$tune" --shapes "2,16,24,32,2" --budget 240 --candidates 2 --autoschedulers none --seed 7 \
    --out "$work/int.json" 2>"$work/int.err" &
pid=$!
sleep 2
# The build's shell and generator: a process group of their own, whose leader is the child.
groups=$(pgrep -P "$pid" | paste -sd, -)
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] && [ ! -e "$work/int.json" ] && grep -q "stopped by signal 2" "$work/int.err" ||
    { echo "FAIL: status $rc after SIGINT:"; cat "$work/int.err"; exit 1; }
[ -n "$groups" ] || { echo "FAIL: no build was running 2 s into the search"; exit 1; }
sleep 0.5
# Killed processes whose parent was killed with them wait as zombies for init to reap them.
alive=$({ ps -o pid=,stat=,args= -g "$groups" || true; } | awk '$2 !~ /^Z/')
[ -z "$alive" ] || { echo "FAIL: the build outlived the search:"; echo "$alive"; exit 1; }
echo "ok  : SIGINT ends the search and its build (status 130, nothing written)"

# The log of an earlier version (no target: the host's), a line for another target, and
# malformed lines (a write cut short): the first resumes, the others are not read as results.
printf '%s\n' $'2,16,24,32,2\tdefault\tok\t1.5' \
    $'2,16,24,32,2\tdefault\tok\t0.25\tx86-64-linux-sse41' \
    $'2,16,24,32,2\tquery_block=8\tok\t' $'garbage' >"$work/old.json.log"
"$tune" --shapes "2,16,24,32,2" --budget 60 --candidates 0 --autoschedulers none \
    --out "$work/old.json" 2>"$work/old.err"
grep -q '"default_ms": 1.5' "$work/old.json" && [ "$(grep -c malformed "$work/old.err")" -eq 2 ] ||
    { echo "FAIL: the old log was not read as it should:"; cat "$work/old.err" "$work/old.json"; exit 1; }
echo "ok  : an old log resumes, another target's lines and malformed ones are not its results"

# Knobs the search does not time (decode_*, read by the decode kernels) are kept from the file
# it replaces, with its note; --try refuses them.
python3 - "$work/t.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
for entry in f["shapes"].values():
    entry["params"]["decode_split_keys"] = 512
    entry["edited"] = "decode_split_keys 512 by hand"
json.dump(f, open(sys.argv[1], "w"))
PY
"$tune" --shapes "2,16,24,32,2" --budget 240 --candidates 2 --autoschedulers none \
    --seed 3 --out "$work/t.json" 2>/dev/null
grep -q '"decode_split_keys": 512' "$work/t.json" && grep -q '"edited_in_previous_file"' "$work/t.json" ||
    { echo "FAIL: decode_split_keys was not kept:"; cat "$work/t.json"; exit 1; }
[ "$(wc -l <"$work/t.json.log")" -eq 3 ] || { echo "FAIL: the rerun measured again"; exit 1; }
refused 2 "decode_ knobs are read by the decode kernels" --try decode_split_keys=512 \
    --out "$work/try2.json"
echo "ok  : decode_split_keys kept from the file it replaces"

# Several shapes: the build gets the knobs with the least geometric mean over all of them,
# recomputed here from the log.
"$tune" --shapes "2,16,24,32,2;1,40,8,16,1" --budget 120 --candidates 2 --autoschedulers none \
    --seed 5 --out "$work/multi.json" 2>/dev/null
grep -q '"build_shape": "all_shapes"' "$work/multi.json" ||
    { echo "FAIL: a multi-shape search did not build with all_shapes"; cat "$work/multi.json"; exit 1; }
expected=$(awk -F'\t' '$3 == "ok" { n[$2]++; s[$2] += log($4) }
    END { for (k in n) if (n[k] == 2) print exp(s[k] / 2), k }' "$work/multi.json.log" |
    sort -g | head -n 1 | cut -d' ' -f2)
grep -A3 '"all_shapes"' "$work/multi.json" | grep -q "\"best\": \"$expected\"" ||
    { echo "FAIL: all_shapes is not $expected"; cat "$work/multi.json" "$work/multi.json.log"; exit 1; }
"$cmake" -DFILE="$work/multi.json" -P "$reader" >"$work/multi.txt" 2>&1 ||
    { echo "FAIL: the build cannot read the multi-shape file"; cat "$work/multi.txt"; exit 1; }
echo "ok  : a 2-shape search builds with the least geometric mean ($expected)"

# Malformed files stop the build's configure with the file's name and the fault.
reject() {  # <content> <expected message part>
    printf '%s' "$1" >"$work/bad.json"
    if "$cmake" -DFILE="$work/bad.json" -P "$reader" >"$work/bad.log" 2>&1; then
        echo "FAIL: accepted: $1"; exit 1
    fi
    grep -q "bad.json" "$work/bad.log" && grep -q "$2" "$work/bad.log" ||
        { echo "FAIL: no message naming bad.json and '$2'"; cat "$work/bad.log"; exit 1; }
    echo "ok  : rejected $1"
}
reject 'not json' "malformed"
reject '{"shapes": {"x": {"params": {}}}}' "build_shape"
reject '{"build_shape": "y", "shapes": {"x": {"params": {}}}}' "'y'"
reject '{"params": {"query_blok": 16}}' "query_blok"
reject '{"params": {"query_block": "big"}}' "non-negative"
reject '{"params": [1, 2]}' "not an object"
