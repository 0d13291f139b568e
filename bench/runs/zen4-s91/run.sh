#!/usr/bin/env bash
# Session 91 (2026-12-07), AMD EPYC Zen 4 (family 25, model 17), 2 cores: where the AVX2
# variant and the bfloat16 bert-128 forward stand. No kernel changed; the experiments below were
# not kept. Run from the repository root with build/ built.
set -euo pipefail
# fractions.txt: each variant's fraction of the FMA peak, the two variants alternated twice
for d in avx512 avx2 avx512 avx2; do
    echo "== $d"
    ATTNGEN_CPU_DISPATCH=$d build/bench/attngen_bench --benchmark_min_time=1 \
        --benchmark_filter='^(projection|mha_forward|sdpa)/(bert-512|bert-512-b8|long-single)/|fma_peak/|fma_peak_avx2'
done
# paired_fp32.txt, paired_bf16.txt: OLD is the build at d183458 (before 3d11630)
.venv/bin/python scripts/paired_ab.py OLD/bench/attngen_call_server build/bench/attngen_call_server \
    tutorial,tutorial-cross,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single \
    [--bf16] --pairs 8 --sessions 2 --request-ms 60
# paired_weights_tiles.txt: OLD is the build at 3d11630, NEW at 3a2b6db (10, then 20 pairs)
.venv/bin/python scripts/paired_ab.py OLD/bench/attngen_call_server build/bench/attngen_call_server \
    tutorial,tutorial-cross [--bf16] --pairs 20 --sessions 4 --request-ms 60
# avx2_vs_avx512_threads.txt: one fused-forward projection per setting in one process
# (bench/cpu_experiments/sdpa_knobs_ab.sh), 512 x 768 x 768, on 1 and 2 threads
TARGET=x86-64-linux-avx2-fma-f16c-user_context-no_runtime KERNEL=projection \
    bench/cpu_experiments/sdpa_knobs_ab.sh /tmp/pk2 "A:" "F:gemm_vectors=1,gemm_rows=12" \
    "G:gemm_vectors=2,gemm_rows=5" "H:gemm_vectors=1,gemm_rows=13" \
    "Z:target=x86-64-linux-avx512_skylake-user_context-no_runtime"
for t in 1 2; do HL_NUM_THREADS=$t /tmp/pk2/projection_knobs_ab 512 768 768 16; done
# avx2_projection_groups.txt: /tmp/gen_new is the generator built with
#     const int group_features = kWeightPadding * kRowBlockOutputTiles;
# in schedule_projection_cpu (4 panels per task for AVX2's narrow tiles, as AVX-512 has; so no
# tall row blocks), /tmp/gen_old the tree's
TARGET=x86-64-linux-avx2-fma-f16c-user_context-no_runtime KERNEL=projection \
    bench/cpu_experiments/sdpa_knobs_ab.sh /tmp/pk5 "A:generator=/tmp/gen_old" \
    "G:generator=/tmp/gen_new" "A2:generator=/tmp/gen_old"
for r in 512 1024 4096 128; do /tmp/pk5/projection_knobs_ab $r 768 768 30; done
# avx2_sdpa_knobs.txt: the AVX2 attention kernel's key and query blocks
TARGET=x86-64-linux-avx2-fma-f16c-user_context-no_runtime bench/cpu_experiments/sdpa_knobs_ab.sh \
    /tmp/sk "A:" "KB128:key_block=128" "QB12:query_block=12" "QB18:query_block=18" "A2:"
/tmp/sk/sdpa_knobs_ab 1 512 0 20
# bf16_bert128_*_loops.txt: perf samples summed per innermost loop
perf record -e cpu-clock -o /tmp/bf128.data build/bench/attngen_bench \
    --benchmark_filter='mha_forward_bf16/bert-128' --benchmark_min_time=4
f=attngen_mha_forward_bf16_cpu___x86___64___linux___avx512_skylake___avx512_zen4___user_context___no_runtime_par_for_
perf annotate -i /tmp/bf128.data --stdio -s "${f}attention_out__2_s0_i_row_block_block_in_task_block_in_task_task" \
    > /tmp/att.ann
scripts/perf_loop_samples.py /tmp/att.ann 16
perf annotate -i /tmp/bf128.data --stdio -s "${f}k_proj_2_stored_2_s0_o_oo__2" > /tmp/kp.ann
scripts/perf_loop_samples.py /tmp/kp.ann 3
# peers_bf16.txt, peers_fp32_bert512.txt
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 --shapes bert-128,tutorial --pairs 4 \
    --sessions 2
.venv-torch/bin/python scripts/paired_peers.py --kind mha --shapes bert-512 --pairs 4 --sessions 2
