"""The named problem shapes, read from support/named_shapes.def (the one table of them)."""
from __future__ import annotations

import re
from pathlib import Path

DEF_FILE = Path(__file__).resolve().parent.parent / "support" / "named_shapes.def"

_ROW = re.compile(
    r'^SHAPE\("([^"]+)",\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(true|false),\s*(true|false)\)',
    re.MULTILINE,
)


def read_named_shapes(path: Path = DEF_FILE) -> list[tuple]:
    """(name, batch, q_len, kv_len, d_model, heads, causal, weights) per row, in file order."""
    rows = []
    for m in _ROW.finditer(path.read_text()):
        name, *sizes, causal, weights = m.groups()
        rows.append((name, *map(int, sizes), causal == "true", weights == "true"))
    if not rows:
        raise RuntimeError(f"no SHAPE rows in {path}")
    return rows


_DECODE_ROW = re.compile(
    r'^DECODE_SHAPE\("([^"]+)",\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),'
    r'\s*(NONE|HALF|INTERLEAVED),\s*(true|false)\)',
    re.MULTILINE,
)


def read_decode_shapes(path: Path = DEF_FILE) -> list[tuple]:
    """(name, batch, q_len, cache_len, d_model, heads, kv_heads, head_dim, rope, bias) per row."""
    rows = []
    for m in _DECODE_ROW.finditer(path.read_text()):
        name, *sizes, rope, bias = m.groups()
        rows.append((name, *map(int, sizes), rope, bias == "true"))
    return rows
