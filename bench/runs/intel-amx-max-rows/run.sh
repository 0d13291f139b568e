#!/usr/bin/env bash
# Session 88 (2026-12-07), Intel Xeon with AMX (family 6, model 167 under KVM), 2 threads.
# The commands behind this folder's files, from the repository root, with build/ at the commit
# named. OLD/NEW are copies of build/bench/attngen_call_server taken before and after a rebuild.
set -euo pipefail
# peaks.txt
build/bench/attngen_bench --benchmark_filter='^(fma_peak|fma_peak_avx2|fma_peak_bf16|resident_read_bandwidth)'
# ab_bf16.txt, ab_bf16_again.txt: 85db853 (OLD) against 76a61e6 (NEW)
.venv/bin/python scripts/paired_ab.py OLD NEW \
    bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill \
    --pairs 6 --sessions 2 --bf16
.venv/bin/python scripts/paired_ab.py OLD NEW \
    tutorial,tutorial-cross,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill,llama3-8b-decode \
    --pairs 6 --sessions 2 --bf16
# ab_bf16_rows8.txt: 76a61e6 (OLD) against kAmxMaxInterleavedRows = 8 (NEW)
.venv/bin/python scripts/paired_ab.py OLD NEW \
    bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill --pairs 6 --sessions 2 --bf16
# peers at 76a61e6
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 --pairs 4 --sessions 2 \
    --server build/bench/attngen_call_server > peers_bf16_all.txt
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 \
    --shapes tutorial,bert-512,bert-512-b8,long-causal,long-single --pairs 8 --sessions 4 \
    --server build/bench/attngen_call_server > peers_bf16_again.txt
.venv-torch/bin/python scripts/paired_peers.py --kind mha --pairs 4 --sessions 2 \
    --server build/bench/attngen_call_server > peers_fp32_all.txt
.venv-torch/bin/python scripts/paired_peers.py --kind avx2 --pairs 4 --sessions 2 \
    --server build/bench/attngen_call_server > peers_avx2_all.txt
# fractions.txt
ATTNGEN_CPU_DISPATCH=avx2 build/bench/attngen_bench --benchmark_min_time=1 --benchmark_counters_tabular=true \
    --benchmark_filter='^(fma_peak_avx2$|projection/bert-512/|mha_forward/bert-512/|sdpa/bert-512/|sdpa/long-single)'
build/bench/attngen_bench --benchmark_min_time=1 --benchmark_counters_tabular=true \
    --benchmark_filter='^(fma_peak$|projection/bert-512/|mha_forward/bert-512/|sdpa/bert-512/|sdpa/long-single)'
# not_kept.txt: the experiments' own commands are in its headers; the sdpa harness is
# bench/cpu_experiments/sdpa_knobs_ab.sh (its A variant: generator=<a copy of 85db853's generator>).
# Profiles: perf record -e cpu-clock build/bench/attngen_bench --benchmark_filter='^mha_forward_bf16/long-single/'
#   --benchmark_min_time=3; perf annotate --stdio -s <the attention task>, samples summed per loop.
