#!/usr/bin/env python3
"""PyTorch's float32 MHA on a CUDA GPU at the shapes of bench/bench_device.cpp, for the ratio
in bench/RESULTS.md. TF32 is off, so every product is a true fp32 FMA as attngen's are.

  torch-mha       torch.nn.MultiheadAttention(batch_first=True)
  torch-sdpa-mha  four nn.Linear projections around F.scaled_dot_product_attention

Prints one JSON line per (shape, impl): median ms over timed rounds (CUDA events), or the error
when the shape does not run (e.g. out of memory).
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F

from named_shapes import read_named_shapes

# The named shapes (support/named_shapes.def) and the GPU issue's long self-attention.
SHAPES = {row[0]: (*row[1:6], row[6]) for row in read_named_shapes()}
SHAPES["long-self-32k"] = (1, 32768, 32768, 768, 12, False)


def mha_flops(b, lq, lkv, d, causal):
    proj = 2 * 2.0 * b * lq * d * d + 2 * 2.0 * b * lkv * d * d
    attn = 4.0 * b * lq * lkv * d
    return proj + (attn / 2 if causal else attn)


def build(impl, b, lq, lkv, d, h, causal):
    torch.manual_seed(0)
    q = torch.randn(b, lq, d, device="cuda")
    kv = torch.randn(b, lkv, d, device="cuda")
    if impl == "torch-mha":
        m = torch.nn.MultiheadAttention(d, h, batch_first=True).cuda().eval()
        mask = None
        if causal:
            mask = torch.ones(lq, lkv, dtype=torch.bool, device="cuda").triu(1)

        def run():
            return m(q, kv, kv, attn_mask=mask, need_weights=False)[0]

        return run
    lin = [torch.nn.Linear(d, d).cuda() for _ in range(4)]

    def split(x):
        return x.view(b, -1, h, d // h).transpose(1, 2)

    def run():
        qq, kk, vv = split(lin[0](q)), split(lin[1](kv)), split(lin[2](kv))
        o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
        return lin[3](o.transpose(1, 2).reshape(b, lq, d))

    return run


def time_ms(fn, rounds=20):
    with torch.no_grad():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(rounds):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    info = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    print(json.dumps(info), flush=True)
    names = sys.argv[1:] or list(SHAPES)
    for name in names:
        b, lq, lkv, d, h, causal = SHAPES[name]
        for impl in ("torch-mha", "torch-sdpa-mha"):
            rec = {"shape": name, "impl": impl}
            try:
                ms = time_ms(build(impl, b, lq, lkv, d, h, causal))
                rec.update(ms=ms, gflops=mha_flops(b, lq, lkv, d, causal) / ms * 1e-6)
            except Exception as e:  # noqa: BLE001 -- report and go on to the next shape
                rec["error"] = str(e).splitlines()[0][:200]
            torch.cuda.empty_cache()
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
