#!/usr/bin/env bash
# attngen-autotune end to end on a tiny budget: it writes a file the build accepts, resumes
# from its log without measuring again, and the build rejects malformed tuned files.
# usage: check_autotune.sh <attngen-autotune> <cmake> <source dir>
set -euo pipefail
tune=$1 cmake=$2 source=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
reader="$source/tests/autotune/read_tuned_file.cmake"

# The budget only bounds a slow machine: --candidates ends the search first. At 60 s it ran
# out once while a fuzzer loaded the other core, and fewer measurements were logged.
"$tune" --shapes "2,16,24,32,2" --budget 240 --candidates 2 --autoschedulers none \
    --seed 3 --out "$work/t.json" 2>"$work/first.err"
lines=$(wc -l <"$work/t.json.log")
[ "$lines" -eq 3 ] || { echo "FAIL: expected 3 logged measurements, got $lines"; exit 1; }
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

# The search order depends on the seed only.
"$tune" --shapes "2,16,24,32,2" --budget 1 --candidates 5 --autoschedulers none --seed 3 \
    --out "$work/s.json" 2>/dev/null || true
head -n 1 "$work/t.json.log" | cut -f2 >"$work/a"; head -n 1 "$work/s.json.log" | cut -f2 >"$work/b"
cmp -s "$work/a" "$work/b" || { echo "FAIL: seed 3 started with another candidate"; exit 1; }
echo "ok  : the same seed gives the same candidate order"

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
