#!/usr/bin/env python3
"""The MHA comparison with attngen and torch interleaved shape by shape: for each round and
each shape, attngen_bench's mha_forward/<shape>, then torch 2.15, then Debian's torch 1.13, one
right after the other. On this shared machine whole stretches of minutes run slower; measured
suite by suite, attngen's run and torch's could land in different stretches (one run of
attngen's small shapes measured 25% slower than the next). Interleaved, a shape's three
measurements lie seconds apart.

Each round's files are merged into attngen_<i>.json, torch_<i>.json and torch_debian_<i>.json
in --out-dir, the layout scripts/speedup_runs.py reads; the table is printed at the end.

    scripts/interleaved_runs.py --bench build/bench/attngen_bench --out-dir bench/runs/X --rounds 3

--decode does the same for decoding (issue 17): per round and decode shape, attngen_bench's
decode/<shape> and decode_bf16/<shape>, then scripts/bench_decode_peers.py (torch eager, ONNX
Runtime's GroupQueryAttention) in .venv-torch; attngen_decode_<i>.json and decode_peers_<i>.json
in --out-dir, bench_decode_peers.py's table of in-round ratios at the end, and attngen's float32
step over its bfloat16 step per round.

    scripts/interleaved_runs.py --decode --out-dir bench/runs/X --rounds 3

--bf16 compares bfloat16 (issue 19): per round and shape, attngen_bench's mha_forward_bf16/<shape>
and mha_forward/<shape>, then torch 2.15's nn.MultiheadAttention and SDPA-MHA with module and
inputs in torch.bfloat16; bf16_attngen_<i>.json and bf16_torch_<i>.json in --out-dir, and a
table of medians of in-round ratios at the end.

    scripts/interleaved_runs.py --bf16 --out-dir bench/runs/X --rounds 3

--avx2 runs the MHA rounds with attngen's AVX2 variant (ATTNGEN_CPU_DISPATCH=avx2) and torch
2.15 kept to AVX2 (bench_torch.py --isa avx2), both torch forms, no ONNX Runtime (issue 18).

    scripts/interleaved_runs.py --avx2 --out-dir bench/runs/X --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_torch import SHAPES
from named_shapes import read_decode_shapes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_attngen(bench: str, shape: str, prefix: str = "mha_forward",
                dispatch: str | None = None) -> list[dict]:
    """dispatch: ATTNGEN_CPU_DISPATCH for the run (e.g. avx2), or the variant the CPU picks."""
    env = dict(os.environ)
    if dispatch:
        env["ATTNGEN_CPU_DISPATCH"] = dispatch
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([bench, f"--benchmark_filter=^{prefix}/{shape}/",
                        "--benchmark_min_time=0.3", "--benchmark_repetitions=5",
                        f"--benchmark_out={out.name}", "--benchmark_out_format=json"],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        return json.loads(Path(out.name).read_text())["benchmarks"]


def run_torch(python: str, shape: str, impls: str | None, isa: str = "native") -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [python, os.path.join(HERE, "bench_torch.py"), "--shapes", shape, "--out", out.name,
               "--max-seconds-per-shape", "3", "--isa", isa]
        if impls:
            cmd += ["--impls", impls]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def run_decode_peers(python: str, shape: str) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([python, os.path.join(HERE, "bench_decode_peers.py"), "--shapes", shape,
                        "--out", out.name, "--max-seconds-per-shape", "3"],
                       check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def decode_rounds(args: argparse.Namespace, shapes: list[str]) -> None:
    """The --decode rounds; the peers' script prints the table (it needs NumPy, so it runs in
    --torch-python rather than in this interpreter)."""
    peer_files, attngen_files = [], []
    for i in range(1, args.rounds + 1):
        attngen, peers = [], []
        for shape in shapes:
            print(f"round {i}: {shape}", file=sys.stderr)
            attngen += run_attngen(args.bench, shape, prefix="decode")
            attngen += run_attngen(args.bench, shape, prefix="decode_bf16")
            peers += run_decode_peers(args.torch_python, shape)
        attngen_files.append(os.path.join(args.out_dir, f"attngen_decode_{i}.json"))
        peer_files.append(os.path.join(args.out_dir, f"decode_peers_{i}.json"))
        for name, data in ((attngen_files[-1], {"benchmarks": attngen}), (peer_files[-1], peers)):
            with open(name, "w") as f:
                json.dump(data, f, indent=1)
    subprocess.run([args.torch_python, os.path.join(HERE, "bench_decode_peers.py"),
                    "--load", *peer_files, "--attngen", *attngen_files], check=True)
    print_bf16_decode_ratios(shapes, attngen_files)


def print_bf16_decode_ratios(shapes: list[str], attngen_files: list[str]) -> None:
    """attngen's float32 step over its bfloat16 step (issue 19), both from the same round."""
    from bench_torch import load_gbench_ms

    print("\n| shape | attngen bf16 ms | attngen fp32 / attngen bf16 (per round) |")
    print("|---|---|---|")
    for shape in shapes:
        bf16_ms, ratios = [], []
        for name in attngen_files:
            fp32 = load_gbench_ms(name, "decode/").get(shape)
            bf16 = load_gbench_ms(name, "decode_bf16/").get(shape)
            if fp32 is not None and bf16 is not None:
                bf16_ms.append(bf16)
                ratios.append(fp32 / bf16)
        if ratios:
            print(f"| {shape} | {statistics.median(bf16_ms):.3f} | "
                  f"**{statistics.median(ratios):.2f}x** "
                  f"({', '.join(f'{x:.2f}' for x in ratios)}) |")


def bf16_rounds(args: argparse.Namespace, shapes: list[str]) -> None:
    """The --bf16 rounds and their table: per shape, the median over rounds of attngen bf16's
    time, of the faster torch bf16 over attngen bf16, and of attngen fp32 over attngen bf16."""
    from bench_torch import load_gbench_ms

    ratios: dict[str, dict[str, list[float]]] = {}
    for i in range(1, args.rounds + 1):
        attngen, torch = [], []
        for shape in shapes:
            print(f"round {i}: {shape}", file=sys.stderr)
            attngen += run_attngen(args.bench, shape, prefix="mha_forward_bf16")
            attngen += run_attngen(args.bench, shape, prefix="mha_forward")
            torch += run_torch(args.torch_python, shape, "torch-mha-bf16,torch-sdpa-mha-bf16")
        attngen_file = os.path.join(args.out_dir, f"bf16_attngen_{i}.json")
        with open(attngen_file, "w") as f:
            json.dump({"benchmarks": attngen}, f, indent=1)
        with open(os.path.join(args.out_dir, f"bf16_torch_{i}.json"), "w") as f:
            json.dump(torch, f, indent=1)
        bf16 = load_gbench_ms(attngen_file, "mha_forward_bf16/")
        fp32 = load_gbench_ms(attngen_file, "mha_forward/")
        for shape in shapes:
            peers = [r["ms"] for r in torch if r["shape"] == shape]
            row = ratios.setdefault(shape, {"ms": [], "vs_torch": [], "vs_fp32": [],
                                            "torch_ms": []})
            if shape not in bf16:
                continue
            row["ms"].append(bf16[shape])
            if peers:
                row["torch_ms"].append(min(peers))
                row["vs_torch"].append(min(peers) / bf16[shape])
            if shape in fp32:
                row["vs_fp32"].append(fp32[shape] / bf16[shape])

    def median(values: list[float], fmt: str) -> str:
        return fmt.format(statistics.median(values)) if values else "–"

    print("| shape | attngen bf16 ms | faster torch bf16 ms | torch bf16 / attngen bf16 "
          "(per round) | attngen fp32 / attngen bf16 (per round) |")
    print("|---|---|---|---|---|")
    for shape in shapes:
        r = ratios.get(shape, {})
        per_round = lambda key: ", ".join(f"{x:.2f}" for x in r.get(key, []))
        print(f"| {shape} | {median(r.get('ms', []), '{:.2f}')} | "
              f"{median(r.get('torch_ms', []), '{:.2f}')} | "
              f"**{median(r.get('vs_torch', []), '{:.2f}x')}** ({per_round('vs_torch')}) | "
              f"**{median(r.get('vs_fp32', []), '{:.2f}x')}** ({per_round('vs_fp32')}) |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", default=os.path.join(ROOT, "build/bench/attngen_bench"))
    p.add_argument("--torch-python", default=os.path.join(ROOT, ".venv-torch/bin/python"))
    p.add_argument("--debian-python", default="/usr/bin/python3")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shapes", help="comma-separated (default: every MHA shape, or with "
                   "--decode every decode shape)")
    p.add_argument("--bf16", action="store_true",
                   help="attngen bfloat16 against attngen float32 and torch in bfloat16")
    p.add_argument("--avx2", action="store_true",
                   help="attngen's AVX2 variant (ATTNGEN_CPU_DISPATCH=avx2) against both torch "
                   "forms kept to AVX2 (bench_torch.py --isa avx2); no ONNX Runtime, whose MLAS "
                   "has no such switch")
    p.add_argument("--decode", action="store_true",
                   help="decoding against scripts/bench_decode_peers.py instead of the MHA "
                   "forward against torch")
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    if args.decode:
        decode_shapes = [row[0] for row in read_decode_shapes()]
        decode_rounds(args, args.shapes.split(",") if args.shapes else decode_shapes)
        return
    shapes = args.shapes.split(",") if args.shapes else list(SHAPES)
    if args.bf16:
        bf16_rounds(args, shapes)
        return
    # Debian's torch 1.13 (python3-torch) is an optional third column: without it the rounds
    # still compare attngen with torch 2.15 and ONNX Runtime.
    has_debian_torch = not args.avx2 and subprocess.run(
        [args.debian_python, "-c", "import torch"], capture_output=True).returncode == 0
    if not has_debian_torch:
        print(f"{args.debian_python} has no torch: no torch 1.13 column", file=sys.stderr)
    runs = []
    for i in range(1, args.rounds + 1):
        attngen, torch, debian = [], [], []
        for shape in shapes:
            print(f"round {i}: {shape}", file=sys.stderr)
            if args.avx2:
                attngen += run_attngen(args.bench, shape, dispatch="avx2")
                torch += run_torch(args.torch_python, shape, "torch-mha,torch-sdpa-mha", "avx2")
            else:
                attngen += run_attngen(args.bench, shape)
                torch += run_torch(args.torch_python, shape, None)
            if has_debian_torch:
                debian += run_torch(args.debian_python, shape, "torch-mha")
        names = [os.path.join(args.out_dir, f"{kind}_{i}.json")
                 for kind in ("attngen", "torch", "torch_debian")]
        for name, data in zip(names, ({"benchmarks": attngen}, torch, debian)):
            with open(name, "w") as f:
                json.dump(data, f, indent=1)
        runs += ["--run"] + names
    subprocess.run([sys.executable, os.path.join(HERE, "speedup_runs.py")] + runs, check=True)


if __name__ == "__main__":
    main()
