#!/usr/bin/env python3
"""Sums `perf annotate --stdio` percentages per innermost loop of one function.

A loop is the address range of a backward jump (target <= the jump's own address); each
instruction counts towards the smallest such range that holds it. Prints the loops with the
most samples first, with their address ranges and instruction counts, so that the loops can be
read back from the same annotate output:

    perf record -e cpu-clock -o perf.data build/bench/attngen_bench --benchmark_filter=...
    perf annotate -i perf.data --stdio -s FUNCTION > f.ann
    scripts/perf_loop_samples.py f.ann [how many loops, 15]
"""
from __future__ import annotations

import re
import sys

LINE = re.compile(r"\s*([0-9.]+)?\s*:\s*([0-9a-f]+):\s*(.*)")
JUMP = re.compile(r"j\w+\s+([0-9a-f]+)")


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = []  # (address, percent, instruction)
    with open(sys.argv[1]) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                rows.append((int(m.group(2), 16), float(m.group(1) or 0.0), m.group(3).strip()))
    loops = []
    for address, _, text in rows:
        m = JUMP.match(text)
        if m and int(m.group(1), 16) <= address:
            loops.append((int(m.group(1), 16), address))
    totals: dict = {}
    for address, percent, _ in rows:
        holding = [loop for loop in loops if loop[0] <= address <= loop[1]]
        key = min(holding, key=lambda loop: loop[1] - loop[0]) if holding else None
        totals[key] = totals.get(key, 0.0) + percent
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    for key, percent in sorted(totals.items(), key=lambda kv: -kv[1])[:limit]:
        if key is None:
            print(f"{percent:6.2f}%  outside loops")
            continue
        count = sum(1 for address, _, _ in rows if key[0] <= address <= key[1])
        print(f"{percent:6.2f}%  {key[0]:x}-{key[1]:x} ({count} instructions)")


if __name__ == "__main__":
    main()
