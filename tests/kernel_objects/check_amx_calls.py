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
import sys

from kernel_objects import disassemble_members, functions

# A call as objdump prints it in a linked file, or as the relocation of an object's call.
CALLS = re.compile(r"(?:\bcall\w*\s.*<|R_X86_64_PLT32\s+)(memcpy|memset|memmove)\b")
TILE = re.compile(r"\b(tdpb\w+|tileloadd\w*|tilestored|tilezero)\b")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library")
    parser.add_argument("--ar", default="ar")
    parser.add_argument("--objdump", default="objdump")
    args = parser.parse_args()

    failures, tiled, objects = [], 0, 0
    for member, listing in disassemble_members(args.library, "sapphirerapids", args.ar,
                                               args.objdump):
        objects += 1
        for name, lines in functions(listing):
            if not any(TILE.search(line) for line in lines):
                continue
            tiled += 1
            calls = sorted({m.group(1) for m in map(CALLS.search, lines) if m})
            if calls:
                failures.append(f"{member}: {name} uses AMX tiles and calls {', '.join(calls)}")
    if objects == 0:
        print(f"FAIL: {args.library} holds no object built for an AMX target")
        return 1
    if tiled == 0:
        print(f"FAIL: no function of {objects} AMX objects uses a tile register")
        return 1
    for failure in failures:
        print("FAIL:", failure)
    print(f"{tiled} functions with AMX tiles in {objects} objects, {len(failures)} calling "
          "memcpy, memset or memmove")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
