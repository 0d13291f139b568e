# Session 86 (2026-12-07), the Intel Xeon with AMX of sessions 82-85 (lscpu: family 6, model 167
# under KVM; amx_bf16, amx_tile, avx512_bf16), 2 threads. Every number in bench/RESULTS.md's
# session 86 section. Servers copied before the rebuild: /tmp/server_old (330e620), the new
# build's build/bench/attngen_call_server (LLVM's loop idioms for memcpy and memset off).
#
# Where the bfloat16 attention's time went (330e620): perf record -e cpu-clock
#   build/bench/attngen_bench --benchmark_filter='^mha_forward_bf16/bert-512/' --benchmark_min_time=4
#   perf annotate of the attention task: ldtilecfg after a memcpy call per query row, 12%.
# Counting the calls and ldtilecfg in one generated forward (HL_LLVM_ARGS to turn the idioms back on):
#   build/generators/attngen_generators -n fwd -d 0 -g attngen_mha_forward -f fwd -e assembly -o /tmp/gen \
#     target=x86-64-linux-avx512_skylake-avx512_sapphirerapids-user_context-no_runtime <the tuned knobs> precision=bf16
.venv/bin/python scripts/paired_ab.py /tmp/server_old build/bench/attngen_call_server tutorial,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,gpt2-decode,llama3-8b-prefill --pairs 6 --sessions 2 --bf16 > ab_bf16.txt
.venv/bin/python scripts/paired_ab.py /tmp/server_old build/bench/attngen_call_server tutorial,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,gpt2-decode,llama3-8b-decode,llama3-8b-prefill --pairs 6 --sessions 2 > ab_fp32.txt
.venv/bin/python scripts/paired_ab.py /tmp/server_old build/bench/attngen_call_server gpt2-decode,llama3-8b-decode,long-decode,llama3-8b-decode-b8 --pairs 12 --sessions 3 --bf16 > ab_bf16_decode.txt
# The float32 attention's probabilities x values tile, 8 x 2 (B) and 6 x 4 (C) against the tuned 4 x 4 (A),
# the kernels alone (not changed: level, 0.99-1.02x, and a first long-single run of 1.041x not repeated):
#   bench/cpu_experiments/sdpa_knobs_ab.sh /tmp/knobs "A:" "B:out_rows=8,out_vectors=2" "C:out_rows=6,out_vectors=4"
#   for args in "1 512 0 20 12 64" "1 1024 1 12 12 64" "8 512 0 6 12 64" "1 2048 1 6 16 64" "1 128 0 30 12 64" "1 16384 0 6 1 64"; do
#     /tmp/knobs/sdpa_knobs_ab $args; done > sdpa_knobs_out_tiles.txt
# Not kept: the AMX softmax's max and sum reductions with 8 rows side by side (their chains of
# vmaxps and vaddps interleaved; split ii by 8, RoundUp, reordered inside r_lane_groups, unrolled),
# against ac0c88f (/tmp/server_b):
.venv/bin/python scripts/paired_ab.py /tmp/server_b build/bench/attngen_call_server bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single --pairs 6 --sessions 2 --bf16 > ab_interleaved_lane_rows_bf16.txt
# At ac0c88f:
build/bench/attngen_bench --benchmark_filter='^(fma_peak|fma_peak_avx2|fma_peak_bf16|resident_read_bandwidth)' > peaks.txt
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 --pairs 4 --sessions 2 --server /tmp/server_b > peers_bf16_all.txt
# build/bench/attngen_parallel_timeline bert-512 20 bf16   (timeline_bert512_bf16.txt)
# The regression check (tests/kernel_objects/check_amx_calls.py), and its negative control: the
# forward generated with the idioms on, put in an archive under an AMX object's name:
#   HL_LLVM_ARGS="-disable-loop-idiom-memcpy=false -disable-loop-idiom-memset=false" \
#     build/generators/attngen_generators ... -e object -o /tmp/neg ... precision=bf16
#   cp /tmp/neg/fwd.o /tmp/neg/fwd-sapphirerapids.o; ar rcs /tmp/neg/libneg.a /tmp/neg/fwd-sapphirerapids.o
#   python3 tests/kernel_objects/check_amx_calls.py /tmp/neg/libneg.a   -> 9 of 9 tiled functions call memset or memcpy, rc 1
# Not kept: AMX key blocks of 256 and of 1536 for every call (an experiment's line in
# resolve_cpu_knobs: min(key_block, 256), then max(key_block, 1536), where uses_amx(target)),
# against ac0c88f (/tmp/server_b):
.venv/bin/python scripts/paired_ab.py /tmp/server_b build/bench/attngen_call_server bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill --pairs 6 --sessions 2 --bf16 > ab_amx_key_block_256_bf16.txt
.venv/bin/python scripts/paired_ab.py /tmp/server_b build/bench/attngen_call_server bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill --pairs 6 --sessions 2 --bf16 > ab_amx_key_block_1536_bf16.txt
# Then 1536 only for long calls without a causal mask, as a run-time select(...) passed to
# define_flash_attention as an Expr: every call of the new test (1536, 1537 and 3100 keys) failed
# with Halide error -2, "Bounds given for amx_keys in row (from 0 to 12287) do not cover required
# region (from -28302336 to 28305407)": with the block size a select, bounds inference loses the
# AMX keys' rows. Not landed.
# After the fresh-clone CI, float32 against every peer (build at 42d4842, kernels of ac0c88f):
.venv-torch/bin/python scripts/paired_peers.py --kind mha --pairs 4 --sessions 2 --server build/bench/attngen_call_server > peers_fp32_all.txt
