#!/usr/bin/env python3
"""PyTorch and ONNX Runtime peers of attngen's decode benchmark (issue 17).

Times one decoding step, fp32 on the CPU with 2 threads, at the DECODE_SHAPE rows of
support/named_shapes.def, the step bench/bench_decode.cpp measures for attngen:
  torch-eager  F.linear projections, RoPE in torch ops, the new keys and values written into
               preallocated cache tensors, F.scaled_dot_product_attention(enable_gqa=True),
               F.linear output projection (inference mode)
  ort-gqa      ONNX Runtime's CPU provider: MatMul (+Add) projections, com.microsoft
               GroupQueryAttention on a past/present key and value buffer shared in place
               (IO binding) with its own RoPE (do_rotary), MatMul (+Add) output projection

A step of a decode shape: the q_len new tokens x [batch, q_len, d_model] are projected to
queries, keys and values (bias per the row), queries and keys rotated at positions
cache_len .. cache_len+q_len-1 (rotary_dim = head_dim, theta 10000), the new keys and values
written into the cache at position cache_len, the queries attend over the cache_len+q_len
positions (bottom-right causal when q_len > 1; query head h reads KV head h / (heads /
kv_heads)), then the output projection. The cache holds cache_len positions of random keys and
values before the step, and every step writes the same slot, so the measured cache keeps its
length. A prefill row (cache_len 0) is a causal forward of q_len tokens into an empty cache.
long-decode ("attention only") keeps its d_model-16 projections: attngen's bench runs them too.

attngen's bench appends the new keys and values to a scratch cache (reset every step) and
attends over the cache_len positions of the measured one; the peers attend over cache_len +
q_len, as a real step does: one position more of 1024 or more, the same work within noise.

Before timing, each worker checks its step once against a float64 NumPy reference of the same
math (the output, and the keys and values written into the cache) and fails loudly (exit 3,
no record) if they differ by more than 1e-4 of the output's scale: the guarantee that the peers
compute what attngen computes. Every (shape, implementation) runs in a fresh subprocess, so
one shape's allocations (up to 0.5 GB of cache) do not shape the next one's.

The machine is shared: a record says how busy the CPUs were just before it was timed
(cpu_busy_before). torch's 2-thread OpenMP suffers most; in this script's first runs
gpt2-decode's torch step took 0.4-0.6 ms on idle cores and 8-12 ms on busy ones.

    .venv-torch/bin/python scripts/bench_decode_peers.py --shapes gpt2-decode --out peers.json
    .venv-torch/bin/python scripts/bench_decode_peers.py --check-only      # every shape, no timing
    build/bench/attngen_bench --benchmark_filter='^decode/' --benchmark_format=json > a.json
    .venv-torch/bin/python scripts/bench_decode_peers.py --load peers.json --attngen a.json

--load and --attngen take several files each, paired in order (one measurement round each,
as scripts/interleaved_runs.py --decode writes them): the table then gives each round's
ratio and their median.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from bench_torch import load_gbench_ms
from named_shapes import read_decode_shapes
from peer_worker import (THREADS, add_timing_args, check_names, run_worker_process, timed_calls,
                         warn_if_busy)

ROPE_THETA = 10000.0
# Largest |peer - reference| allowed, relative to the largest |reference| of the same tensor.
# float32 accumulation over d_model = 4096 stays near 1e-6; a wrong rotation, mask, head
# grouping or cache slot is off by 1e-2 and more.
TOLERANCE = 1e-4
EXIT_SKIP, EXIT_CHECK_FAILED = 2, 3


@dataclass(frozen=True)
class DecodeShape:
    name: str
    batch: int
    q_len: int
    cache_len: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    rope: str  # NONE | HALF | INTERLEAVED, attngen_rope's names
    bias: bool

    @property
    def max_len(self) -> int:
        """Positions the cache holds after the step: the cached ones and the new ones."""
        return self.cache_len + self.q_len

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


SHAPES: dict[str, DecodeShape] = {row[0]: DecodeShape(*row) for row in read_decode_shapes()}
IMPLS = ["torch-eager", "ort-gqa"]


def step_bytes(s: DecodeShape) -> float:
    """The bytes one step must read at least, as bench_decode.cpp's step_bytes counts them:
    every weight once, every cached key and value once."""
    weights = float(s.d_model) * (2 * s.q_dim + 2 * s.kv_dim)
    cache = float(s.batch) * s.cache_len * 2 * s.kv_dim
    return 4 * (weights + cache)


class SkipImpl(Exception):
    """An implementation that cannot run this shape; the reason goes to stderr."""


class CheckFailed(Exception):
    """A peer's step disagrees with the float64 reference."""


# ---------------------------------------------------------------------------------------------
# The step's data, shared by the peers and the reference. Scales follow bench_decode.cpp:
# x uniform in [-1, 1], weights uniform in ±1/sqrt(fan_in), biases in ±0.1.


@dataclass
class StepData:
    x: np.ndarray            # [batch, q_len, d_model]
    wq: np.ndarray           # [q_dim, d_model], nn.Linear's [out, in]
    wk: np.ndarray           # [kv_dim, d_model]
    wv: np.ndarray           # [kv_dim, d_model]
    wo: np.ndarray           # [d_model, q_dim]
    bq: np.ndarray | None
    bk: np.ndarray | None
    bv: np.ndarray | None
    bo: np.ndarray | None
    k_cache: np.ndarray      # [batch, kv_heads, max_len, head_dim] (BNSH), cache_len filled
    v_cache: np.ndarray
    cos: np.ndarray          # [max_len, head_dim / 2] float64, rotary angle of position p
    sin: np.ndarray


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    # float32 throughout: the b8 cache is 268 MB in float32, twice that as a float64 temporary.
    a = rng.random(shape, dtype=np.float32)
    a *= 2 * scale
    a -= scale
    return a


def make_data(s: DecodeShape, seed: int = 17) -> StepData:
    rng = np.random.default_rng(seed)
    d = s.d_model
    wscale, oscale = 1 / math.sqrt(d), 1 / math.sqrt(s.q_dim)
    bias = (lambda n: _uniform(rng, (n,), 0.1)) if s.bias else (lambda n: None)
    k_cache = np.zeros((s.batch, s.kv_heads, s.max_len, s.head_dim), np.float32)
    v_cache = np.zeros_like(k_cache)
    # Cached keys and values spread like a projected random token's (std 1/3 for x and weights
    # as above; a uniform in ±1/sqrt(3) has that std), so the softmax is as flat or peaked as
    # in attngen's bench, which fills its cache by appending random tokens.
    for b in range(s.batch):
        for cache in (k_cache, v_cache):
            cache[b, :, :s.cache_len] = _uniform(
                rng, (s.kv_heads, s.cache_len, s.head_dim), 1 / math.sqrt(3))
    half = s.head_dim // 2
    inv_freq = ROPE_THETA ** (-2.0 * np.arange(half) / s.head_dim)
    angles = np.arange(s.max_len, dtype=np.float64)[:, None] * inv_freq[None, :]
    return StepData(
        x=_uniform(rng, (s.batch, s.q_len, d), 1.0),
        wq=_uniform(rng, (s.q_dim, d), wscale), wk=_uniform(rng, (s.kv_dim, d), wscale),
        wv=_uniform(rng, (s.kv_dim, d), wscale), wo=_uniform(rng, (d, s.q_dim), oscale),
        bq=bias(s.q_dim), bk=bias(s.kv_dim), bv=bias(s.kv_dim), bo=bias(d),
        k_cache=k_cache, v_cache=v_cache, cos=np.cos(angles), sin=np.sin(angles))


# ---------------------------------------------------------------------------------------------
# The float64 reference, written independently of both peers: explicit per-(item, KV head)
# loops, the mask spelled out, the rotation by its definition.


def _rope_ref(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, mode: str) -> np.ndarray:
    """x [..., S, head_dim] rotated; cos, sin [S, head_dim / 2] of the rows' positions."""
    if mode == "NONE":
        return x
    out = np.empty_like(x)
    if mode == "HALF":  # pairs (i, i + head_dim/2): GPT-NeoX, Llama as Hugging Face stores it
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        out[..., :h] = x1 * cos - x2 * sin
        out[..., h:] = x2 * cos + x1 * sin
    elif mode == "INTERLEAVED":  # pairs (2i, 2i+1): GPT-J
        xe, xo = x[..., 0::2], x[..., 1::2]
        out[..., 0::2] = xe * cos - xo * sin
        out[..., 1::2] = xe * sin + xo * cos
    else:
        raise ValueError(f"unknown rope {mode!r}")
    return out


def reference_step(s: DecodeShape, d: StepData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out [B, S, d_model], new keys, new values [B, kv_heads, S, head_dim]) in float64.
    Reads only the cache's first cache_len positions."""
    f8 = np.float64
    b_, n, c, hd = s.batch, s.q_len, s.cache_len, s.head_dim

    def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        y = x @ w.astype(f8).T
        return y if b is None else y + b.astype(f8)

    def heads(y: np.ndarray, count: int) -> np.ndarray:  # [B, S, count*hd] -> [B, count, S, hd]
        return y.reshape(b_, n, count, hd).transpose(0, 2, 1, 3)

    x = d.x.astype(f8)
    cos, sin = d.cos[c:c + n], d.sin[c:c + n]
    q = _rope_ref(heads(linear(x, d.wq, d.bq), s.heads), cos, sin, s.rope)
    k = _rope_ref(heads(linear(x, d.wk, d.bk), s.kv_heads), cos, sin, s.rope)
    v = heads(linear(x, d.wv, d.bv), s.kv_heads)
    # Query i (position c + i) sees keys 0 .. c + i: bottom-right causal, nothing masked at
    # q_len 1.
    visible = np.arange(c + n)[None, :] <= (c + np.arange(n))[:, None]
    group = s.heads // s.kv_heads
    o = np.empty((b_, s.heads, n, hd))
    for b in range(b_):
        for g in range(s.kv_heads):
            keys = np.concatenate([d.k_cache[b, g, :c].astype(f8), k[b, g]])
            values = np.concatenate([d.v_cache[b, g, :c].astype(f8), v[b, g]])
            hs = slice(g * group, (g + 1) * group)
            scores = np.where(visible, q[b, hs] @ keys.T / math.sqrt(hd), -np.inf)
            p = np.exp(scores - scores.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            o[b, hs] = p @ values
    out = linear(o.transpose(0, 2, 1, 3).reshape(b_, n, s.q_dim), d.wo, d.bo)
    return out, k, v


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


# ---------------------------------------------------------------------------------------------
# The peers. A builder returns the step (a zero-argument callable returning the output as an
# array) over data whose k_cache / v_cache arrays it updates in place, so the check can read
# the slot it wrote from them.

Step = Callable[[], np.ndarray]


def build_torch_eager(s: DecodeShape, d: StepData) -> Step:
    import torch
    import torch.nn.functional as F

    t = torch.from_numpy  # shares memory: the step's cache writes land in d.k_cache, d.v_cache
    x, wq, wk, wv, wo = t(d.x), t(d.wq), t(d.wk), t(d.wv), t(d.wo)
    bq, bk, bv, bo = (None if b is None else t(b) for b in (d.bq, d.bk, d.bv, d.bo))
    k_cache, v_cache = t(d.k_cache), t(d.v_cache)
    b_, n, c, hd = s.batch, s.q_len, s.cache_len, s.head_dim
    # The step's rows of the rotation tables, as a model holds them (sliced per step, free).
    cos = t(d.cos[c:c + n].astype(np.float32))
    sin = t(d.sin[c:c + n].astype(np.float32))
    if s.rope == "HALF":  # Hugging Face's apply_rotary_pos_emb: cos, sin repeated per half
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)

    def rope(y: Any) -> Any:  # y [B, heads, S, hd]
        if s.rope == "HALF":
            y1, y2 = y.chunk(2, dim=-1)
            return y * cos + torch.cat([-y2, y1], -1) * sin
        if s.rope == "INTERLEAVED":  # GPT-J's rotate_every_two
            ye, yo = y[..., 0::2], y[..., 1::2]
            return torch.stack([ye * cos - yo * sin, ye * sin + yo * cos], -1).flatten(-2)
        return y

    # SDPA's is_causal is top-left aligned, which is bottom-right when q_len == kv_len (the
    # prefill); with cached positions and q_len > 1 the mask is spelled out (True = attends).
    is_causal = n > 1 and c == 0
    mask = None
    if n > 1 and c > 0:
        mask = torch.arange(c + n)[None, :] <= (c + torch.arange(n))[:, None]

    def step() -> np.ndarray:
        q = F.linear(x, wq, bq).view(b_, n, s.heads, hd).transpose(1, 2)
        k = F.linear(x, wk, bk).view(b_, n, s.kv_heads, hd).transpose(1, 2)
        v = F.linear(x, wv, bv).view(b_, n, s.kv_heads, hd).transpose(1, 2)
        q, k = rope(q), rope(k)
        k_cache[:, :, c:c + n] = k
        v_cache[:, :, c:c + n] = v
        # On the CPU this dispatches to SDPA's flash kernel, which reads the KV heads shared
        # (enable_gqa); the math fallback would repeat_interleave the whole cache every step.
        o = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask,
                                           is_causal=is_causal, enable_gqa=True)
        return F.linear(o.transpose(1, 2).reshape(b_, n, s.q_dim), wo, bo).numpy()

    return step


def build_ort_gqa(s: DecodeShape, d: StepData) -> Step:
    """MatMul (+Add) projections, com.microsoft.GroupQueryAttention, MatMul (+Add) output.

    GroupQueryAttention (CPU, float32 is supported) takes past_key / past_value in BNSH and
    returns present_key / present_value; when both are the same buffer (pointer-equal) it
    writes the new rows into it in place at position seqlens_k + 1 - q_len and copies nothing
    (otherwise it would copy the whole past into the present on every call). IO binding binds
    one OrtValue per cache as both the past input and the present output, sized max_len =
    cache_len + q_len, and wraps the NumPy arrays without copying. seqlens_k is the total
    length - 1 per item; total_sequence_length the batch's total. With do_rotary the operator
    rotates q and k itself at positions from seqlens_k, reading cos_cache / sin_cache
    [max_len, head_dim / 2]. GroupQueryAttention has no bias inputs: the biases are Adds."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        raise SkipImpl(f"not installed ({e.name})") from e
    if s.q_len > 1 and s.cache_len > 0 and s.batch > 1:
        # The operator's documented restriction on a multi-token step after cached positions.
        raise SkipImpl("GroupQueryAttention: q_len > 1 with a past needs batch 1")

    f32 = TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.ascontiguousarray(w.T), name)
             for w, name in ((d.wq, "wq"), (d.wk, "wk"), (d.wv, "wv"), (d.wo, "wo"))]
    nodes = []

    def project(src: str, w: str, b: np.ndarray | None, dst: str) -> None:
        if b is None:
            nodes.append(helper.make_node("MatMul", [src, w], [dst]))
        else:
            inits.append(numpy_helper.from_array(b, "b" + w[1:]))
            nodes.append(helper.make_node("MatMul", [src, w], [dst + "_nobias"]))
            nodes.append(helper.make_node("Add", [dst + "_nobias", "b" + w[1:]], [dst]))

    project("x", "wq", d.bq, "q")
    project("x", "wk", d.bk, "k")
    project("x", "wv", d.bv, "v")
    gqa_inputs = ["q", "k", "v", "past_key", "past_value", "seqlens_k", "total_sequence_length"]
    if s.rope != "NONE":
        inits += [numpy_helper.from_array(d.cos.astype(np.float32), "cos_cache"),
                  numpy_helper.from_array(d.sin.astype(np.float32), "sin_cache")]
        gqa_inputs += ["cos_cache", "sin_cache"]
    nodes.append(helper.make_node(
        "GroupQueryAttention", gqa_inputs, ["attn", "present_key", "present_value"],
        domain="com.microsoft", num_heads=s.heads, kv_num_heads=s.kv_heads,
        do_rotary=int(s.rope != "NONE"), rotary_interleaved=int(s.rope == "INTERLEAVED")))
    project("attn", "wo", d.bo, "out")

    cache_shape = list(d.k_cache.shape)
    i32 = TensorProto.INT32
    graph = helper.make_graph(
        nodes, "decode_step",
        [helper.make_tensor_value_info("x", f32, list(d.x.shape)),
         helper.make_tensor_value_info("past_key", f32, cache_shape),
         helper.make_tensor_value_info("past_value", f32, cache_shape),
         helper.make_tensor_value_info("seqlens_k", i32, [s.batch]),
         helper.make_tensor_value_info("total_sequence_length", i32, [])],
        [helper.make_tensor_value_info("out", f32, list(d.x.shape)),
         helper.make_tensor_value_info("present_key", f32, cache_shape),
         helper.make_tensor_value_info("present_value", f32, cache_shape)],
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
    except Exception as e:  # an ORT build without the contrib op
        raise SkipImpl(f"session creation failed: {str(e).splitlines()[0]}") from e

    return _BoundSession(sess, {
        "x": d.x,
        "past_key": d.k_cache, "present_key": d.k_cache,
        "past_value": d.v_cache, "present_value": d.v_cache,
        "seqlens_k": np.full(s.batch, s.max_len - 1, np.int32),
        "total_sequence_length": np.array(s.max_len, np.int32),
        "out": np.empty_like(d.x),
    })


class _BoundSession:
    """An ONNX Runtime session run on IO-bound NumPy arrays: inputs and outputs by name (an
    array may be both, as the caches are). The OrtValues wrap the arrays' memory (no copy) and
    are kept here, with the arrays, for as long as the binding is used."""

    def __init__(self, sess: Any, arrays: dict[str, np.ndarray]) -> None:
        import onnxruntime as ort

        self.sess = sess
        self.binding = sess.io_binding()
        self.values: dict[int, Any] = {}  # id(array) -> its one OrtValue
        self.arrays = arrays
        inputs = {i.name for i in sess.get_inputs()}
        for name, a in arrays.items():
            if id(a) not in self.values:
                self.values[id(a)] = ort.OrtValue.ortvalue_from_numpy(a)
            bind = (self.binding.bind_ortvalue_input if name in inputs
                    else self.binding.bind_ortvalue_output)
            bind(name, self.values[id(a)])
        self.out = arrays["out"]

    def __call__(self) -> np.ndarray:
        self.sess.run_with_iobinding(self.binding)
        return self.out


BUILDERS: dict[str, Callable[[DecodeShape, StepData], Step]] = {
    "torch-eager": build_torch_eager,
    "ort-gqa": build_ort_gqa,
}


# ---------------------------------------------------------------------------------------------
# The worker: one (shape, implementation) in this process.


def check_step(s: DecodeShape, impl: str, d: StepData, step: Step) -> float:
    """Runs one step and compares its output and the cache slot it wrote with the float64
    reference; raises CheckFailed beyond TOLERANCE. Returns the largest relative error."""
    out_ref, k_ref, v_ref = reference_step(s, d)
    out = step()
    new = slice(s.cache_len, s.max_len)
    errors = {"output": relative_error(out, out_ref),
              "new keys in the cache": relative_error(d.k_cache[:, :, new], k_ref),
              "new values in the cache": relative_error(d.v_cache[:, :, new], v_ref)}
    bad = {k: e for k, e in errors.items() if not e <= TOLERANCE}  # NaN counts as bad
    if bad:
        raise CheckFailed(f"{s.name} {impl}: differs from the float64 reference: "
                          + ", ".join(f"{k} max relative error {e:.3g}" for k, e in bad.items())
                          + f" (tolerance {TOLERANCE:g})")
    return max(errors.values())


def run_worker(s: DecodeShape, impl: str, min_seconds: float, max_seconds: float,
               check_only: bool) -> dict:
    rec: dict[str, Any] = {"shape": s.name, "impl": impl, "threads": THREADS}
    if impl == "torch-eager":
        import torch

        torch.set_num_threads(THREADS)
        torch.set_num_interop_threads(1)
        rec["torch_version"] = torch.__version__
        rec["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        mode: Any = torch.inference_mode()
    else:
        import onnxruntime

        rec["onnxruntime_version"] = onnxruntime.__version__
        mode = contextlib.nullcontext()
    with mode:
        d = make_data(s)
        step = BUILDERS[impl](s, d)
        rec["max_rel_err"] = check_step(s, impl, d, step)
        if check_only:
            return rec
        timed = timed_calls(step, min_seconds, max_seconds)
    ms = timed.median_ms
    rec.update({
        "median_ms": ms,
        "min_ms": min(timed.times) * 1e3,
        "calls": len(timed.times),
        "step_bytes": step_bytes(s),
        "gbps": step_bytes(s) / (ms * 1e-3) / 1e9,
        "peak_rss_mb": timed.peak_rss_mb,
        # CPU use by others just before timing (0..1), so a reader can judge the numbers.
        "cpu_busy_before": timed.cpu_busy_before,
    })
    return rec


# ---------------------------------------------------------------------------------------------
# The driver: one subprocess per (shape, implementation).


def run_in_subprocess(shape: str, impl: str, args: argparse.Namespace) -> dict | None:
    """The worker's record; None when skipped. Raises CheckFailed when its check failed."""
    # OPENBLAS_NUM_THREADS (THREAD_ENV) is NumPy's, for the float64 reference; its threads
    # idle again during the worker's half-second cpu_busy_fraction sample, before the timing.
    proc = run_worker_process(__file__, shape, impl, args,
                              ["--check-only"] if args.check_only else [])
    if proc.returncode == EXIT_SKIP:  # reason already on stderr
        return None
    if proc.returncode == EXIT_CHECK_FAILED:
        raise CheckFailed(f"{shape} {impl}: the correctness check failed (see above)")
    if proc.returncode != 0:
        raise RuntimeError(f"{shape} {impl}: the worker failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace, shapes: list[str],
            impls: list[str]) -> tuple[list[dict], list[str]]:
    """The records, and the failures (each a line); every pair is tried."""
    records: list[dict] = []
    failures: list[str] = []
    for shape in shapes:
        for impl in impls:
            try:
                rec = run_in_subprocess(shape, impl, args)
            except (CheckFailed, RuntimeError) as e:
                failures.append(str(e))
                continue
            if rec is None:
                continue
            line = f"{shape:20s} {impl:12s} check: max relative error {rec['max_rel_err']:.2e}"
            if "median_ms" in rec:
                line += (f"  {rec['median_ms']:9.3f} ms {rec['gbps']:6.1f} GB/s "
                         f"({rec['calls']} calls)")
            print(line, file=sys.stderr, flush=True)
            warn_if_busy(rec)
            records.append(rec)
    return records, failures


# ---------------------------------------------------------------------------------------------
# Tables.


def _fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def peers_table(records: list[dict]) -> str:
    lines = ["| shape | impl | ms per step | GB/s of the step's bytes | max rel. error |",
             "|---|---|---|---|---|"]
    for r in records:
        ms = r.get("median_ms")  # None in --check-only records
        gbps = "–" if ms is None else f"{r['gbps']:.1f}"
        lines.append(f"| {r['shape']} | {r['impl']} | {_fmt_ms(ms)} | {gbps} | "
                     f"{r['max_rel_err']:.1e} |")
    return "\n".join(lines)


def ratio_table(rounds: list[tuple[dict[str, float], list[dict]]]) -> str:
    """One row per shape: medians over the rounds of attngen's and each peer's ms, and the
    ratio best peer / attngen (> 1: attngen is faster), each round's in brackets when there
    are several. A ratio is taken within a round, so slow stretches of the machine cancel."""
    head = ["shape", "attngen ms", "attngen GB/s"] + [f"{i} ms" for i in IMPLS]
    head += ["best peer / attngen"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in SHAPES.items():
        ours: list[float] = []
        peers: dict[str, list[float]] = {i: [] for i in IMPLS}
        ratios: list[float] = []
        for attngen_ms, records in rounds:
            by = {r["impl"]: r["median_ms"] for r in records
                  if r["shape"] == name and r.get("median_ms") is not None}
            for impl, ms in by.items():
                peers.setdefault(impl, []).append(ms)
            a = attngen_ms.get(name)
            if a is None:
                continue
            ours.append(a)
            if by:
                ratios.append(min(by.values()) / a)
        if not ours and not any(peers.values()):
            continue

        def med(v: list[float]) -> float | None:
            return statistics.median(v) if v else None

        a_med = med(ours)
        gbps = f"{step_bytes(s) / (a_med * 1e-3) / 1e9:.1f}" if a_med else "–"
        ratio = "–"
        if ratios:
            ratio = f"**{statistics.median(ratios):.2f}x**"
            if len(ratios) > 1:
                ratio += " (" + ", ".join(f"{x:.2f}" for x in ratios) + ")"
        row = [name, _fmt_ms(a_med), gbps] + [_fmt_ms(med(peers[i])) for i in IMPLS] + [ratio]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=",".join(SHAPES),
                   help="comma-separated decode shape names (default: all): " + ", ".join(SHAPES))
    p.add_argument("--impls", default=",".join(IMPLS),
                   help="comma-separated implementations (default: all): " + ", ".join(IMPLS))
    p.add_argument("--out", help="write the records as JSON here")
    p.add_argument("--load", nargs="+", metavar="JSON",
                   help="read records from these files (one per round) instead of measuring")
    p.add_argument("--attngen", nargs="+", metavar="JSON",
                   help="attngen_bench --benchmark_format=json output with decode/<shape> "
                   "entries, one per --load file (or one, for a measurement just taken): "
                   "print the ratio table")
    p.add_argument("--check-only", action="store_true",
                   help="run each peer's correctness check only, no timing")
    add_timing_args(p, max_seconds_default=30.0)
    p.add_argument("--worker", choices=IMPLS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    check_names(p, args.shapes, SHAPES, "shape")
    check_names(p, args.impls, IMPLS, "implementation")
    if args.attngen and len(args.attngen) != len(args.load or [None]):
        p.error("--attngen takes one file per --load file (one for a fresh measurement)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shapes = args.shapes.split(",")
    if args.worker:
        try:
            rec = run_worker(SHAPES[shapes[0]], args.worker, args.min_seconds,
                             args.max_seconds_per_shape, args.check_only)
        except SkipImpl as e:
            print(f"  {shapes[0]} {args.worker}: skipped: {e}", file=sys.stderr)
            return EXIT_SKIP
        except CheckFailed as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_CHECK_FAILED
        print(json.dumps(rec))
        return 0

    failures: list[str] = []
    if args.load:
        rounds_records = []
        for path in args.load:
            with open(path) as f:
                rounds_records.append(json.load(f))
    else:
        records, failures = measure(args, shapes, args.impls.split(","))
        rounds_records = [records]
        if args.out:
            with open(args.out, "w") as f:
                json.dump(records, f, indent=1)
                f.write("\n")
    if args.attngen:
        rounds = [(load_gbench_ms(a, prefix="decode/"), r)
                  for a, r in zip(args.attngen, rounds_records)]
        print(ratio_table(rounds))
    elif args.load or args.out or args.check_only:
        print(peers_table([r for rs in rounds_records for r in rs]))
    else:
        print(json.dumps(rounds_records[0], indent=1))
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
