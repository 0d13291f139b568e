#!/usr/bin/env python3
"""Two attngen_bench binaries (before and after a change) alternated filter by filter, the
order swapped every round, so that both measurements of a round lie seconds apart on this
shared machine. Prints, per benchmark, the medians of each binary's median times and the
median of the per-round ratios old / new (above 1: the new binary is faster).

    scripts/ab_runs.py OLD_BENCH NEW_BENCH '^mha_forward_bf16/bert-512-b8/,^mha_forward/bert-512/' \\
        --rounds 5
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile


def medians_ms(bench: str, benchmark_filter: str) -> dict[str, float]:
    """The median time of each benchmark the filter selects, in ms (3 repetitions)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([bench, f"--benchmark_filter={benchmark_filter}",
                        "--benchmark_min_time=0.3", "--benchmark_repetitions=3",
                        f"--benchmark_out={out.name}", "--benchmark_out_format=json"],
                       check=True, capture_output=True)
        report = json.load(open(out.name))
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    return {b["run_name"]: b["real_time"] * scale[b["time_unit"]]
            for b in report["benchmarks"] if b.get("aggregate_name") == "median"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("filters", help="comma-separated --benchmark_filter values, run in turn")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()

    times: dict[str, dict[str, list[float]]] = {}
    for r in range(args.rounds):
        order = [("old", args.old), ("new", args.new)]
        if r % 2:
            order.reverse()
        for benchmark_filter in args.filters.split(","):
            for tag, bench in order:
                for name, ms in medians_ms(bench, benchmark_filter).items():
                    times.setdefault(name, {}).setdefault(tag, []).append(ms)
    for name, t in sorted(times.items()):
        ratios = [o / n for o, n in zip(t["old"], t["new"])]
        print(f"{name:48s} old {statistics.median(t['old']):9.3f} ms  "
              f"new {statistics.median(t['new']):9.3f} ms  old/new "
              f"{statistics.median(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
