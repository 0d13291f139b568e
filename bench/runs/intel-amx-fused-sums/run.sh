# Session 87 (2026-12-07), the Intel Xeon with AMX of sessions 82-86 (lscpu: family 6, model 167
# under KVM; amx_bf16, amx_tile, avx512_bf16, avx512_fp16), 2 threads. Every number in
# bench/RESULTS.md's session 87 section. /tmp/cs_old: build/bench/attngen_call_server copied at
# eeb2056 before the rebuild; the new build's server is 957badc's.
#
# Where the bfloat16 attention's time went (eeb2056), and again at 957badc:
#   perf record -e cpu-clock -o /tmp/perf_ls.data build/bench/attngen_bench \
#     --benchmark_filter='mha_forward_bf16/long-single' --benchmark_min_time=4
#   perf annotate --stdio -s <the attention task>, the samples summed per loop (a backward jump's body)
build/bench/attngen_bench --benchmark_filter='^(fma_peak|fma_peak_avx2|fma_peak_bf16|resident_read_bandwidth)' > peaks.txt
.venv/bin/python scripts/paired_ab.py /tmp/cs_old build/bench/attngen_call_server tutorial,tutorial-cross,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single,llama3-8b-prefill --pairs 6 --sessions 2 --bf16 > ab_bf16.txt
.venv/bin/python scripts/paired_ab.py /tmp/cs_old build/bench/attngen_call_server gpt2-decode,llama3-8b-decode,long-decode,llama3-8b-decode-b8 --pairs 12 --sessions 3 --bf16 > ab_bf16_decode.txt
.venv/bin/python scripts/paired_ab.py /tmp/cs_old build/bench/attngen_call_server tutorial,bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single --pairs 6 --sessions 2 > ab_fp32.txt
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 --pairs 4 --sessions 2 --server build/bench/attngen_call_server > peers_bf16_all.txt
.venv-torch/bin/python scripts/paired_peers.py --kind mha --pairs 4 --sessions 2 --server build/bench/attngen_call_server > peers_fp32_all.txt   # after the CI at aac6e43
.venv-torch/bin/python scripts/paired_peers.py --kind bf16 --shapes bert-512,bert-512-b8 --pairs 8 --sessions 4 --server build/bench/attngen_call_server > peers_bf16_bert512_again.txt
# Not kept, each against 957badc's server (/tmp/cs_sums2), the build with the change as the new side:
# - AMX key blocks of 1536, then of 512 (generators.cpp: `amx ? 1536 : knobs.key_block` passed to
#   define_flash_attention):
.venv/bin/python scripts/paired_ab.py /tmp/cs_sums2 build/bench/attngen_call_server long-single,long-causal,gpt2-causal,llama3-8b-prefill --pairs 6 --sessions 2 --bf16 > ab_amx_key_block_1536_bf16.txt
.venv/bin/python scripts/paired_ab.py /tmp/cs_sums2 build/bench/attngen_call_server long-single,long-causal,gpt2-causal,bert-512,bert-512-b8 --pairs 6 --sessions 2 --bf16 > ab_amx_key_block_512_bf16.txt
# - the exp's n = (shifted - shifter) as a strict float subtraction (Halide's strict_sub intrinsic),
#   one vsubps where there were vpaddd and vcvtdq2ps (strict_sub.patch):
.venv/bin/python scripts/paired_ab.py /tmp/cs_sums2 build/bench/attngen_call_server bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single --pairs 6 --sessions 2 --bf16 > ab_strict_sub_bf16.txt
.venv/bin/python scripts/paired_ab.py /tmp/cs_sums2 build/bench/attngen_call_server bert-128,bert-512,bert-512-b8,gpt2-causal,long-causal,long-single --pairs 6 --sessions 2 > ab_strict_sub_fp32.txt
# The negative control of the change: last_group one group short (stages_flash_amx.cpp), the
# bfloat16 and flash tests on the AMX variant (neg_last_group_tests.txt):
#   .venv/bin/ctest --test-dir build -j2 -L host -R "[Hh]alf|bf16|BF16|[Bb][Ff]loat|[Aa]mx|AMX|Flash|Tutorial|MhaForward|Cached"
