#!/usr/bin/env python3
"""Plots of attngen's benchmark suite (issue 7), as PNG files.

Inputs: the `--benchmark_format=json` output of build/bench/attngen_bench (full forward as
`mha_forward/<shape>`, baselines as `baseline_<name>/<shape>`, autoscheduler entries whose
series name contains mullapudi / li2018 / adams2019 / autosched, each with a `GFLOP/s`
counter) and the JSON of scripts/bench_torch.py. Either may be left out, and any series or
shape may be missing: the plots show what is there.

Outputs, in --out-dir:
  gflops_by_shape.png       GFLOP/s per shape, one bar per implementation
  scaling_seq_len.png       time and peak memory against sequence length (bert-128, bert-512,
                            gpt2-causal, long-causal, long-single; each point labelled)

    .venv-torch/bin/python scripts/plot_bench.py --attngen bench.json --torch torch.json \
        --out-dir bench/plots
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # no display on the build machine
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

# Shape name -> (query length, whether causal), the shapes of bench/bench_attngen.cpp.
SHAPES: dict[str, tuple[int, bool]] = {
    "tutorial": (10, False),
    "tutorial-cross": (62, False),
    "bert-128": (128, False),
    "bert-512": (512, False),
    "bert-512-b8": (512, False),
    "gpt2-causal": (1024, True),
    "long-causal": (2048, True),
    "long-single": (16384, False),
}
# The single-batch shapes whose sequence lengths form a scaling series; bert-512-b8 and the
# tutorial shapes are left out (batch 8, weights returned).
SCALING_SHAPES = ["bert-128", "bert-512", "gpt2-causal", "long-causal", "long-single"]

# Full-forward series of the Google Benchmark JSON; stage benchmarks (sdpa/, linear/) do
# different work and would not compare.
DEFAULT_SERIES = (r"^(mha_forward|baseline_[^/]*|(kernel/)?[^/]*(mullapudi|li2018|adams2019|autosched)"
                  r"[^/]*)$")

LABELS = {
    "mha_forward": "attngen",
    "baseline_openblas": "OpenBLAS baseline",
    "baseline_naive": "naive loop",
    "kernel/Mullapudi2016": "Halide Mullapudi2016",
    "kernel/Li2018": "Halide Li2018",
    "torch-mha": "PyTorch nn.MultiheadAttention",
    "torch-sdpa-mha": "PyTorch SDPA-MHA",
    "ort-mha": "ONNX Runtime MHA",
}

# Counters that may carry attngen's peak memory, with their factor to MiB. Google Benchmark's
# own memory manager reports max_bytes_used.
MEMORY_FIELDS = {"peak_rss_mb": 1.0, "peak_rss_MiB": 1.0, "peak_MiB": 1.0,
                 "max_bytes_used": 1.0 / (1 << 20)}

_TIME_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


@dataclass
class Point:
    ms: float | None = None
    gflops: float | None = None
    mem_mb: float | None = None


# series -> shape -> Point
Data = dict[str, dict[str, Point]]


def label(series: str) -> str:
    return LABELS.get(series, series)


def split_name(name: str) -> tuple[str, str] | None:
    """`series/.../<shape>/real_time` -> (series, shape); None when no known shape is in it."""
    parts = name.split("/")
    for i, part in enumerate(parts):
        if part in SHAPES:
            return "/".join(parts[:i]), part
    return None


def load_gbench(path: str, series_re: str) -> Data:
    with open(path) as f:
        benchmarks = json.load(f).get("benchmarks", [])
    wanted = re.compile(series_re, re.IGNORECASE)
    runs: dict[tuple[str, str], list[dict]] = {}
    medians: dict[tuple[str, str], dict] = {}
    for b in benchmarks:
        if b.get("error_occurred"):
            continue
        key = split_name(b.get("run_name", b.get("name", "")))
        if key is None or not wanted.search(key[0]):
            continue
        # With --benchmark_repetitions take the median aggregate, else the median of the runs.
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[key] = b
        else:
            runs.setdefault(key, []).append(b)
    data: Data = {}
    for key in set(runs) | set(medians):
        if key in medians:
            chosen = [medians[key]]
        else:
            chosen = runs[key]
        series, shape = key
        data.setdefault(series, {})[shape] = _gbench_point(chosen)
    return data


def _gbench_point(entries: list[dict]) -> Point:
    def med(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    ms = med([float(b["real_time"]) * _TIME_UNIT_MS[b.get("time_unit", "ns")]
              for b in entries if "real_time" in b])
    gflops = med([float(b["GFLOP/s"]) for b in entries if "GFLOP/s" in b])
    mem = None
    for field, factor in MEMORY_FIELDS.items():
        values = [float(b[field]) * factor for b in entries if field in b]
        if values:
            mem = med(values)
            break
    return Point(ms, gflops, mem)


def load_torch(path: str) -> Data:
    with open(path) as f:
        records = json.load(f)
    data: Data = {}
    for r in records:
        if r.get("shape") in SHAPES and r.get("ms") is not None:
            data.setdefault(r["impl"], {})[r["shape"]] = Point(
                r["ms"], r.get("gflops"), r.get("peak_rss_mb"))
    return data


def series_order(data: Data) -> list[str]:
    """attngen first, then the baselines, autoschedulers, then torch and ORT."""
    def rank(s: str) -> tuple[int, str]:
        if s == "mha_forward":
            return 0, s
        if s.startswith("baseline_"):
            return 1, s
        if s.startswith("torch") or s.startswith("ort"):
            return 3, s
        return 2, s
    return sorted(data, key=rank)


def colors(data: Data) -> dict[str, str]:
    """One colour per series, the same in every plot."""
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {s: cycle[i % len(cycle)] for i, s in enumerate(series_order(data))}


def plot_gflops(data: Data, path: str, title: str) -> bool:
    series = [s for s in series_order(data) if any(p.gflops for p in data[s].values())]
    shapes = [sh for sh in SHAPES if any(sh in data[s] for s in series)]
    if not series or not shapes:
        return False
    fig, ax = plt.subplots(figsize=(max(8, 1.4 * len(shapes) + 2), 5))
    width = 0.8 / len(series)
    for i, s in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(shapes))]
        ys = [(data[s].get(sh) or Point()).gflops or 0.0 for sh in shapes]
        ax.bar(xs, ys, width, label=label(s), color=colors(data)[s])
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes, rotation=20, ha="right")
    ax.set_ylabel("GFLOP/s (higher is better)")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    # Outside the axes, so it never hides a bar.
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _scaling_panel(ax: plt.Axes, data: Data, series: list[str], field: str) -> bool:
    """One line per series through the scaling shapes it has."""
    drawn = False
    for s in series:
        pts = [(SHAPES[sh][0], getattr(data[s][sh], field))
               for sh in SCALING_SHAPES if sh in data[s] and getattr(data[s][sh], field)]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", label=label(s), color=colors(data)[s])
        drawn = True
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # The scaling shapes have distinct lengths, so the ticks can name them.
    ax.set_xticks([SHAPES[sh][0] for sh in SCALING_SHAPES])
    ax.set_xticklabels([f"{sh}\n{SHAPES[sh][0]}" for sh in SCALING_SHAPES], fontsize=8)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("sequence length Lq = Lkv (log)")
    ax.grid(alpha=0.3, which="both")
    return drawn


def plot_scaling(data: Data, path: str, title: str) -> bool:
    series = series_order(data)
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(13, 5))
    any_time = _scaling_panel(ax_t, data, series, "ms")
    any_mem = _scaling_panel(ax_m, data, series, "mem_mb")
    if not any_time and not any_mem:
        plt.close(fig)
        return False
    ax_t.set_ylabel("time per forward, ms (log)")
    ax_t.set_title("time")
    ax_m.set_ylabel("peak RSS growth during the forward, MiB (log)")
    ax_m.set_title("memory")
    for ax, drawn in ((ax_t, any_time), (ax_m, any_mem)):
        if drawn:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title + "\nshapes differ in d_model, heads and masking: "
                 "bert d 768/12 heads, gpt2-causal d 768 causal, long-causal d 1024 causal, "
                 "long-single d 64/1 head", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--attngen", help="attngen_bench --benchmark_format=json output")
    p.add_argument("--torch", help="scripts/bench_torch.py JSON output")
    p.add_argument("--out-dir", default="bench/plots", help="where the PNGs go")
    p.add_argument("--series", default=DEFAULT_SERIES,
                   help="regex on the Google Benchmark series name (the part before the "
                   "shape) selecting full-forward series")
    p.add_argument("--title", default="MHA forward, fp32, 2 threads",
                   help="title prefix of the plots")
    args = p.parse_args(argv)
    if not args.attngen and not args.torch:
        p.error("give --attngen and/or --torch")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data: Data = {}
    if args.attngen:
        data.update(load_gbench(args.attngen, args.series))
    if args.torch:
        data.update(load_torch(args.torch))
    if not data:
        print("no benchmark entries at the known shapes in the inputs", file=sys.stderr)
        return 1
    os.makedirs(args.out_dir, exist_ok=True)
    for name, fn in (("gflops_by_shape.png", plot_gflops), ("scaling_seq_len.png", plot_scaling)):
        path = os.path.join(args.out_dir, name)
        if fn(data, path, args.title):
            print(path)
        else:
            print(f"{name}: nothing to plot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
