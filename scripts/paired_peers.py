#!/usr/bin/env python3
"""attngen against its peers call by call: for each named shape and each peer that runs it,
scripts/paired_ab.py with the peer as the old side (peer_call_server.py) and attngen's
call server as the new, then one table of attngen's speed-up over each peer and over the
fastest of them per shape (the smallest of those medians), with their geometric means. The
paired form of interleaved_runs.py's tables: every ratio comes from calls milliseconds apart,
so a slow minute of the shared machine falls on both sides of it.

    python3 scripts/paired_peers.py --kind mha|bf16|decode|avx2 [--shapes a,b]
        [--pairs 16] [--sessions 2] [--server build/bench/attngen_call_server]

Kinds: mha (float32 forward against ONNX Runtime's MultiHeadAttention, torch nn.MHA and torch
SDPA-MHA), bf16 (bfloat16 handles against both torch forms in bfloat16), decode (a decoding
step against ONNX Runtime's GroupQueryAttention and torch eager), avx2 (attngen's AVX2 variant
against both torch forms kept to AVX2, as interleaved_runs.py --avx2). Needs .venv-torch
(scripts/setup_torch.sh).
"""
from __future__ import annotations

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import paired_ab  # noqa: E402
from peer_worker import TORCH_AVX2_ENV  # noqa: E402  (standard library only)
from named_shapes import read_decode_shapes, read_named_shapes  # noqa: E402
KINDS = {
    "mha": {"peers": ["ort-mha", "torch-mha", "torch-sdpa-mha"], "precision": "f32", "env": {}},
    "bf16": {"peers": ["torch-mha", "torch-sdpa-mha"], "precision": "bf16", "env": {}},
    "decode": {"peers": ["ort-gqa", "torch-eager"], "precision": "f32", "env": {}},
    "avx2": {"peers": ["torch-mha", "torch-sdpa-mha"], "precision": "f32",
             "env": dict(TORCH_AVX2_ENV, ATTNGEN_CPU_DISPATCH="avx2")},
}


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=list(KINDS), required=True)
    p.add_argument("--shapes", help="comma-separated named shapes (default: all of the kind)")
    p.add_argument("--pairs", type=int, default=16, help="pairs per shape and peer")
    p.add_argument("--sessions", type=int, default=2, help="fresh servers per shape and peer")
    p.add_argument("--request-ms", type=float, default=20.0)
    p.add_argument("--server", default=os.path.join(HERE, "..", "build", "bench",
                                                     "attngen_call_server"))
    p.add_argument("--torch-python",
                   default=os.path.join(HERE, "..", ".venv-torch", "bin", "python"))
    args = p.parse_args()
    kind = KINDS[args.kind]
    rows = read_decode_shapes() if args.kind == "decode" else read_named_shapes()
    shapes = args.shapes.split(",") if args.shapes else [r[0] for r in rows]
    os.environ.update(kind["env"])  # reaches both servers
    ratios: dict[str, dict[str, float]] = {}
    for shape in shapes:
        ratios[shape] = {}
        for peer in kind["peers"]:
            try:
                r = paired_ab.compare(paired_ab.PEER + peer, args.server, shape, args.pairs,
                                      args.sessions, kind["precision"], args.request_ms, 1.0,
                                      args.torch_python)
            except paired_ab.ServerError as e:  # e.g. ORT's MHA cannot return the weights
                print(f"{shape} {peer}: not compared: {e}", flush=True)
                continue
            print(f"{peer:15s} {paired_ab.describe(r)}", flush=True)
            ratios[shape][peer] = r["ratio"]
    print(f"\nattngen's speed-up (median of per-pair peer/attngen), kind {args.kind}"
          + (f", {' '.join(f'{k}={v}' for k, v in kind['env'].items())}" if kind["env"] else ""))
    print("| shape | " + " | ".join(kind["peers"]) + " | best peer |")
    print("|---" * (len(kind["peers"]) + 2) + "|")
    best = []
    for shape, by_peer in ratios.items():
        if not by_peer:
            continue
        best.append(min(by_peer.values()))
        cells = [f"{by_peer[q]:.3f}x" if q in by_peer else "-" for q in kind["peers"]]
        print(f"| {shape} | " + " | ".join(cells) + f" | {best[-1]:.3f}x |")
    if best:
        # Each peer's mean over the shapes it ran (ONNX Runtime's MHA cannot return the
        # weights the tutorial shapes ask for), with their count.
        cells = []
        for q in kind["peers"]:
            ran = [v[q] for v in ratios.values() if q in v]
            cells.append(f"{geomean(ran):.3f}x ({len(ran)} shapes)" if ran else "-")
        print("| geometric mean | " + " | ".join(cells) + f" | {geomean(best):.3f}x "
              f"({len(best)} shapes) |")
    return 0 if best else 1


if __name__ == "__main__":
    sys.exit(main())
