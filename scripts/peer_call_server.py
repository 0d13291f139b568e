#!/usr/bin/env python3
"""A peer's call served as bench/call_server.cpp serves attngen's, for scripts/paired_ab.py:
with a peer on one side and attngen on the other, the two alternate request by request,
milliseconds apart, and each pair's ratio is measured under the same load of a shared machine.

    .venv-torch/bin/python scripts/peer_call_server.py <impl> <shape> [bf16]

impl is an MHA peer of bench_torch.py (torch-mha, torch-sdpa-mha, ort-mha; with bf16, the
torch ones with module and inputs in bfloat16) for an MHA shape, or a decoding peer of
bench_decode_peers.py (torch-eager, ort-gqa) for a decode shape. Each is built exactly as those
scripts build it, on their THREADS threads; a decoding peer's step is first checked against the
float64 reference (bench_decode_peers.check_step).

Protocol (call_server.cpp's): "ready" once set up and called once (or "error: <message>" and
exit 1); then each line read holds a count n: one untimed call, then n timed ones, their times
in microseconds on one line (a call that fails: "error: call: <message>" and exit 1); "q" or the
end of input ends it. Before it answers "ready", it also reports on stderr how much CPU time its
threads spent in the 100 ms after a call (a pool that spins after a call would compete with the
other server's request that follows it).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peer_worker import THREAD_ENV, THREADS  # noqa: E402  (standard library only)

# As bench_decode_peers.py's and bench_torch.py's workers run: before NumPy and torch load.
os.environ.update(THREAD_ENV)

MHA_IMPLS = ("torch-mha", "torch-sdpa-mha", "ort-mha")
DECODE_IMPLS = ("torch-eager", "ort-gqa")
# How long after a call its threads' CPU time is sampled (stderr, at set-up).
AFTER_CALL_S = 0.100


def build(impl: str, shape: str, bf16: bool, scope: contextlib.ExitStack) -> Callable[[], Any]:
    """The peer's call, valid while scope is open (torch's inference mode), or raises
    ValueError with the reason it cannot be built."""
    if impl in MHA_IMPLS:
        import bench_torch

        if shape not in bench_torch.SHAPES:
            raise ValueError(f"{impl} serves MHA shapes ({', '.join(bench_torch.SHAPES)}), "
                             f"not {shape!r}")
        if bf16 and impl == "ort-mha":
            raise ValueError("ort-mha has no bfloat16 form in bench_torch.py")
        import torch

        torch.set_num_threads(THREADS)
        torch.set_num_interop_threads(1)
        scope.enter_context(torch.inference_mode())
        return bench_torch.BUILDERS[impl + ("-bf16" if bf16 else "")](bench_torch.SHAPES[shape])
    if impl in DECODE_IMPLS:
        import bench_decode_peers as peers

        if shape not in peers.SHAPES:
            raise ValueError(f"{impl} serves decode shapes ({', '.join(peers.SHAPES)}), "
                             f"not {shape!r}")
        if bf16:
            raise ValueError(f"{impl}: bench_decode_peers.py runs float32 only")
        if impl == "torch-eager":
            import torch

            torch.set_num_threads(THREADS)
            torch.set_num_interop_threads(1)
            scope.enter_context(torch.inference_mode())
        s = peers.SHAPES[shape]
        data = peers.make_data(s)
        step = peers.BUILDERS[impl](s, data)
        peers.check_step(s, impl, data, step)  # raises CheckFailed
        return step
    raise ValueError(f"unknown peer {impl!r}; known: {', '.join(MHA_IMPLS + DECODE_IMPLS)}")


def cpu_seconds_after_call(fn: Callable[[], Any]) -> float:
    fn()
    start = time.process_time()
    time.sleep(AFTER_CALL_S)
    return time.process_time() - start


def main() -> int:
    if len(sys.argv) < 3 or len(sys.argv) > 4 or (len(sys.argv) == 4 and sys.argv[3] != "bf16"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    impl, shape, bf16 = sys.argv[1], sys.argv[2], len(sys.argv) == 4
    with contextlib.ExitStack() as scope:
        return serve(impl, shape, bf16, scope)


def serve(impl: str, shape: str, bf16: bool, scope: contextlib.ExitStack) -> int:
    try:
        fn = build(impl, shape, bf16, scope)
        fn()
        spun = cpu_seconds_after_call(fn)
    except Exception as e:  # noqa: BLE001: any failure is reported through the protocol
        print(f"error: set-up: {type(e).__name__}: {e}", flush=True)
        return 1
    print(f"{impl} {shape}: {spun * 1e3:.1f} ms of CPU time in the {AFTER_CALL_S * 1e3:.0f} ms "
          "after a call", file=sys.stderr, flush=True)
    print("ready", flush=True)
    for line in sys.stdin:
        line = line.strip()
        if line == "q":
            break
        try:
            n = int(line)
        except ValueError:
            n = 0
        if n < 1:
            print(f"error: not a count of calls: {line}", flush=True)
            continue
        times = []
        try:
            fn()
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e6)
        except Exception as e:  # noqa: BLE001: reported through the protocol, as set-up's
            print(f"error: call: {type(e).__name__}: {e}", flush=True)
            return 1
        print(" ".join(f"{t:.1f}" for t in times), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
