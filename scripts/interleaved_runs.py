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
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_torch import SHAPES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_attngen(bench: str, shape: str) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([bench, f"--benchmark_filter=^mha_forward/{shape}/",
                        "--benchmark_min_time=0.3", "--benchmark_repetitions=5",
                        f"--benchmark_out={out.name}", "--benchmark_out_format=json"],
                       check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())["benchmarks"]


def run_torch(python: str, shape: str, impls: str | None) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [python, os.path.join(HERE, "bench_torch.py"), "--shapes", shape, "--out", out.name,
               "--max-seconds-per-shape", "3"]
        if impls:
            cmd += ["--impls", impls]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", default=os.path.join(ROOT, "build/bench/attngen_bench"))
    p.add_argument("--torch-python", default=os.path.join(ROOT, ".venv-torch/bin/python"))
    p.add_argument("--debian-python", default="/usr/bin/python3")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shapes", default=",".join(SHAPES))
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    shapes = args.shapes.split(",")
    runs = []
    for i in range(1, args.rounds + 1):
        attngen, torch, debian = [], [], []
        for shape in shapes:
            print(f"round {i}: {shape}", file=sys.stderr)
            attngen += run_attngen(args.bench, shape)
            torch += run_torch(args.torch_python, shape, None)
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
