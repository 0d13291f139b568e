#!/usr/bin/env python3
"""Checks that no function of the AMX kernels calls memcpy or memset.

In a function that uses AMX tiles, LLVM loads the tile configuration again (ldtilecfg) after
every call, and LLVM turns short copy and clear loops into calls to memcpy and memset unless the
generators turn those idioms off (generators/llvm_options.cpp). One such call per query row put
12% of the bfloat16 attention's time on ldtilecfg at bert-512 (bench/RESULTS.md, session 86).

    check_amx_calls.py LIBRARY.a [--ar PATH] [--objdump PATH]

Reads every member object of LIBRARY.a built for an AMX target (its name holds
"sapphirerapids"), splits its disassembly into functions, and fails, naming each, where a
function that uses a tile register also calls memcpy, memset or memmove. Fails too where the
archive has no such object or none of them uses tiles, so that the check cannot pass vacuously.
"""
import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# A call as objdump prints it in a linked file, or as the relocation of an object's call.
CALLS = re.compile(r"(?:\bcall\w*\s.*<|R_X86_64_PLT32\s+)(memcpy|memset|memmove)\b")
TILE = re.compile(r"\b(tdpb\w+|tileloadd\w*|tilestored|tilezero)\b")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")


def functions(disassembly):
    """Yields (name, lines) per function of an objdump -d -r listing."""
    name, lines = None, []
    for line in disassembly.splitlines():
        match = FUNCTION.match(line)
        if match:
            if name is not None:
                yield name, lines
            name, lines = match.group(1), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        yield name, lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library")
    parser.add_argument("--ar", default="ar")
    parser.add_argument("--objdump", default="objdump")
    args = parser.parse_args()

    members = subprocess.run([args.ar, "t", args.library], check=True, capture_output=True,
                             text=True).stdout.split()
    amx = [m for m in members if "sapphirerapids" in m and m.endswith(".o")]
    if not amx:
        print(f"FAIL: {args.library} holds no object built for an AMX target")
        return 1
    failures, tiled = [], 0
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([args.ar, "x", str(Path(args.library).resolve())] + amx, cwd=scratch,
                       check=True)
        for member in amx:
            listing = subprocess.run([args.objdump, "-d", "-r", "--no-show-raw-insn",
                                      str(Path(scratch) / member)],
                                     check=True, capture_output=True, text=True).stdout
            for name, lines in functions(listing):
                if not any(TILE.search(line) for line in lines):
                    continue
                tiled += 1
                calls = sorted({m.group(1) for m in map(CALLS.search, lines) if m})
                if calls:
                    failures.append(f"{member}: {name} uses AMX tiles and calls {', '.join(calls)}")
    if tiled == 0:
        print(f"FAIL: no function of {len(amx)} AMX objects uses a tile register")
        return 1
    for failure in failures:
        print("FAIL:", failure)
    print(f"{tiled} functions with AMX tiles in {len(amx)} objects, {len(failures)} calling "
          "memcpy, memset or memmove")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
