#!/usr/bin/env python3
"""Two builds' calls alternated milliseconds apart: one attngen_call_server from each build
(bench/call_server.cpp) per named shape, requests sent to them in turn (old, new, new, old, ...),
so that both calls of a pair meet the same load on a shared machine. Prints, per shape, each
build's median call, the median of the per-pair ratios old / new (above 1: the new build is
faster), their quartiles, how many pairs the new build won, and the median ratio of each
session (a fresh pair of servers).

    scripts/paired_ab.py OLD/bench/attngen_call_server NEW/bench/attngen_call_server \\
        bert-512,gpt2-decode --pairs 40 [--bf16]

Each request runs the call once untimed (the server's pool may have slept while the other
server ran) and then enough times for about --request-ms; its time is the median of those.
Environment variables (ATTNGEN_CPU_DISPATCH, ATTNGEN_NUM_THREADS) reach both servers.
"""
from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time


class Server:
    def __init__(self, path: str, shape: str, bf16: bool):
        args = [path, shape] + (["bf16"] if bf16 else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.close()
            sys.exit(f"{path} {shape}: {line or 'exited without a word'}")

    def times_us(self, calls: int) -> list[float]:
        self.proc.stdin.write(f"{calls}\n")
        line = self.proc.stdout.readline().strip()
        if not line or line.startswith("error"):
            sys.exit(f"server: {line or 'exited without a word'}")
        return [float(t) for t in line.split()]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("q\n")
            self.proc.stdin.flush()
            self.proc.wait()


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def session(old: str, new: str, shape: str, pairs: int, bf16: bool, request_ms: float,
            gap_ms: float) -> tuple[dict[str, list[float]], int]:
    """One pair of fresh servers: each build's request times (us), and calls per request."""
    servers = {"old": Server(old, shape, bf16), "new": Server(new, shape, bf16)}
    try:
        first_us = statistics.median(servers["old"].times_us(3))
        calls = max(1, math.ceil(request_ms * 1e3 / first_us))
        times: dict[str, list[float]] = {"old": [], "new": []}
        for p in range(pairs):
            for tag in (("old", "new") if p % 2 == 0 else ("new", "old")):
                # Longer than the pool's idle spin (runtime/spinning_pool.cpp: 200 us), so the
                # other server's workers are asleep before this one's call starts.
                time.sleep(gap_ms / 1e3)
                times[tag].append(statistics.median(servers[tag].times_us(calls)))
    finally:
        for s in servers.values():
            s.close()
    return times, calls


def compare(old: str, new: str, shape: str, pairs: int, sessions: int, bf16: bool,
            request_ms: float, gap_ms: float) -> None:
    times: dict[str, list[float]] = {"old": [], "new": []}
    session_ratios = []
    for _ in range(sessions):
        t, calls = session(old, new, shape, max(1, pairs // sessions), bf16, request_ms, gap_ms)
        for tag in times:
            times[tag] += t[tag]
        session_ratios.append(statistics.median(o / n for o, n in zip(t["old"], t["new"])))
    ratios = [o / n for o, n in zip(times["old"], times["new"])]
    low, high = quartiles(ratios)
    won = sum(r > 1.0 for r in ratios)
    print(f"{shape + (' bf16' if bf16 else ''):22s} old {statistics.median(times['old']) / 1e3:9.3f} ms"
          f"  new {statistics.median(times['new']) / 1e3:9.3f} ms  old/new "
          f"{statistics.median(ratios):.3f}x (quartiles {low:.3f}-{high:.3f}; new faster in "
          f"{won} of {len(ratios)} pairs; per session "
          f"{', '.join(f'{r:.3f}' for r in session_ratios)}; {calls} calls per request)",
          flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", help="the old build's attngen_call_server")
    p.add_argument("new", help="the new build's attngen_call_server")
    p.add_argument("shapes", help="comma-separated named shapes (MHA or decode)")
    p.add_argument("--pairs", type=int, default=30, help="pairs of requests in all")
    p.add_argument("--sessions", type=int, default=3,
                   help="fresh pairs of servers, the pairs shared among them: one process's "
                        "placement in memory can bias a shape that lives in the shared L3")
    p.add_argument("--bf16", action="store_true", help="bfloat16 handles")
    p.add_argument("--request-ms", type=float, default=20.0,
                   help="about this long per request (at least one call)")
    p.add_argument("--gap-ms", type=float, default=1.0, help="pause before each request")
    args = p.parse_args()
    for shape in args.shapes.split(","):
        compare(args.old, args.new, shape, args.pairs, args.sessions, args.bf16, args.request_ms,
                args.gap_ms)


if __name__ == "__main__":
    main()
