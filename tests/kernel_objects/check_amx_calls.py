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
import re
import sys

from kernel_objects import archive_functions, library_arguments, report

# A call as objdump prints it in a linked file, or as the relocation of an object's call.
CALLS = re.compile(r"(?:\bcall\w*\s.*<|R_X86_64_PLT32\s+)(memcpy|memset|memmove)\b")
TILE = re.compile(r"\b(tdpb\w+|tileloadd\w*|tilestored|tilezero)\b")


def main():
    args = library_arguments(__doc__)

    failures, tiled, members = [], 0, set()
    for member, name, lines in archive_functions(args, "sapphirerapids"):
        members.add(member)
        if not any(TILE.search(line) for line in lines):
            continue
        tiled += 1
        calls = sorted({m.group(1) for m in map(CALLS.search, lines) if m})
        if calls:
            failures.append(f"{member}: {name} uses AMX tiles and calls {', '.join(calls)}")
    vacuous = (f"{args.library} holds no object built for an AMX target" if not members else
               f"no function of {len(members)} AMX objects uses a tile register" if not tiled else
               None)
    return report(failures, f"{tiled} functions with AMX tiles in {len(members)} objects, "
                  f"{len(failures)} calling memcpy, memset or memmove", vacuous)


if __name__ == "__main__":
    sys.exit(main())
