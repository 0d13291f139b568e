#!/usr/bin/env python3
"""PyTorch (and ONNX Runtime) baselines for attngen's benchmark suite (issue 7).

Times, fp32 on the CPU with 2 threads in inference mode, at the named shapes of
bench/bench_attngen.cpp:
  torch-mha       torch.nn.MultiheadAttention (batch_first=True)
  torch-sdpa-mha  four nn.Linear projections around F.scaled_dot_product_attention
  ort-mha         ONNX Runtime's com.microsoft MultiHeadAttention between MatMul projections
                  (only when onnxruntime and onnx are installed; it cannot return weights)

Every (shape, implementation) pair runs in a fresh subprocess, because the peak resident set
(VmHWM) only grows: a long shape measured earlier in the same process would hide the memory
of every later one.

    .venv-torch/bin/python scripts/bench_torch.py --shapes tutorial-cross,bert-128 --out torch.json
    .venv-torch/bin/python scripts/bench_torch.py --load torch.json --attngen bench.json

--attngen takes the `--benchmark_format=json` output of build/bench/attngen_bench and prints a
markdown speedup table (attngen against the faster of the two torch implementations).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from typing import Any, Callable

from named_shapes import read_named_shapes
from peer_worker import (THREADS, add_timing_args, check_names, run_worker_process, timed_calls,
                         warn_if_busy)


@dataclass(frozen=True)
class Shape:
    name: str
    batch: int
    q_len: int
    kv_len: int
    d_model: int
    heads: int
    causal: bool = False
    weights: bool = False


# The named shapes of support/named_shapes.def, the table bench/ and the autotuner read too.
SHAPES: dict[str, Shape] = {row[0]: Shape(*row) for row in read_named_shapes()}


IMPLS = ["torch-mha", "torch-sdpa-mha", "ort-mha"]


def mha_flops(s: Shape) -> float:
    """FLOPs as issue 7 counts them: 2·B·Lq·D² for the q and output projections each,
    2·B·Lkv·D² for k and v each, 4·B·Lq·Lkv·D for attention, half that when causal."""
    d2 = float(s.d_model) ** 2
    projections = 2 * (2.0 * s.batch * s.q_len * d2) + 2 * (2.0 * s.batch * s.kv_len * d2)
    attention = 4.0 * s.batch * s.q_len * s.kv_len * s.d_model
    return projections + (attention / 2 if s.causal else attention)


# ---------------------------------------------------------------------------------------------
# The implementations. Each builder returns a zero-argument callable doing one forward.


def _causal_mask(s: Shape) -> Any:
    import torch

    # True = masked out; top-left aligned like attngen's ATTNGEN_CAUSAL_TOP_LEFT (and like
    # SDPA's is_causal), which is the usual causal mask when Lq == Lkv.
    return torch.ones(s.q_len, s.kv_len, dtype=torch.bool).triu(1)


def _inputs(s: Shape, bf16: bool = False) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(6)
    q = torch.rand(s.batch, s.q_len, s.d_model, generator=g) * 2 - 1
    # Self-attention where the lengths allow it (the same tensor for query, key and value):
    # that lets nn.MultiheadAttention take its fused fast path, so torch is at its best.
    # attngen's benchmark (bench/mha_forward_call.cpp) passes one tensor the same way.
    kv = q if s.q_len == s.kv_len else torch.rand(s.batch, s.kv_len, s.d_model, generator=g) * 2 - 1
    if bf16:
        q = q.to(torch.bfloat16)
        kv = q if s.q_len == s.kv_len else kv.to(torch.bfloat16)
    return q, kv


def _reference_mha(s: Shape, bf16: bool = False) -> Any:
    import torch

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(s.d_model, s.heads, bias=True, batch_first=True).eval()
    return mha.to(torch.bfloat16) if bf16 else mha


def _torch_at_least(major: int) -> bool:
    import torch

    return int(torch.__version__.split(".")[0]) >= major


# bf16: module and inputs in torch.bfloat16 (oneDNN's bf16 kernels on CPUs with AVX512-BF16),
# what a user who accepts bf16 runs: the peer of an attngen ATTNGEN_PRECISION_BF16 handle.
def build_torch_mha(s: Shape, bf16: bool = False) -> Callable[[], Any]:
    mha = _reference_mha(s, bf16)
    q, kv = _inputs(s, bf16)
    mask = _causal_mask(s) if s.causal else None

    # torch 1.13 (Debian 12's python3-torch) has no is_causal: the mask alone says it there.
    extra = {"is_causal": s.causal} if _torch_at_least(2) else {}

    def run() -> Any:
        # average_attn_weights=False: per-head weights [B, H, Lq, Lkv], what attngen returns.
        return mha(q, kv, kv, need_weights=s.weights, attn_mask=mask, average_attn_weights=False,
                   **extra)

    return run


class SdpaMha:
    """MHA as a user writes it on F.scaled_dot_product_attention: four nn.Linear layers."""

    def __init__(self, ref: Any, heads: int) -> None:
        import torch

        d = ref.embed_dim
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        # The same weights as the nn.MultiheadAttention, so the two can be checked against
        # each other.
        w, b = ref.in_proj_weight.detach(), ref.in_proj_bias.detach()
        with torch.no_grad():
            for i, lin in enumerate((self.q, self.k, self.v)):
                lin.weight.copy_(w[i * d:(i + 1) * d])
                lin.bias.copy_(b[i * d:(i + 1) * d])
            self.o.weight.copy_(ref.out_proj.weight)
            self.o.bias.copy_(ref.out_proj.bias)
        for lin in (self.q, self.k, self.v, self.o):
            lin.to(ref.in_proj_weight.dtype)

    def _split(self, x: Any) -> Any:
        b, n, d = x.shape
        return x.view(b, n, self.heads, d // self.heads).transpose(1, 2)

    def __call__(self, query: Any, kv: Any, causal: bool, weights: bool) -> tuple[Any, Any]:
        import torch
        import torch.nn.functional as F

        q, k, v = self._split(self.q(query)), self._split(self.k(kv)), self._split(self.v(kv))
        w = None
        if weights:
            # SDPA cannot return the attention weights; where the shape asks for them the
            # attention is written out (scores, softmax, weights @ V), as a user must.
            scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
            if causal:
                scores.masked_fill_(torch.ones_like(scores, dtype=torch.bool).triu(1), -math.inf)
            w = scores.softmax(-1)
            o = w @ v
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        b, h, n, hd = o.shape
        return self.o(o.transpose(1, 2).reshape(b, n, h * hd)), w


def build_torch_sdpa_mha(s: Shape, bf16: bool = False) -> Callable[[], Any]:
    m = SdpaMha(_reference_mha(s, bf16), s.heads)
    q, kv = _inputs(s, bf16)
    return lambda: m(q, kv, s.causal, s.weights)


def build_ort_mha(s: Shape) -> Callable[[], Any]:
    """ONNX Runtime: MatMul projections + com.microsoft.MultiHeadAttention (which adds the
    q/k/v biases itself) + MatMul/Add output projection."""
    if s.weights:
        raise SkipImpl("com.microsoft.MultiHeadAttention cannot return the softmax weights")
    if s.causal and s.q_len != s.kv_len:
        # unidirectional aligns the mask bottom-right (a KV cache), attngen's benchmark top-left.
        raise SkipImpl("unidirectional is bottom-right aligned when Lq != Lkv")
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        raise SkipImpl(f"not installed ({e.name})") from e
    import numpy as np

    ref = _reference_mha(s)
    d = s.d_model
    w = ref.in_proj_weight.detach().numpy()
    b = ref.in_proj_bias.detach().numpy()
    inits = [
        numpy_helper.from_array(np.ascontiguousarray(w[i * d:(i + 1) * d].T), f"w{n}")
        for i, n in enumerate("qkv")
    ]
    inits += [
        numpy_helper.from_array(b.copy(), "bqkv"),
        numpy_helper.from_array(np.ascontiguousarray(ref.out_proj.weight.detach().numpy().T), "wo"),
        numpy_helper.from_array(ref.out_proj.bias.detach().numpy().copy(), "bo"),
    ]
    nodes = [
        helper.make_node("MatMul", ["query", "wq"], ["q"]),
        helper.make_node("MatMul", ["kv", "wk"], ["k"]),
        helper.make_node("MatMul", ["kv", "wv"], ["v"]),
        helper.make_node("MultiHeadAttention", ["q", "k", "v", "bqkv"], ["attn"],
                         domain="com.microsoft", num_heads=s.heads,
                         **({"unidirectional": 1} if s.causal else {})),
        helper.make_node("MatMul", ["attn", "wo"], ["proj"]),
        helper.make_node("Add", ["proj", "bo"], ["out"]),
    ]
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "mha",
        [helper.make_tensor_value_info("query", f32, [s.batch, s.q_len, d]),
         helper.make_tensor_value_info("kv", f32, [s.batch, s.kv_len, d])],
        [helper.make_tensor_value_info("out", f32, [s.batch, s.q_len, d])],
        initializer=inits)
    # IR version 8 (the one of opset 17): onnx may default to a newer IR than ORT reads.
    model = helper.make_model(graph, ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("com.microsoft", 1)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # an ORT build without the contrib op, or without unidirectional
        raise SkipImpl(f"session creation failed: {str(e).splitlines()[0]}") from e
    q, kv = _inputs(s)
    feeds = {"query": q.numpy(), "kv": kv.numpy()}
    return lambda: sess.run(["out"], feeds)


class SkipImpl(Exception):
    """An implementation that cannot run this shape; the reason goes to stderr."""


BUILDERS: dict[str, Callable[[Shape], Callable[[], Any]]] = {
    "torch-mha": build_torch_mha,
    "torch-sdpa-mha": build_torch_sdpa_mha,
    "ort-mha": build_ort_mha,
    "torch-mha-bf16": lambda s: build_torch_mha(s, bf16=True),
    "torch-sdpa-mha-bf16": lambda s: build_torch_sdpa_mha(s, bf16=True),
}


# ---------------------------------------------------------------------------------------------
# The worker: one (shape, implementation) in this process.


def run_worker(shape: Shape, impl: str, min_seconds: float, max_seconds: float) -> dict:
    import torch

    torch.set_num_threads(THREADS)
    torch.set_num_interop_threads(1)
    with torch.inference_mode():
        timed = timed_calls(BUILDERS[impl](shape), min_seconds, max_seconds)
    ms = timed.median_ms
    rec = {
        "shape": shape.name,
        "impl": impl,
        "ms": ms,
        "gflops": mha_flops(shape) / (ms * 1e-3) / 1e9,
        "peak_rss_mb": timed.peak_rss_mb,
        "process_peak_rss_mb": timed.process_peak_rss_mb,
        "calls": len(timed.times),
        "weights_returned": shape.weights and impl != "ort-mha",
        "causal": shape.causal,
        "torch_version": torch.__version__,
        "threads": THREADS,
        # CPU use by others just before timing (0..1), so a reader can judge the numbers.
        "cpu_busy_before": timed.cpu_busy_before,
        # torch.backends.cpu is new in torch 2.
        "torch_cpu_capability": (torch.backends.cpu.get_cpu_capability()
                                 if hasattr(torch.backends, "cpu") else "unknown"),
    }
    if impl == "ort-mha":
        import onnxruntime

        rec["onnxruntime_version"] = onnxruntime.__version__
    return rec


# ---------------------------------------------------------------------------------------------
# The driver: one subprocess per (shape, implementation).


def run_in_subprocess(shape: str, impl: str, args: argparse.Namespace) -> dict | None:
    proc = run_worker_process(__file__, shape, impl, args)
    if proc.returncode == 2:  # SkipImpl, reason already on stderr
        return None
    if proc.returncode != 0:
        print(f"  {shape} {impl}: failed (exit {proc.returncode})", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace, shapes: list[str], impls: list[str]) -> list[dict]:
    records: list[dict] = []
    for shape in shapes:
        for impl in impls:
            rec = run_in_subprocess(shape, impl, args)
            if rec is None:
                continue
            print(f"{shape:15s} {impl:15s} {rec['ms']:10.3f} ms {rec['gflops']:8.1f} GFLOP/s"
                  f"  +{rec['peak_rss_mb']:8.1f} MiB peak RSS ({rec['calls']} calls)",
                  file=sys.stderr, flush=True)
            warn_if_busy(rec, "; 2-thread torch slows down badly when it shares the cores")
            records.append(rec)
    return records


# ---------------------------------------------------------------------------------------------
# The speedup table against attngen's Google Benchmark JSON.

_TIME_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load_gbench_ms(path: str, prefix: str = "mha_forward/") -> dict[str, float]:
    """Shape -> real time in ms of `<prefix><shape>[/real_time]` entries. With
    --benchmark_repetitions the median aggregate is preferred over single runs."""
    with open(path) as f:
        data = json.load(f)
    single: dict[str, list[float]] = {}
    median: dict[str, float] = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b.get("name", ""))
        if not name.startswith(prefix) or b.get("error_occurred"):
            continue
        shape = name[len(prefix):].split("/")[0]
        ms = float(b["real_time"]) * _TIME_UNIT_MS[b.get("time_unit", "ns")]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                median[shape] = ms
        else:
            single.setdefault(shape, []).append(ms)
    out = {k: statistics.median(v) for k, v in single.items()}
    out.update(median)
    return out


def speedup_table(records: list[dict], attngen_ms: dict[str, float]) -> str:
    by = {(r["shape"], r["impl"]): r["ms"] for r in records}
    has_ort = any(r["impl"] == "ort-mha" for r in records)

    def cell(v: float | None) -> str:
        return "–" if v is None else f"{v:.3f}"

    head = ["shape", "attngen ms", "torch MHA ms", "torch SDPA-MHA ms"]
    head += ["ORT MHA ms"] if has_ort else []
    head += ["speedup vs the faster torch"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for shape in SHAPES:
        a = attngen_ms.get(shape)
        mha, sdpa = by.get((shape, "torch-mha")), by.get((shape, "torch-sdpa-mha"))
        if a is None and mha is None and sdpa is None:
            continue
        torch_best = min((t for t in (mha, sdpa) if t is not None), default=None)
        speedup = f"{torch_best / a:.2f}x" if a and torch_best else "–"
        row = [shape, cell(a), cell(mha), cell(sdpa)]
        row += [cell(by.get((shape, "ort-mha")))] if has_ort else []
        row += [speedup]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=",".join(SHAPES),
                   help="comma-separated shape names (default: all): " + ", ".join(SHAPES))
    p.add_argument("--impls", default=",".join(IMPLS),
                   help="comma-separated implementations (default: " + ", ".join(IMPLS) +
                   "; also " + ", ".join(b for b in BUILDERS if b not in IMPLS) + ")")
    p.add_argument("--out", help="write the records as JSON here")
    p.add_argument("--load", help="read records from this JSON instead of measuring")
    p.add_argument("--attngen", help="attngen_bench --benchmark_format=json output: "
                   "print the speedup table")
    add_timing_args(p, max_seconds_default=60.0)
    p.add_argument("--worker", choices=list(BUILDERS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    check_names(p, args.shapes, SHAPES, "shape")
    check_names(p, args.impls, BUILDERS, "implementation")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shapes = args.shapes.split(",")
    if args.worker:
        try:
            rec = run_worker(SHAPES[shapes[0]], args.worker, args.min_seconds,
                             args.max_seconds_per_shape)
        except SkipImpl as e:
            print(f"  {shapes[0]} {args.worker}: skipped: {e}", file=sys.stderr)
            return 2
        print(json.dumps(rec))
        return 0

    if args.load:
        with open(args.load) as f:
            records = json.load(f)
    else:
        records = measure(args, shapes, args.impls.split(","))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(records, f, indent=1)
            f.write("\n")
    if args.attngen:
        print(speedup_table(records, load_gbench_ms(args.attngen)))
    elif not args.out:
        print(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
