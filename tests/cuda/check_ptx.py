#!/usr/bin/env python3
"""Checks that a binary carries the CUDA kernels' PTX for the expected compute capability and,
where the CUDA toolkit's ptxas is installed, that the PTX assembles for newer GPUs (the JIT
step the driver performs at run time).

usage: check_ptx.py BINARY --target sm_70 [--assemble-for sm_80 sm_90] [--ptxas PATH]
                    [--require INSTRUCTION ...]

--require: an instruction that some module must use, e.g. cvt.f32.f16, the hardware widening of
float16 weights (generators/layout.h, half_weights_as_bits): without it the kernels widen
float16 in a dozen integer operations per element.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def ptx_modules(data):
    """Every NUL-terminated PTX text embedded in data."""
    modules = []
    for match in re.finditer(rb"\.target sm_\d+", data):
        start = data.rfind(b"\0", 0, match.start()) + 1
        end = data.find(b"\0", match.end())
        text = data[start:end if end >= 0 else len(data)]
        if b".version" in text and b".entry" in text:
            modules.append(text)
    return modules


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--target", required=True, help="the .target the PTX must name")
    parser.add_argument("--assemble-for", nargs="*", default=[])
    parser.add_argument("--ptxas", default="")
    parser.add_argument("--require", nargs="*", default=[])
    args = parser.parse_args()

    with open(args.binary, "rb") as f:
        modules = ptx_modules(f.read())
    if not modules:
        print(f"FAIL: no PTX module in {args.binary}")
        return 1
    print(f"{len(modules)} PTX module(s) in {args.binary}")
    failures = 0
    for instruction in args.require:
        users = sum(1 for ptx in modules if re.search(rb"\b" + re.escape(instruction.encode()) +
                                                      rb"\s", ptx))
        print(f"{instruction}: used in {users} module(s)")
        if not users:
            print(f"FAIL: no module uses {instruction}")
            failures += 1
    for index, ptx in enumerate(modules):
        targets = set(re.findall(rb"\.target (sm_\d+)", ptx))
        entries = re.findall(rb"\.entry (\w+)", ptx)
        print(f"module {index}: targets {sorted(t.decode() for t in targets)}, "
              f"{len(entries)} kernels")
        if targets != {args.target.encode()}:
            print(f"FAIL: module {index} is not PTX for {args.target}")
            failures += 1
        if not args.assemble_for:
            continue
        if not args.ptxas or not os.path.exists(args.ptxas):
            print("ptxas not found: PTX not assembled (install the CUDA toolkit to check that)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "module.ptx")
            with open(source, "wb") as f:
                f.write(ptx)
            for arch in args.assemble_for:
                result = subprocess.run(
                    [args.ptxas, "-v", f"-arch={arch}", source, "-o", os.path.join(tmp, "m.cubin")],
                    capture_output=True, text=True)
                spills = re.findall(r"(\d+) bytes spill stores", result.stderr)
                registers = [int(r) for r in re.findall(r"Used (\d+) registers", result.stderr)]
                if result.returncode != 0:
                    print(f"FAIL: ptxas -arch={arch} on module {index}:\n{result.stderr}")
                    failures += 1
                else:
                    print(f"  assembles for {arch}: max {max(registers, default=0)} registers, "
                          f"{sum(int(s) for s in spills)} bytes of spill stores")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
