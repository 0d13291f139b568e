# Session 85 (2026-12-06), the Intel Xeon with AMX of sessions 82-84 (lscpu: family 6, model 167
# under KVM; amx_bf16, amx_tile, avx512_bf16), 2 threads. Every number in bench/RESULTS.md's
# session 85 section. Servers and timelines copied before the rebuild: /tmp/server_old and
# /tmp/timeline_old (f17f8ce, the keys gathered 16 bits at a time), /tmp/server_new (ca19619).
build/bench/attngen_bench --benchmark_filter='^(fma_peak|fma_peak_avx2|fma_peak_bf16|resident_read_bandwidth)' > peaks.txt
.venv/bin/python scripts/paired_ab.py /tmp/server_old /tmp/server_new tutorial,tutorial-cross,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill,gpt2-decode --pairs 6 --sessions 2 --bf16 > ab_key_words_bf16.txt
.venv/bin/python scripts/paired_ab.py /tmp/server_old /tmp/server_new long-single,long-causal,bert-512 --pairs 12 --sessions 3 --bf16 > ab_key_words_bf16_long.txt
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 --pairs 4 --sessions 2 --server /tmp/server_new > peers_bf16_all.txt
# Each shape's loops, the old build then the new (bert-512 20 calls, gpt2-causal 10, the others 3):
#   /tmp/timeline_old <shape> <calls> bf16; build/bench/attngen_parallel_timeline <shape> <calls> bf16
# > timelines_bf16.txt
# Where out_proj's extra time goes (not changed): perf record -e cpu-clock
#   build/bench/attngen_parallel_timeline bert-512 200 bf16; perf annotate of the out_proj task.
.venv-torch/bin/python scripts/paired_peers.py --kind mha --pairs 4 --sessions 2 --server /tmp/server_new > peers_fp32_all.txt
.venv-torch/bin/python scripts/paired_peers.py --kind mha --shapes long-single,bert-128,bert-512 --pairs 12 --sessions 3 --server /tmp/server_new > peers_fp32_ort_12pairs.txt
# build/bench/attngen_parallel_timeline long-single 3   (float32: the attention and the panels' single tasks)
