# Session 84 (2026-12-06), the Intel Xeon with AMX of sessions 82-83 (lscpu: family 6, model 167
# under KVM; amx_bf16, amx_tile, avx512_bf16, avx512_fp16), 2 threads. Every number in
# bench/RESULTS.md's session 84 section. Servers copied before each rebuild: /tmp/cs_base
# (b87127b), /tmp/cs_fold3 (de5c474: the AMX exp's clamp and floor as one max), /tmp/cs_kb256 and
# /tmp/cs_kb1536 (b87127b with key_block 256 or 1536 in generators/tuned/x86-64-linux.json),
# /tmp/cs_fold, /tmp/cs_prescale (builds with the floor bug), /tmp/cs_lanes (de5c474 + unclamped lanes).
build/bench/attngen_bench --benchmark_filter='^(fma_peak|fma_peak_avx2|fma_peak_bf16|resident_read_bandwidth)' > peaks.txt
.venv/bin/python scripts/paired_ab.py /tmp/cs_base /tmp/cs_fold3 tutorial,tutorial-cross,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill,gpt2-decode --pairs 6 --sessions 2 --bf16 > ab_exp_floor_bf16.txt
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 --pairs 4 --sessions 2 --server /tmp/cs_fold3 > peers_bf16_all.txt
.venv-torch/bin/python bench/runs/intel-amx-exp-floor/torch_bf16_linear_rate.py > torch_bf16_linear_rate.txt
# The A/Bs not kept: the command heads each file.
# Where the attention's time goes: perf record -e cpu-clock -o perf.data build/bench/attngen_parallel_timeline long-single 3 bf16
# (at b87127b), then perf annotate --stdio -s <the attention task's symbol>, summed by loop.
# The tests' negative control, by input scale: tests/test_precision.cpp's flash cases with
# .expect_softmax_matters(true).input_scale(S) for S = 1, 3, 6, 12, 16, 24 (95, 76, 43, 1, 1, 0
# cases that a flat softmax passes).
