#!/usr/bin/env bash
# The CUDA checks on a lent GPU machine (no network, no build tools needed): unpacks the
# binaries scripts/gpu_bundle.sh packed on the build machine, then runs the phases named on the
# command line, each bounded in time, logs under $OUT (or /tmp/gpu_out).
#
#   scripts/gpu_session.sh tests bench torch        # ctest -L cuda; attngen_bench_device; PyTorch
#   ATTNGEN_GPU_BENCH_FILTER='^mha_forward_device/' scripts/gpu_session.sh bench
#
# Phases: info, tests (the device suite under ctest -L cuda), bench (attngen_bench_device,
# median of 3), torch (scripts/bench_torch_cuda.py at the CUDA issue's shapes, float32 with TF32
# off), torch-half (the same in bfloat16), jit (a fresh process's first forward with and without
# the driver's PTX cache), ncu (per-kernel times of one forward, bert-512-b8, or as
# ATTNGEN_GPU_NCU_FILTER, _SKIP, _COUNT and _KERNELS say), launches (every launch of one
# benchmark in order with its device time, a decoding step's kernels last), experiments (the
# runners of bench/gpu_experiments that the bundle holds), memcheck and racecheck (the device
# suite under compute-sanitizer, in gtest shards), ab (attngen_bench_device of another
# build's bundle in .gpu-base alternated with this one's, ATTNGEN_GPU_AB_PASSES passes of
# ATTNGEN_GPU_BENCH_FILTER), ab-kernels (the two builds' decode kernels timed by ncu, launch by
# launch). For ab, on the build machine, e.g. GPU knobs against the defaults:
#   cmake -B build -DATTNGEN_GPU_SCHEDULE_PARAMS= && ninja -C build && scripts/gpu_bundle.sh
#   rm -rf .gpu-base && mv .gpu .gpu-base
#   cmake -B build -DATTNGEN_GPU_SCHEDULE_PARAMS="gpu_few_rows_split=64;gpu_few_rows_columns=32"
#   ninja -C build && scripts/gpu_bundle.sh        # then carry .gpu and .gpu-base
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu_out}
mkdir -p "$out"

tar -xJf .gpu/bundle.tar.xz || exit 1
export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# ctest's files name the build machine's absolute paths.
build_root=$(cat .gpu/build_root)
if [ "$build_root" != "$PWD" ] && [ ! -e "$build_root" ]; then
    mkdir -p "$(dirname "$build_root")" && ln -s "$PWD" "$build_root"
fi

# The bench binary of the build in .gpu-base (ab, ab-kernels), unpacked into a new folder whose
# path it prints; nothing and a message where there is none.
unpack_base_bench() {
    if [ ! -f .gpu-base/bundle.tar.xz ]; then
        echo "$1: no .gpu-base/bundle.tar.xz (see the notes above)" >&2
        return 1
    fi
    local dir
    dir=$(mktemp -d)
    if ! tar -C "$dir" -xJf .gpu-base/bundle.tar.xz build/bench/attngen_bench_device; then
        rm -rf "$dir"
        return 1
    fi
    echo "$dir"
}

shapes="tutorial bert-128 bert-512 bert-512-b8 gpt2-causal long-causal long-single long-self-32k"
for phase in "$@"; do
    echo "=== $phase $(date -u +%T)"
    case "$phase" in
    info)
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
            --format=csv | tee "$out/gpu.txt"
        python3 -c 'import torch; print("torch", torch.__version__)' | tee -a "$out/gpu.txt"
        ;;
    tests)
        timeout 300 ctest --test-dir build/tests -L cuda -E carries_ptx -j8 --timeout 240 \
            --output-on-failure >"$out/ctest.log" 2>&1
        echo "ctest exit $?"
        grep -E "tests passed|tests failed|Failed|Timeout|\*\*\*" "$out/ctest.log" | head -60
        ;;
    bench)
        timeout 330 build/bench/attngen_bench_device \
            --benchmark_filter="${ATTNGEN_GPU_BENCH_FILTER:-.}" \
            --benchmark_min_time=0.3 --benchmark_repetitions=3 \
            --benchmark_report_aggregates_only=true \
            --benchmark_out="$out/attngen_device.json" --benchmark_out_format=json \
            2>&1 | grep -v "_mean\|_stddev\|_cv" | tee "$out/attngen_device.txt"
        ;;
    torch)
        PYTHONUNBUFFERED=1 timeout 150 python3 scripts/bench_torch_cuda.py $shapes \
            2>&1 | tee "$out/torch_fp32.jsonl"
        ;;
    torch-half)
        PYTHONUNBUFFERED=1 timeout 200 python3 scripts/bench_torch_cuda.py --dtype bfloat16 \
            $shapes 2>&1 | tee "$out/torch_bf16.jsonl"
        ;;
    jit)
        # The PTX's JIT step: one small forward in a fresh process, with the driver's compute
        # cache off (every module compiled), then twice with it on (the second finds the cache).
        one_call() {
            local start end
            start=$(date +%s%N)
            build/bench/attngen_bench_device --benchmark_filter='^mha_forward_device/tutorial/' \
                --benchmark_min_time=0.01 >/dev/null 2>&1
            end=$(date +%s%N)
            echo "$1 process wall $(((end - start) / 1000000)) ms"
        }
        export CUDA_CACHE_PATH=$(mktemp -d)
        CUDA_CACHE_DISABLE=1 one_call "cache off:" | tee "$out/jit.txt"
        one_call "cache empty:" | tee -a "$out/jit.txt"
        one_call "cache filled:" | tee -a "$out/jit.txt"
        ;;
    ncu)
        # A decoding step's kernels come after its cache's prefill, which launches more than 60
        # kernels (a skip of 60 caught only the prefill): for them, e.g.
        # ATTNGEN_GPU_NCU_FILTER='^decode_device/llama3-8b-decode/' ATTNGEN_GPU_NCU_SKIP=300, or
        # ATTNGEN_GPU_NCU_KERNELS='decode' (a regex of kernel names) to profile only those.
        # (Expanded as ${a[@]+...}: under set -u, bash before 4.4 calls an empty array unbound.)
        kernels=()
        [ -n "${ATTNGEN_GPU_NCU_KERNELS:-}" ] && kernels=(--kernel-name "regex:$ATTNGEN_GPU_NCU_KERNELS")
        timeout 240 ncu --clock-control none --launch-skip "${ATTNGEN_GPU_NCU_SKIP:-0}" \
            -c "${ATTNGEN_GPU_NCU_COUNT:-60}" ${kernels[@]+"${kernels[@]}"} --print-summary per-kernel \
            build/bench/attngen_bench_device \
            --benchmark_filter="${ATTNGEN_GPU_NCU_FILTER:-^mha_forward_device/bert-512-b8/}" \
            --benchmark_min_time=0.01 >"$out/ncu.txt" 2>&1
        echo "ncu exit $?"
        grep -E "^  [a-z_]|Duration|Registers|Achieved Occupancy" "$out/ncu.txt" | head -80
        ;;
    launches)
        # Every kernel launch of one benchmark in order, with its time on the device (ncu's
        # gpu__time_duration, one row per launch): a decoding step's kernels are the last ones,
        # after its cache's prefill. ATTNGEN_GPU_NCU_FILTER as for ncu.
        timeout 120 ncu --clock-control none -c "${ATTNGEN_GPU_NCU_COUNT:-400}" --csv \
            --metrics gpu__time_duration.sum build/bench/attngen_bench_device \
            --benchmark_filter="${ATTNGEN_GPU_NCU_FILTER:-^decode_device/gpt2-decode/}" \
            --benchmark_min_time=0.01 >"$out/launches.csv" 2>&1
        echo "ncu exit $?"
        grep '^"[0-9]' "$out/launches.csv" | awk -F'","' '{print $5, $NF}' | tail -16
        ;;
    experiments)
        for runner in build/gpu_experiments/*_runner; do
            [ -x "$runner" ] || continue
            echo "--- $runner"
            timeout 240 "$runner" 2>&1 | tee "$out/$(basename "$runner").txt"
            echo "$(basename "$runner") exit ${PIPESTATUS[0]}"
        done
        ;;
    memcheck | racecheck)
        # The device suite under compute-sanitizer (memcheck: out-of-bounds and misaligned device
        # accesses; racecheck: shared-memory hazards between a block's threads), in
        # ATTNGEN_GPU_SANITIZE_SHARDS gtest shards at once, each bounded in time. racecheck runs
        # the suites whose kernels share memory between threads unless
        # ATTNGEN_GPU_SANITIZE_FILTER names others. One log, $out/<phase>.log.
        san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
            /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
        if [ ! -f "$san" ] || [ ! -x "$san" ]; then
            echo "$phase: no compute-sanitizer on this machine"
            continue
        fi
        filter=${ATTNGEN_GPU_SANITIZE_FILTER:-*}
        [ "$phase" = racecheck ] && filter=${ATTNGEN_GPU_SANITIZE_FILTER:-DeviceSdpaTest.*:DeviceTest.Flash*:DeviceTest.KeyTileEdges:DeviceTest.QueryBlockPlusOne:Precisions/DeviceDecode.*}
        shards=${ATTNGEN_GPU_SANITIZE_SHARDS:-8}
        : >"$out/$phase.log"
        pids=()
        for shard in $(seq 0 $((shards - 1))); do
            GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard ATTNGEN_TEST_DEVICE=cuda \
                ATTNGEN_TEST_REQUIRE_DEVICE=1 timeout "${ATTNGEN_GPU_SANITIZE_TIMEOUT:-240}" \
                "$san" --tool "$phase" --error-exitcode 86 --print-limit 20 \
                build/tests/attngen_device_tests --gtest_brief=1 --gtest_filter="$filter" \
                >"$out/$phase.$shard.part" 2>&1 &
            pids+=($!)
        done
        for shard in $(seq 0 $((shards - 1))); do
            wait "${pids[$shard]}"
            echo "shard $shard exit $?" | tee -a "$out/$phase.log"
            cat "$out/$phase.$shard.part" >>"$out/$phase.log" && rm "$out/$phase.$shard.part"
        done
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|PASSED|Invalid|Race|Hazard" \
            "$out/$phase.log" | sort | uniq -c | head -40
        ;;
    ab)
        base=$(unpack_base_bench ab) || continue
        # The float32 decode steps by default, not every decode row: passes over those took
        # 80-100 s each on an H200 (2026-11-28), and each side here runs one per pass.
        filter=${ATTNGEN_GPU_BENCH_FILTER:-^decode_device/(gpt2-decode|llama3-8b-decode|long-decode)/}
        for pass in $(seq "${ATTNGEN_GPU_AB_PASSES:-2}"); do
            # Which side goes first alternates: within a run, order alone moved CPU timings by up
            # to 13% (bench/RESULTS.md, 2026-11-28).
            sides="base new"
            [ $((pass % 2)) = 0 ] && sides="new base"
            for side in $sides; do
                bin=build/bench/attngen_bench_device
                [ "$side" = base ] && bin="$base/build/bench/attngen_bench_device"
                timeout 200 "$bin" --benchmark_filter="$filter" \
                    --benchmark_min_time=0.3 --benchmark_repetitions=3 \
                    --benchmark_report_aggregates_only=true 2>&1 |
                    grep -E "_median|ERROR|rror|not found" | sed "s/^/$side pass $pass  /" |
                    tee -a "$out/ab.txt"
            done
        done
        rm -rf "$base"
        ;;
    ab-kernels)
        # Per-kernel device times (ncu's gpu__time_duration, the first launches of kernels
        # matching ATTNGEN_GPU_NCU_KERNELS) of the .gpu-base build and this one, for each decode
        # shape: where ab's step times move by less than their noise.
        base=$(unpack_base_bench ab-kernels) || continue
        ab_shapes="gpt2-decode llama3-8b-decode llama3-8b-decode-b8 long-decode"
        for shape in ${ATTNGEN_GPU_AB_SHAPES:-$ab_shapes}; do
            for side in base new; do
                bin=build/bench/attngen_bench_device
                [ "$side" = base ] && bin="$base/build/bench/attngen_bench_device"
                log="$out/kernels_${shape}_$side.csv"
                timeout 60 ncu --clock-control none -c "${ATTNGEN_GPU_NCU_COUNT:-4}" --csv \
                    --kernel-name "regex:${ATTNGEN_GPU_NCU_KERNELS:-decode_(split_out|rows_out)}" \
                    --metrics gpu__time_duration.sum "$bin" \
                    --benchmark_filter="^decode_device/$shape/" --benchmark_min_time=0.01 \
                    >"$log" 2>&1
                status=$?
                times=$(grep '^"[0-9]' "$log" | awk -F'","' '{print $5 "=" $NF}' |
                    sed 's/^_kernel_//; s/_s0_[^=]*=/=/; s/"$/ ns/' | tr '\n' ' ')
                echo "$shape $side (ncu exit $status) $times" | tee -a "$out/ab_kernels.txt"
            done
        done
        rm -rf "$base"
        ;;
    *) echo "unknown phase $phase" ;;
    esac
done
