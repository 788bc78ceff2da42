"""The native stats parser (the Rust extension built from native/) as Arrow arrays.

`parse` hands a large_string array's buffers to `deltakeeper_native.parse_stats`, with Arrow
buffers for it to write the typed columns into, and builds the struct array from them. The
extension parses with the semantics of `types.coerce_row`; rows it cannot reproduce exactly
are returned as "unhandled" for the caller to parse in Python. Without the extension `parse`
returns None and the caller keeps its Arrow JSON path (much slower on many rows), which is
logged once.
DELTAKEEPER_NATIVE=0 in the environment turns the extension off (benchmarks compare both).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)

# Two threads: the machines this runs on have two cores, and the parse is most of a
# checkpoint's CPU time when stats_parsed is written.
THREADS = 2

Spec = list[tuple[str, str, int, int, int]]
# A node's validity, values (none for struct and utf8), null count, utf8 offsets and data.
Column = tuple[pa.Buffer, pa.Buffer | None, int, tuple[bytes, bytes] | None]


# DELTAKEEPER_NATIVE=0: the Arrow path on purpose (to measure or compare it), without a warning.
_TURNED_OFF = os.environ.get("DELTAKEEPER_NATIVE") == "0"


def _load() -> Any:
    if _TURNED_OFF:
        return None
    try:
        return importlib.import_module("deltakeeper_native")
    except ImportError:
        return None


_NATIVE = _load()
_warned = False


def available() -> bool:
    return _NATIVE is not None


def spec(t: pa.DataType, name: str = "") -> Spec | None:
    """`t` in preorder as the extension takes it, None if it holds a type it does not parse."""
    if pa.types.is_struct(t):
        out: Spec = [("struct", name, t.num_fields, 0, 0)]
        for f in t:
            child = spec(f.type, f.name)
            if child is None:
                return None
            out += child
        return out
    if pa.types.is_timestamp(t):
        return [("timestamp_us", name, 0, 0, 0)] if t.unit == "us" else None
    if pa.types.is_decimal(t):
        if t.bit_width != 128:
            return None
        return [("decimal128", name, 0, t.precision, t.scale)]
    kind = _LEAVES.get(t)
    return [(kind, name, 0, 0, 0)] if kind else None


_LEAVES: dict[pa.DataType, str] = {
    pa.bool_(): "bool",
    pa.int8(): "i8",
    pa.int16(): "i16",
    pa.int32(): "i32",
    pa.int64(): "i64",
    pa.float32(): "f32",
    pa.float64(): "f64",
    pa.string(): "utf8",
    pa.date32(): "date32",
}


def parse(text: pa.Array, t: pa.StructType) -> tuple[pa.StructArray, list[int]] | None:
    """The rows of a large_string array as `t`, and the rows left for Python (they are null
    in the array). None without the extension or for a type it does not parse."""
    global _warned
    if _NATIVE is None:
        if not _warned and not _TURNED_OFF:
            log.warning(
                "deltakeeper_native is not installed, so stats_parsed is parsed by the Arrow "
                "JSON path (about 4x slower); make setup builds it where Rust is installed"
            )
            _warned = True
        return None
    shape = spec(t)
    if shape is None:
        return None
    n = len(text)
    offsets, data = text.buffers()[1], text.buffers()[2]
    # The fixed-size buffers are Arrow's, written in place by the parser threads: no copy.
    targets = [
        (pa.allocate_buffer(v), pa.allocate_buffer(x) if x else None)
        for v, x in _NATIVE.buffer_sizes(shape, n)
    ]
    written, unhandled = _NATIVE.parse_stats(
        n,
        offsets.address + 8 * text.offset if offsets is not None else 0,
        data.address if data is not None else 0,
        data.size if data is not None else 0,
        shape,
        [(v.address, v.size, x.address if x else 0, x.size if x else 0) for v, x in targets],
        THREADS,
    )
    columns = (
        (v, x, nulls, strings) for (v, x), (nulls, strings) in zip(targets, written, strict=True)
    )
    return _build(t, n, columns), list(unhandled)


def _build(t: pa.DataType, n: int, columns: Iterator[Column]) -> pa.Array:
    valid, values, nulls, strings = next(columns)
    if pa.types.is_struct(t):
        children = [_build(f.type, n, columns) for f in t]
        return pa.Array.from_buffers(t, n, [valid], null_count=nulls, children=children)
    if pa.types.is_string(t):
        assert strings is not None
        buffers = [valid, pa.py_buffer(strings[0]), pa.py_buffer(strings[1])]
        return pa.Array.from_buffers(t, n, buffers, null_count=nulls)
    return pa.Array.from_buffers(t, n, [valid, values], null_count=nulls)
