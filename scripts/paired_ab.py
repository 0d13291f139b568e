#!/usr/bin/env python3
"""Two builds' calls alternated milliseconds apart: one attngen_call_server from each build
(bench/call_server.cpp) per named shape, requests sent to them in turn (old, new, new, old, ...),
so that both calls of a pair meet the same load on a shared machine. Prints, per shape, each
build's median call, the median of the per-pair ratios old / new (above 1: the new build is
faster), their quartiles, how many pairs the new build won, and the median ratio of each
session (a fresh pair of servers).

    scripts/paired_ab.py OLD/bench/attngen_call_server NEW/bench/attngen_call_server \\
        bert-512,gpt2-decode --pairs 40 [--bf16 | --f16]

Either side may be a peer instead, served by scripts/peer_call_server.py in --torch-python:
`peer:ort-gqa`, `peer:torch-eager` (decode shapes), `peer:ort-mha`, `peer:torch-mha`,
`peer:torch-sdpa-mha` (MHA shapes; with --bf16 the torch ones in bfloat16). With the peer as
OLD, old/new is attngen's speed-up over it:

    scripts/paired_ab.py peer:ort-gqa build/bench/attngen_call_server gpt2-decode

A server may take variables of its own, NAME=VALUE[,NAME=VALUE]@server: with one build on two
CPU variants, old/new is the second variant's speed-up over the first (issue 18's AVX2 variant
against the AVX-512 one, whose FMA peaks are the same on a Zen 4):

    scripts/paired_ab.py ATTNGEN_CPU_DISPATCH=avx2@build/bench/attngen_call_server \\
        ATTNGEN_CPU_DISPATCH=avx512@build/bench/attngen_call_server bert-512

Each request runs the call once untimed (the server's pool may have slept while the other
server ran) and then enough times for about --request-ms; its time is the median of those.
Before each request, both servers' threads must have gone idle: ONNX Runtime's spun for 45-140
ms of CPU time after a call, torch's about 8 ms, attngen's pool 0.2 ms (measured from
/proc/<pid>/task/*/schedstat). A request that gave up waiting (IDLE_TIMEOUT_S) is counted in the
output. Environment variables (ATTNGEN_CPU_DISPATCH, HL_NUM_THREADS, ATEN_CPU_CAPABILITY) reach
both servers.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = "peer:"
# Separates a server from variables set for it alone: ATTNGEN_CPU_DISPATCH=avx2@build/bench/
# attngen_call_server against the same server with avx512 pairs the CPU variants call by call.
ENV_SIDE = "@"
# A server counts as idle once its threads ran less than this fraction of one core in each of
# IDLE_WINDOWS windows of IDLE_WINDOW_S in a row: a spinning thread's schedstat time advances at
# the scheduler's ticks (every 1-10 ms), so one short window could miss it. A request waits at
# most IDLE_TIMEOUT_S for both.
IDLE_WINDOW_S = 0.010
IDLE_WINDOWS = 2
IDLE_CORE_FRACTION = 0.05
IDLE_TIMEOUT_S = 2.0
# How long a server may take to quit once asked.
QUIT_TIMEOUT_S = 10.0


class ServerError(Exception):
    """A server that could not set its call up, or failed a request."""


class Server:
    def __init__(self, spec: str, shape: str, precision: str, torch_python: str):
        env = None
        if spec.startswith(PEER):
            args = [torch_python, os.path.join(HERE, "peer_call_server.py"), spec[len(PEER):]]
        else:
            # NAME=VALUE[,NAME=VALUE]@server: this side's own environment (ENV_SIDE).
            assignments, _, server = spec.rpartition(ENV_SIDE)
            if assignments:
                env = dict(os.environ)
                for assignment in assignments.split(","):
                    name, equals, value = assignment.partition("=")
                    if not equals:
                        raise ServerError(f"{spec}: {assignment!r} is not NAME=VALUE")
                    env[name] = value
            args = [server]
        args += [shape] + ([] if precision == "f32" else [precision])
        self.name = f"{spec} {shape}"
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, bufsize=1, env=env)
        except OSError as e:  # e.g. no .venv-torch
            raise ServerError(f"{self.name}: cannot start {args[0]}: {e}") from e
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.close()
            raise ServerError(f"{self.name}: {line or 'exited without a word'}")

    def cpu_ns(self) -> int:
        """CPU time its threads have run, in ns (0 where /proc has no schedstat)."""
        total = 0
        for path in glob.glob(f"/proc/{self.proc.pid}/task/*/schedstat"):
            try:
                with open(path) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # a thread that ended meanwhile
        return total

    def times_us(self, calls: int) -> list[float]:
        try:
            self.proc.stdin.write(f"{calls}\n")
            line = self.proc.stdout.readline().strip()
        except OSError as e:  # it exited: a broken pipe
            raise ServerError(f"{self.name}: {e}") from e
        if not line or line.startswith("error"):
            raise ServerError(f"{self.name}: {line or 'exited without a word'}")
        return [float(t) for t in line.split()]

    def close(self) -> None:
        """Asks it to quit, and kills it if it does not; never raises."""
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write("q\n")
                self.proc.stdin.flush()
            self.proc.wait(timeout=QUIT_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def wait_until_idle(servers: list[Server]) -> bool:
    """Waits until no server's threads are spinning: True, or False after IDLE_TIMEOUT_S."""
    give_up = time.monotonic() + IDLE_TIMEOUT_S
    quiet = 0
    while time.monotonic() < give_up:
        before = [s.cpu_ns() for s in servers]
        time.sleep(IDLE_WINDOW_S)
        ran = max(s.cpu_ns() - b for s, b in zip(servers, before))
        quiet = quiet + 1 if ran < IDLE_CORE_FRACTION * IDLE_WINDOW_S * 1e9 else 0
        if quiet == IDLE_WINDOWS:
            return True
    return False


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def session(old: str, new: str, shape: str, pairs: int, precision: str, request_ms: float,
            gap_ms: float, torch_python: str) -> tuple[dict[str, list[float]], int, int]:
    """One pair of fresh servers: each side's request times (us), calls per request, and how
    many requests gave up waiting for both servers to be idle."""
    servers = {"old": Server(old, shape, precision, torch_python)}
    busy = 0
    try:
        servers["new"] = Server(new, shape, precision, torch_python)
        first_us = statistics.median(servers["old"].times_us(3))
        calls = max(1, math.ceil(request_ms * 1e3 / first_us))
        times: dict[str, list[float]] = {"old": [], "new": []}
        for p in range(pairs):
            for tag in (("old", "new") if p % 2 == 0 else ("new", "old")):
                time.sleep(gap_ms / 1e3)
                busy += not wait_until_idle(list(servers.values()))
                times[tag].append(statistics.median(servers[tag].times_us(calls)))
    finally:
        for s in servers.values():
            s.close()
    return times, calls, busy


def compare(old: str, new: str, shape: str, pairs: int, sessions: int, precision: str,
            request_ms: float, gap_ms: float, torch_python: str) -> dict:
    """Both sides' median request times (ms) and the per-pair ratios old / new: their median,
    quartiles, wins of the new side and per-session medians. Raises ServerError."""
    times: dict[str, list[float]] = {"old": [], "new": []}
    session_ratios = []
    busy = 0
    for _ in range(sessions):
        t, calls, b = session(old, new, shape, max(1, pairs // sessions), precision, request_ms,
                              gap_ms, torch_python)
        busy += b
        for tag in times:
            times[tag] += t[tag]
        session_ratios.append(statistics.median(o / n for o, n in zip(t["old"], t["new"])))
    ratios = [o / n for o, n in zip(times["old"], times["new"])]
    low, high = quartiles(ratios)
    return {"shape": shape, "precision": precision,
            "old_ms": statistics.median(times["old"]) / 1e3,
            "new_ms": statistics.median(times["new"]) / 1e3, "ratio": statistics.median(ratios),
            "low": low, "high": high, "won": sum(r > 1.0 for r in ratios), "pairs": len(ratios),
            "sessions": session_ratios, "calls": calls, "busy": busy}


def labelled(shape: str, precision: str) -> str:
    return shape + ("" if precision == "f32" else " " + precision)


def describe(r: dict) -> str:
    return (f"{labelled(r['shape'], r['precision']):22s} old {r['old_ms']:9.3f} ms"
            f"  new {r['new_ms']:9.3f} ms  old/new {r['ratio']:.3f}x (quartiles "
            f"{r['low']:.3f}-{r['high']:.3f}; new faster in {r['won']} of {r['pairs']} pairs; "
            f"per session {', '.join(f'{x:.3f}' for x in r['sessions'])}; {r['calls']} calls "
            "per request" + (f"; {r['busy']} requests gave up waiting for idle servers"
                             if r["busy"] else "") + ")")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", help="the old build's attngen_call_server (NAME=VALUE@ before it: "
                               "variables for it alone), or peer:<impl>")
    p.add_argument("new", help="the new build's attngen_call_server, likewise")
    p.add_argument("shapes", help="comma-separated named shapes (MHA or decode)")
    p.add_argument("--pairs", type=int, default=30, help="pairs of requests in all")
    p.add_argument("--sessions", type=int, default=3,
                   help="fresh pairs of servers, the pairs shared among them: one process's "
                        "placement in memory can bias a shape that lives in the shared L3")
    handles = p.add_mutually_exclusive_group()
    handles.add_argument("--bf16", action="store_const", dest="precision", const="bf16",
                         default="f32", help="bfloat16 handles")
    handles.add_argument("--f16", action="store_const", dest="precision", const="f16",
                         help="float16 handles (attngen only: the peers have no float16 form)")
    p.add_argument("--request-ms", type=float, default=20.0,
                   help="about this long per request (at least one call)")
    p.add_argument("--gap-ms", type=float, default=1.0, help="pause before each request")
    p.add_argument("--torch-python",
                   default=os.path.join(HERE, "..", ".venv-torch", "bin", "python"),
                   help="the interpreter of peer:<impl> servers (scripts/setup_torch.sh)")
    args = p.parse_args()
    failed = False
    for shape in args.shapes.split(","):
        try:
            print(describe(compare(args.old, args.new, shape, args.pairs, args.sessions,
                                   args.precision, args.request_ms, args.gap_ms,
                                   args.torch_python)),
                  flush=True)
        except ServerError as e:  # e.g. a peer that cannot run the shape: the others go on
            print(f"{labelled(shape, args.precision):22s} not compared: {e}", flush=True)
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
