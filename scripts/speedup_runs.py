#!/usr/bin/env python3
"""The speedup table over several runs, each run an attngen_bench JSON, a bench_torch.py JSON
for torch 2.15 and one for Debian's torch 1.13, measured one after the other. On a shared,
noisy machine one run's ratio can be off by half; this prints each run's in-run ratio and
their median, against the faster torch 2.15 form and against the best peer (torch 2.15 or ONNX
Runtime, where ORT runs the shape). A Debian torch file that lacks a shape (torch 1.13 not
installed) leaves its column empty.

    scripts/speedup_runs.py --run attngen_1.json torch_1.json debian_1.json \
                            --run attngen_2.json torch_2.json debian_2.json ...
"""
from __future__ import annotations

import argparse
import json
import statistics

from bench_torch import SHAPES, load_gbench_ms


def load_torch_ms(path: str) -> dict[tuple[str, str], float]:
    with open(path) as f:
        return {(r["shape"], r["impl"]): r["ms"] for r in json.load(f)}


def fmt(ms: float) -> str:
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", nargs=3, action="append", required=True,
                        metavar=("ATTNGEN", "TORCH", "TORCH_DEBIAN"))
    runs = parser.parse_args().run
    columns = {"attngen": [], "torch-mha": [], "torch-sdpa-mha": [], "ort-mha": [],
               "debian": [], "vs torch": [], "vs best peer": [], "vs debian": []}
    rows = {shape: {k: [] for k in columns} for shape in SHAPES}
    for attngen_path, torch_path, debian_path in runs:
        attngen, torch, debian = (load_gbench_ms(attngen_path), load_torch_ms(torch_path),
                                  load_torch_ms(debian_path))
        for shape, row in rows.items():
            if shape not in attngen:
                continue
            ours = attngen[shape]
            row["attngen"].append(ours)
            for impl in ("torch-mha", "torch-sdpa-mha", "ort-mha"):
                if (shape, impl) in torch:
                    row[impl].append(torch[(shape, impl)])
            faster = min(torch[(shape, i)] for i in ("torch-mha", "torch-sdpa-mha"))
            row["vs torch"].append(faster / ours)
            best = min([faster] + ([torch[(shape, "ort-mha")]] if (shape, "ort-mha") in torch
                                   else []))
            row["vs best peer"].append(best / ours)
            if (shape, "torch-mha") in debian:
                row["debian"].append(debian[(shape, "torch-mha")])
                row["vs debian"].append(debian[(shape, "torch-mha")] / ours)
    print("| shape | attngen | torch 2.15 nn.MHA | torch 2.15 SDPA-MHA | ORT MHA "
          "| torch 1.13 nn.MHA | vs faster torch 2.15 (each run) | vs best peer (each run) "
          "| vs torch 1.13 (each run) |")
    print("|---|---|---|---|---|---|---|---|---|")
    best_medians = []
    for shape, row in rows.items():
        if not row["attngen"]:
            continue
        ms = {k: fmt(statistics.median(v)) if v else "–" for k, v in row.items()}
        ratios = {k: f"**{statistics.median(row[k]):.2f}x** (" +
                  ", ".join(f"{x:.2f}" for x in row[k]) + ")" if row[k] else "–"
                  for k in ("vs torch", "vs best peer", "vs debian")}
        best_medians.append(statistics.median(row["vs best peer"]))
        print(f"| {shape} | {ms['attngen']} | {ms['torch-mha']} | {ms['torch-sdpa-mha']} "
              f"| {ms['ort-mha']} | {ms['debian']} | {ratios['vs torch']} "
              f"| {ratios['vs best peer']} | {ratios['vs debian']} |")
    if best_medians:
        print(f"\ngeometric mean of the median ratios against the best peer: "
              f"{statistics.geometric_mean(best_medians):.2f}x over {len(best_medians)} shapes")


if __name__ == "__main__":
    main()
