set -u
OUT=${OUT:-/tmp/gpu_out}
scripts/gpu_session.sh info tests > $OUT/session.txt 2>&1
tail -8 $OUT/session.txt
mkdir -p base && tar -C base -xJf .gpu-base/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.gpu/lib
F='^((mha_forward_device|mha_forward_device_f16|mha_forward_device_bf16)/(tutorial|tutorial-cross|bert-128|bert-512|bert-512-b8|gpt2-causal|long-causal)|decode_device|decode_device_bf16)/'
for r in 1 2; do for v in base new; do
  b=build/bench/attngen_bench_device; [ $v = base ] && b=base/build/bench/attngen_bench_device
  timeout 100 $b --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true 2>&1 | grep median > $OUT/${v}_$r.txt
  echo "$v $r done $(date +%T)"
done; done
