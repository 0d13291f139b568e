#!/usr/bin/env python3
"""Why the keys' transposing copy read its tile back element by element: a model of
schedule_transpose (generators/schedule_cpu.cpp, declared in schedule_cpu_tiles.h) in Halide
21's Python bindings, compiled for AVX-512, counting in the assembly the instructions that read
the staged 16 x 16 tile back transposed: shuffles of registers, or element loads (masked
`vbroadcastss` and `vinsertps`).

The source is a plain copy or, chosen at run time, a stand-in for a rotation (as the CPU
forward's keys are with rotary positions), staged per tile through a small buffer that a
specialization simplifies to the copy. Forms:
  - copy only: no rotation branch at all;
  - copy rows unrolled: the copy branch's rows unrolled, the rotation's not (the library before
    this experiment);
  - both unrolled: the rows of both branches unrolled;
  - two sources: the copy a Func of its own that f reads where nothing rotates, its tile
    the same size as the rotation's or (+1 row) the rotation's a row larger.
Halide's code generator gives both branches' tiles one stack block; where one branch stores its
rows at run-time offsets, LLVM keeps that block in memory, and the copy branch's read-back too
becomes element loads. Not built by CMake, not a test:

    .venv/bin/python bench/cpu_experiments/transpose_stack_block.py

bench/RESULTS.md (2026-12-03, "the keys' transposing copy") has what it printed.
"""
import os
import re
import tempfile

import halide as hl

VEC = 16


def compile_form(rotation_branch: bool, unroll_rotation: bool) -> str:
    src = hl.ImageParam(hl.Float(32), 2, "src")  # (d, j): features dense, as the keys' rows
    rotate = hl.Param(hl.Bool(), "rotate")
    d, j, x, y = hl.Var("d"), hl.Var("j"), hl.Var("x"), hl.Var("y")
    source = hl.Func("source")
    partner = src[d + 1 - 2 * (d % 2), j]
    rotated = src[d, j] * hl.cos(hl.f32(j)) + partner * hl.sin(hl.f32(j))
    source[d, j] = hl.select(rotate, rotated, src[d, j]) if rotation_branch else src[d, j]
    f = hl.Func("f")
    f[x, y] = source[y, x]
    xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
    f.split(x, xo, xi, VEC, hl.TailStrategy.RoundUp).split(
        y, yo, yi, VEC, hl.TailStrategy.ShiftInwards).reorder(xi, yi, xo, yo).vectorize(
            xi).unroll(yi)
    staged = source.in_(f)
    a = staged.args()
    staged.compute_at(f, xo).bound_storage(a[0], VEC).bound_storage(a[1], VEC)
    staged.vectorize(a[0], VEC, hl.TailStrategy.GuardWithIf)
    if unroll_rotation or not rotation_branch:
        staged.unroll(a[1], VEC, hl.TailStrategy.GuardWithIf)
        if rotation_branch:
            staged.specialize(rotate == False)
    else:
        staged.specialize(rotate == False).unroll(a[1], VEC, hl.TailStrategy.GuardWithIf)
    args = [src, rotate] if rotation_branch else [src]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.s")
        f.compile_to({hl.OutputFileType.assembly: path}, args, "f",
                     hl.Target("x86-64-linux-avx512_skylake-no_runtime"))
        with open(path) as asm:
            return asm.read()


def compile_two_sources(extra_rows: int) -> str:
    """The copy and the rotation as two Funcs of the same values, f reading the copy where
    nothing rotates (a specialization of f), each staged by a stage of its own; the rotation's
    tile extra_rows rows larger. Halide's code generator reuses a freed stack block for an
    allocation of the same size or smaller, so with equal sizes the two still share one."""
    src = hl.ImageParam(hl.Float(32), 2, "src")
    rotate = hl.Param(hl.Bool(), "rotate")
    d, j, x, y = hl.Var("d"), hl.Var("j"), hl.Var("x"), hl.Var("y")
    partner = src[d + 1 - 2 * (d % 2), j]
    rotated = src[d, j] * hl.cos(hl.f32(j)) + partner * hl.sin(hl.f32(j))
    source, copy = hl.Func("source"), hl.Func("copy")
    source[d, j] = hl.select(rotate, rotated, src[d, j])
    copy[d, j] = hl.select(rotate, rotated, src[d, j])
    f = hl.Func("f")
    f[x, y] = hl.select(rotate, source[y, x], copy[y, x])
    xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
    for stage in (f.specialize(rotate == False), f):
        stage.split(x, xo, xi, VEC, hl.TailStrategy.RoundUp).split(
            y, yo, yi, VEC, hl.TailStrategy.ShiftInwards).reorder(xi, yi, xo, yo).vectorize(
                xi).unroll(yi)
    for func, rows in ((copy, VEC), (source, VEC + extra_rows)):
        staged = func.in_(f)
        a = staged.args()
        staged.compute_at(f, xo).bound_storage(a[0], VEC).bound_storage(a[1], rows)
        staged.vectorize(a[0], VEC, hl.TailStrategy.GuardWithIf)
        if func is copy:
            # Computed only in f's branch without rotation: its general case is never built.
            staged.specialize(rotate == False).unroll(a[1], VEC, hl.TailStrategy.GuardWithIf)
            staged.specialize_fail("the copy staged where keys rotate")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.s")
        f.compile_to({hl.OutputFileType.assembly: path}, [src, rotate], "f",
                     hl.Target("x86-64-linux-avx512_skylake-no_runtime"))
        with open(path) as asm:
            return asm.read()


def main() -> None:
    forms = [("copy only", lambda: compile_form(False, False)),
             ("copy rows unrolled", lambda: compile_form(True, False)),
             ("both unrolled", lambda: compile_form(True, True)),
             ("two sources", lambda: compile_two_sources(0)),
             ("two sources, +1 row", lambda: compile_two_sources(1))]
    for name, compile_it in forms:
        asm = compile_it()
        shuffles = len(re.findall(r"\tv(perm|unpck|shuf)", asm))
        element_loads = len(re.findall(r"\tvbroadcastss\t[^\n]*\{%k", asm)) + asm.count(
            "\tvinsertps")
        lines = asm.count("\n")
        print(f"{name:20s} shuffles {shuffles:4d}  element loads {element_loads:4d}  "
              f"assembly lines {lines}")


if __name__ == "__main__":
    main()
