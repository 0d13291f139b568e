"""What the peer benchmarks (bench_torch.py, bench_decode_peers.py) share: the threads their
libraries may use, the AVX2 switch, a worker subprocess per (shape, implementation), and a
worker's timed calls with the memory they add and how busy the CPUs were before them.

Standard library only, so that the drivers and call servers may import it before torch and
NumPy load (THREAD_ENV must be in the environment by then).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

THREADS = 2
# The thread pools of OpenMP, MKL and OpenBLAS (NumPy's, which the float64 references run on)
# kept to THREADS, set before torch and NumPy load: OpenBLAS's threads otherwise take every core
# and, spinning, slowed a torch-eager gpt2-decode step from 0.3 to 8 ms.
THREAD_ENV = {var: str(THREADS)
              for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
# Like-for-like with AVX2 kernels on an AVX-512 machine: ATen's own kernels, MKL and oneDNN each
# have their switch (ONNX Runtime's MLAS has none, it stays native).
TORCH_AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                  "ONEDNN_MAX_CPU_ISA": "AVX2"}


# ---------------------------------------------------------------------------------------------
# Memory: read from /proc, because resource.getrusage's ru_maxrss cannot be reset and
# tracemalloc does not see allocations made by torch's C++ allocator.


def proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak_rss() -> bool:
    """Resets VmHWM to the current RSS (Linux >= 4.0); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def cpu_busy_fraction(seconds: float = 0.5) -> float:
    """Fraction of all CPU time spent busy over `seconds` while this process sleeps: the
    work of others. 2-thread OpenMP (torch) slows down by 10x and more when it shares the
    cores, so timings taken while this is high are not worth much."""
    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        return sum(values) - idle, sum(values)

    busy0, total0 = sample()
    time.sleep(seconds)
    busy1, total1 = sample()
    return (busy1 - busy0) / max(1, total1 - total0)


# ---------------------------------------------------------------------------------------------
# The worker: one (shape, implementation) in this process.


def time_calls(fn: Callable[[], Any], min_seconds: float, max_seconds: float,
               min_calls: int = 3) -> list[float]:
    """Seconds per call after warm-up: at least min_calls calls and min_seconds, but stop
    once max_seconds are spent (then possibly fewer calls, at least one): the long shapes
    take seconds per call on 2 cores."""
    warm_start = time.perf_counter()
    fn()  # first call: lazy initialisation, allocator growth, ORT's first-run planning
    first = time.perf_counter() - warm_start
    # A second warm-up call only where calls are cheap.
    if first < max_seconds / 20:
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        spent = time.perf_counter() - start
        if len(times) >= min_calls and spent >= min_seconds:
            break
        if spent >= max_seconds:
            break
    return times


@dataclass
class TimedCalls:
    times: list[float]       # seconds per call (time_calls)
    cpu_busy_before: float   # cpu_busy_fraction just before the calls
    peak_rss_mb: float       # what the calls added to the peak resident set
    process_peak_rss_mb: float

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times) * 1e3


def timed_calls(fn: Callable[[], Any], min_seconds: float, max_seconds: float) -> TimedCalls:
    """time_calls, with how busy the CPUs were before and the memory growth of the calls
    alone: inputs, weights and libraries are resident already, so what the peak adds is the
    calls' own temporaries."""
    busy = cpu_busy_fraction()
    resettable = reset_peak_rss()
    rss_before = proc_status_kib("VmRSS" if resettable else "VmHWM")
    times = time_calls(fn, min_seconds, max_seconds)
    hwm = proc_status_kib("VmHWM")
    return TimedCalls(times, round(busy, 3), max(0, hwm - rss_before) / 1024, hwm / 1024)


# ---------------------------------------------------------------------------------------------
# The driver: one subprocess per (shape, implementation), because the peak resident set only
# grows: one shape's allocations would hide or shape the next one's.


def add_timing_args(p: argparse.ArgumentParser, max_seconds_default: float) -> None:
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="measure at least this long per shape and implementation (default 1)")
    p.add_argument("--max-seconds-per-shape", type=float, default=max_seconds_default,
                   help="stop measuring a shape and implementation after this long, with at "
                   f"least one measured call (default {max_seconds_default:g})")
    p.add_argument("--isa", choices=["native", "avx2"], default="native",
                   help="avx2: keep torch (ATen, MKL, oneDNN) to AVX2 kernels on an AVX-512 "
                   "machine (default native)")


def check_names(p: argparse.ArgumentParser, names: str, known: Any, what: str) -> None:
    """Exits through p.error at the first of the comma-separated names not in known."""
    for name in names.split(","):
        if name not in known:
            p.error(f"unknown {what} {name!r}; known: {', '.join(known)}")


def run_worker_process(script: str, shape: str, impl: str, args: argparse.Namespace,
                       extra: list[str] | None = None) -> subprocess.CompletedProcess:
    """`script --worker impl --shapes shape` with the driver's timing arguments, its threads
    kept to THREADS (and torch to AVX2 under --isa avx2); its stdout captured."""
    env = dict(os.environ, **THREAD_ENV)
    if args.isa == "avx2":
        env.update(TORCH_AVX2_ENV)
    cmd = [sys.executable, os.path.abspath(script), "--worker", impl, "--shapes", shape,
           "--min-seconds", str(args.min_seconds),
           "--max-seconds-per-shape", str(args.max_seconds_per_shape)] + (extra or [])
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)


def warn_if_busy(rec: dict, why: str = "") -> None:
    if rec.get("cpu_busy_before", 0) > 0.2:
        print(f"  warning: the CPUs were {rec['cpu_busy_before']:.0%} busy with other work "
              f"before this measurement{why}", file=sys.stderr)
