#!/usr/bin/env python3
"""PyTorch's float32 MHA on a CUDA GPU at the shapes of bench/bench_device.cpp, for the ratio
in bench/RESULTS.md. TF32 is off, so every product is a true fp32 FMA as attngen's are.

  torch-mha       torch.nn.MultiheadAttention(batch_first=True)
  torch-sdpa-mha  four nn.Linear projections around F.scaled_dot_product_attention
  torch-sdpa      F.scaled_dot_product_attention alone, on heads already split (the bar for
                  attngen_bench_device's sdpa_device/)

Prints one JSON line per (shape, impl): median ms over timed rounds (CUDA events), or the error
when the shape does not run (e.g. out of memory). `--dtype bfloat16` (or float16) times the same
modules in half precision, for the half-precision variants of attngen_bench_device. First, one
line of the ceilings measured on the same GPU: an 8192^3 float32 matrix product with TF32 off
(the fp32 FMA rate a library reaches) and a device-to-device copy (bytes read plus written).
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


def attention_flops(b, lq, lkv, d, causal):
    attn = 4.0 * b * lq * lkv * d
    return attn / 2 if causal else attn


def build(impl, b, lq, lkv, d, h, causal, dtype):
    torch.manual_seed(0)
    if impl == "torch-sdpa":
        qh = torch.randn(b, h, lq, d // h, device="cuda", dtype=dtype)
        kh = torch.randn(b, h, lkv, d // h, device="cuda", dtype=dtype)
        vh = torch.randn(b, h, lkv, d // h, device="cuda", dtype=dtype)
        return lambda: F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
    q = torch.randn(b, lq, d, device="cuda", dtype=dtype)
    kv = torch.randn(b, lkv, d, device="cuda", dtype=dtype)
    if impl == "torch-mha":
        m = torch.nn.MultiheadAttention(d, h, batch_first=True).cuda().to(dtype).eval()
        mask = None
        if causal:
            mask = torch.ones(lq, lkv, dtype=torch.bool, device="cuda").triu(1)

        def run():
            return m(q, kv, kv, attn_mask=mask, need_weights=False)[0]

        return run
    lin = [torch.nn.Linear(d, d).cuda().to(dtype) for _ in range(4)]

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


def ceilings():
    """The fp32 product rate (TF32 off) and the copy bandwidth, measured on this GPU."""
    n = 8192
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    gemm_ms = time_ms(lambda: a @ b)
    src = torch.randn(256 * 2**20, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = time_ms(lambda: dst.copy_(src))
    return {
        "sgemm_8192_tflops": 2.0 * n**3 / gemm_ms * 1e-9,
        "copy_gbs": 2.0 * src.numel() * 4 / copy_ms * 1e-6,
    }


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    args = sys.argv[1:]
    dtype = torch.float32
    if "--dtype" in args:
        i = args.index("--dtype")
        dtype = getattr(torch, args[i + 1])
        del args[i : i + 2]
    props = torch.cuda.get_device_properties(0)
    info = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
            "sms": props.multi_processor_count, "dtype": str(dtype), **ceilings()}
    print(json.dumps(info), flush=True)
    names = args or list(SHAPES)
    for name in names:
        b, lq, lkv, d, h, causal = SHAPES[name]
        for impl in ("torch-mha", "torch-sdpa-mha", "torch-sdpa"):
            rec = {"shape": name, "impl": impl, "dtype": str(dtype)}
            flops = attention_flops if impl == "torch-sdpa" else mha_flops
            try:
                ms = time_ms(build(impl, b, lq, lkv, d, h, causal, dtype))
                rec.update(ms=ms, gflops=flops(b, lq, lkv, d, causal) / ms * 1e-6)
            except Exception as e:  # noqa: BLE001 -- report and go on to the next shape
                rec["error"] = str(e).splitlines()[0][:200]
            torch.cuda.empty_cache()
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
