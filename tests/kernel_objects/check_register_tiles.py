#!/usr/bin/env python3
"""Checks that the AVX512-BF16 kernels' vdpbf16ps register tiles stay in registers.

A register tile's accumulators live in registers from its first step to its last, and the
schedules are written so that LLVM can keep them there: zeros and first terms at constant places
(generators/schedule_cpu_tiles.h, TileCopy), no memset in between (generators/llvm_options.cpp).
When that breaks, nothing fails but speed: LLVM loads the tile from a stack buffer before its
loop and stores it back after, or moves every accumulator to another register at each step, and
the bfloat16 forward lost up to 6% on a Zen 4 (bench/RESULTS.md, session 89).

    check_register_tiles.py LIBRARY.a [--ar PATH] [--objdump PATH]

Reads every member object of LIBRARY.a built for the AVX512-BF16 variant (its name holds
"avx512_zen4"), and finds each innermost loop with at least MIN_TILE_STEPS vdpbf16ps (a tile's
steps). Fails, naming the function, where such a loop moves a zmm register to another or to or
from the stack, where one of the registers its vdpbf16ps accumulate into is loaded from the
stack in the BEFORE_LOOP instructions before it (the tile's start stored there), or where the
AFTER_LOOP instructions after it store one to the stack in a projection's function (the tile's
end copied to its result through a stack buffer, as the projections' direct path did until
session 91; mha_forward_bf16 1.01-1.05x faster without it on a Zen 4; the attention's tiles
write their block buffers, which may live on the stack). Fails too where no such loop is found,
so that the check cannot pass vacuously.
"""
import re
import sys

from kernel_objects import archive_functions, library_arguments, report

MIN_TILE_STEPS = 8
BEFORE_LOOP = 48
AFTER_LOOP = 48
INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
JUMP_BACK = re.compile(r"^([0-9a-f]+) <")
DOT = re.compile(r"%zmm\d+,%zmm\d+,(%zmm\d+)")
REGISTER_MOVE = re.compile(r"^%zmm\d+,%zmm\d+$")
FROM_STACK = re.compile(r"\(%rsp[^)]*\),(%zmm\d+)$")
PROJECTION = re.compile(r"_proj|linear")
TO_STACK = re.compile(r"^(%zmm\d+),[^,]*\(%rsp[^)]*\)$")


def instructions(lines):
    """(address, mnemonic, operands) of each instruction of a function's listing."""
    out = []
    for line in lines:
        match = INSTRUCTION.match(line)
        if match and not match.group(2).startswith("R_"):  # not a relocation's line
            out.append((int(match.group(1), 16), match.group(2), match.group(3)))
    return out


def tile_loops(code):
    """(first, last) indices of the innermost loops that hold a tile's steps."""
    index = {address: i for i, (address, _, _) in enumerate(code)}
    loops = []
    for i, (_, mnemonic, operands) in enumerate(code):
        target = JUMP_BACK.match(operands) if mnemonic.startswith("j") else None
        if target and int(target.group(1), 16) in index and index[int(target.group(1), 16)] <= i:
            loops.append((index[int(target.group(1), 16)], i))
    innermost = [(a, b) for a, b in loops
                 if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]
    return [(a, b) for a, b in innermost
            if sum(code[k][1] == "vdpbf16ps" for k in range(a, b + 1)) >= MIN_TILE_STEPS]


def problems(code, first, last, projection):
    body = code[first:last + 1]
    found = []
    if any(m.startswith("vmov") and REGISTER_MOVE.match(o) for _, m, o in body):
        found.append("moves accumulators between registers at each step")
    if any("%zmm" in o and "(%rsp" in o for _, _, o in body):
        found.append("moves vectors to or from the stack at each step")
    accumulators = {DOT.search(o).group(1) for _, m, o in body if m == "vdpbf16ps"}
    before = code[max(0, first - BEFORE_LOOP):first]
    loaded = {FROM_STACK.search(o).group(1) for _, m, o in before
              if m.startswith("vmov") and FROM_STACK.search(o)}
    if loaded & accumulators:
        found.append(f"loads {len(loaded & accumulators)} of its {len(accumulators)} "
                     "accumulators from the stack before its loop")
    after = code[last + 1:last + 1 + AFTER_LOOP] if projection else []
    stored = {TO_STACK.match(o).group(1) for _, m, o in after
              if m.startswith("vmov") and TO_STACK.match(o)}
    if stored & accumulators:
        found.append(f"stores {len(stored & accumulators)} of its {len(accumulators)} "
                     "accumulators to the stack after its loop")
    return found


def main():
    args = library_arguments(__doc__)

    failures, loops, objects = [], 0, set()
    for member, name, lines in archive_functions(args, "avx512_zen4"):
        objects.add(member)
        code = instructions(lines)
        for first, last in tile_loops(code):
            loops += 1
            failures += [f"{member}: {name}: the tile loop at {code[first][0]:x} {problem}"
                         for problem in problems(code, first, last, PROJECTION.search(name))]
    vacuous = (f"{args.library} holds no object built for the AVX512-BF16 variant"
               if not objects else f"no loop of {MIN_TILE_STEPS} or more vdpbf16ps in "
               f"{len(objects)} objects" if not loops else None)
    return report(failures, f"{loops} vdpbf16ps tile loops in {len(objects)} objects, "
                  f"{len(failures)} problems", vacuous)


if __name__ == "__main__":
    sys.exit(main())
