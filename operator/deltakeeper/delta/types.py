"""Delta schema types as Arrow types, and the typed columns a checkpoint can carry.

Unless a table sets `delta.checkpoint.writeStatsAsStruct=false`, a checkpoint's `add` struct holds
`partitionValues_parsed` and `stats_parsed` next to the `partitionValues` map and the `stats`
JSON string. This module builds both from those raw columns. Neither function raises on bad
data: a value that does not parse becomes null, and the raw columns stay as they are, so
nothing a reader could still use is lost.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from deltakeeper.delta import native_stats
from deltakeeper.delta.errors import CorruptLogError, UnsupportedProtocolError

DeltaType = str | dict[str, Any]

PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "int": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
}

VARIANT = pa.struct([("value", pa.binary()), ("metadata", pa.binary())])

# Types Delta keeps min/max statistics for (Spark's SkippingEligibleDataType; delta-rs agrees).
# Boolean and binary get a nullCount only.
MIN_MAX_TYPES = {
    "byte",
    "short",
    "integer",
    "int",
    "long",
    "float",
    "double",
    "date",
    "timestamp",
    "timestamp_ntz",
    "string",
}

PHYSICAL_NAME = "delta.columnMapping.physicalName"
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")


# ---------------------------------------------------------------------------- types and schemas


def arrow_type(delta_type: DeltaType) -> pa.DataType:
    """The Arrow type a checkpoint uses for a Delta schema type (logical field names)."""
    return _arrow_type(delta_type, physical=False)


def physical_schema(schema_string: str, column_mapping_mode: str | None) -> pa.Schema:
    """The table schema with physical names at every level when column mapping is on."""
    physical = mapping_on(column_mapping_mode)
    return pa.schema([_arrow_field(f, physical) for f in schema_fields(schema_string)])


def mapping_on(column_mapping_mode: str | None) -> bool:
    return (column_mapping_mode or "none").strip().lower() in ("name", "id")


def schema_fields(schema_string: str) -> list[dict[str, Any]]:
    """The top-level struct fields of a Delta schema string."""
    try:
        schema = json.loads(schema_string)
    except ValueError as e:
        raise CorruptLogError(f"schemaString is not JSON: {e}") from e
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        raise CorruptLogError("schemaString is not a struct with fields")
    return list(schema["fields"])


def field_name(field: dict[str, Any], physical: bool) -> str:
    """A struct field's physical name when asked for and present, else its name."""
    if physical:
        name = (field.get("metadata") or {}).get(PHYSICAL_NAME)
        if isinstance(name, str) and name:
            return name
    return str(field["name"])


def _arrow_field(field: dict[str, Any], physical: bool) -> pa.Field:
    t = _arrow_type(field["type"], physical)
    return pa.field(field_name(field, physical), t, nullable=bool(field.get("nullable", True)))


def _arrow_type(delta_type: DeltaType, physical: bool) -> pa.DataType:
    if isinstance(delta_type, str):
        return _primitive(delta_type)
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct([_arrow_field(f, physical) for f in delta_type.get("fields", [])])
    if kind == "array":
        element = _arrow_type(delta_type["elementType"], physical)
        nullable = bool(delta_type.get("containsNull", True))
        return pa.list_(pa.field("element", element, nullable=nullable))
    if kind == "map":
        key = _arrow_type(delta_type["keyType"], physical)
        value = _arrow_type(delta_type["valueType"], physical)
        nullable = bool(delta_type.get("valueContainsNull", True))
        return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value, nullable))
    if isinstance(kind, str):
        return _primitive(kind)
    raise UnsupportedProtocolError(f"unknown Delta type {delta_type!r}")


def _primitive(name: str) -> pa.DataType:
    if name in PRIMITIVES:
        return PRIMITIVES[name]
    if name == "variant":
        return VARIANT
    if name == "decimal":
        return pa.decimal128(10, 0)
    m = _DECIMAL.fullmatch(name)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise UnsupportedProtocolError(f"unknown Delta type {name!r}")


# ---------------------------------------------------------------------------- value parsers


def parse_int(text: str, bits: int) -> int | None:
    s = text.strip()
    if not re.fullmatch(r"[+-]?\d+", s):
        return None
    v = int(s)
    return v if -(1 << (bits - 1)) <= v < (1 << (bits - 1)) else None


def parse_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_bool(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text.strip().lower())


def parse_date(text: str) -> dt.date | None:
    m = re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", text.strip())
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def parse_timestamp(text: str) -> dt.datetime | None:
    """`YYYY-MM-DD HH:MM:SS[.ffffff]` (read as UTC) or ISO-8601 with an offset, as naive UTC."""
    try:
        v = dt.datetime.fromisoformat(text.strip())
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):  # OverflowError: beyond year 1..9999 in UTC
        return None
    return v


def parse_decimal(value: str | Decimal | int, precision: int, scale: int) -> Decimal | None:
    """The value at exactly `scale` digits, or None if that would round or overflow."""
    with localcontext() as ctx:
        ctx.prec = 100
        try:
            v = Decimal(value.strip() if isinstance(value, str) else value)
            if not v.is_finite():
                return None
            q = v.quantize(Decimal(1).scaleb(-scale))
        except InvalidOperation:
            return None
        if q != v or abs(q) >= Decimal(10) ** (precision - scale):
            return None
    return q


def text_parser(t: pa.DataType) -> Callable[[str], Any] | None:
    """A str -> value parser for one Arrow type, None for types text cannot hold."""
    if pa.types.is_integer(t):
        return lambda s: parse_int(s, t.bit_width)
    if pa.types.is_floating(t):
        return parse_float
    if pa.types.is_boolean(t):
        return parse_bool
    if pa.types.is_date32(t):
        return parse_date
    if pa.types.is_timestamp(t):
        return parse_timestamp
    if pa.types.is_decimal(t):
        return lambda s: parse_decimal(s, t.precision, t.scale)
    return None


# ---------------------------------------------------------------------------- partition values


def partition_values_parsed(
    partition_values: pa.Array | pa.ChunkedArray,
    schema_string: str,
    partition_columns: Sequence[str],
    column_mapping_mode: str | None,
) -> pa.StructArray:
    """`partitionValues_parsed`: one typed field per partition column, in partition order.

    `partition_values` is the `partitionValues` map<string,string> column. Under column mapping
    its keys and the struct's field names are physical names. Per the spec an empty string or a
    missing/null value is null. Timestamps without an offset are read as UTC. A value that does
    not parse as its column's type (a bad number, date, decimal that would round, ...) becomes
    null; this never raises on data. Types a partition column cannot have become all-null.
    """
    values = _combined(partition_values)
    physical = mapping_on(column_mapping_mode)
    by_name = {str(f["name"]): f for f in schema_fields(schema_string)}
    by_lower = {k.lower(): f for k, f in by_name.items()}
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for column in partition_columns:
        field = by_name.get(column) or by_lower.get(column.lower())
        name = field_name(field, physical) if field else column
        t = _arrow_type(field["type"], physical) if field else pa.string()
        arrays.append(parse_text_column(map_values(values, name), t))
        fields.append(pa.field(name, t))
    if not fields:
        return pa.Array.from_buffers(pa.struct([]), len(values), [None])
    return pa.StructArray.from_arrays(arrays, fields=fields)


def map_values(maps: pa.MapArray | pa.ChunkedArray, key: str) -> pa.Array:
    """The value under `key` in each map (null where absent), as `pc.map_lookup` gives it.

    `map_lookup` costs about a second per million rows; partition values nearly always hold
    each key exactly once per row, which a vectorised key match and one filter answer in
    milliseconds. Anything else (null maps, a key missing or repeated) takes `map_lookup`."""
    maps = _combined(maps)
    n = len(maps)
    offsets = maps.offsets  # absolute into the children, also on a slice
    start, end = offsets[0].as_py(), offsets[n].as_py()
    hit = pc.equal(maps.keys.slice(start, end - start), key)
    at = pc.indices_nonzero(hit)
    if n == 0 or maps.null_count or len(at) != n or not _one_per_row(at, offsets, start):
        return pc.map_lookup(maps, pa.scalar(key), "first")
    return maps.items.slice(start, end - start).filter(hit)


def _one_per_row(at: pa.Array, offsets: pa.Array, start: int) -> bool:
    """Whether the i-th match lies inside row i, for `len(at)` rows."""
    at = pc.add(pc.cast(at, pa.int64()), start)
    lo = pc.cast(offsets.slice(0, len(at)), pa.int64())
    hi = pc.cast(offsets.slice(1, len(at)), pa.int64())
    inside = pc.and_(pc.greater_equal(at, lo), pc.less(at, hi))
    return bool(pc.all(inside).as_py())


def parse_text_column(raw: pa.Array, t: pa.DataType) -> pa.Array:
    """Strings to `t`; empty and unparsable strings become null."""
    raw = pc.if_else(pc.equal(raw, ""), pa.scalar(None, pa.string()), raw)
    if pa.types.is_string(t):
        return raw
    if pa.types.is_binary(t):
        return pc.cast(raw, t)
    parse = text_parser(t)
    if parse is None:
        return pa.nulls(len(raw), t)
    # Partition values repeat: parse each distinct string once, then spread by index.
    encoded = raw.dictionary_encode()
    distinct = [parse(s) for s in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(distinct, t), encoded.indices)


def _combined(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks() if array.num_chunks else pa.array([], array.type)
    return array


# ---------------------------------------------------------------------------- stats


def stats_type(
    schema_string: str,
    column_mapping_mode: str | None,
    partition_columns: Sequence[str] = (),
) -> pa.StructType:
    """The `stats_parsed` struct for a table: numRecords, minValues, maxValues, nullCount,
    tightBounds, with physical names under column mapping.

    Partition columns have no stats. minValues/maxValues hold the types Delta keeps bounds for
    (numbers, dates, timestamps, strings, decimals; struct fields recurse); boolean, binary,
    array, map and variant columns get a nullCount only. void columns get nothing, and a struct
    left with no fields is dropped, as are minValues/maxValues/nullCount when empty.
    """
    physical = mapping_on(column_mapping_mode)
    skip = {c.lower() for c in partition_columns}
    data = [f for f in schema_fields(schema_string) if str(f["name"]).lower() not in skip]
    bounds = _struct_of(data, physical, _bound_type)
    counts = _struct_of(data, physical, _count_type)
    fields = [pa.field("numRecords", pa.int64())]
    if bounds is not None:
        fields += [pa.field("minValues", bounds), pa.field("maxValues", bounds)]
    if counts is not None:
        fields.append(pa.field("nullCount", counts))
    fields.append(pa.field("tightBounds", pa.bool_()))
    return pa.struct(fields)


LeafRule = Callable[[DeltaType, bool], pa.DataType | None]


def _struct_of(
    fields: Iterable[dict[str, Any]], physical: bool, leaf: LeafRule
) -> pa.StructType | None:
    out = []
    for f in fields:
        t = leaf(f.get("type", ""), physical)
        if t is not None:
            out.append(pa.field(field_name(f, physical), t))
    return pa.struct(out) if out else None


def _bound_type(delta_type: DeltaType, physical: bool) -> pa.DataType | None:
    if isinstance(delta_type, dict):
        if delta_type.get("type") != "struct":
            return None
        return _struct_of(delta_type.get("fields", []), physical, _bound_type)
    if delta_type in MIN_MAX_TYPES or _DECIMAL.fullmatch(delta_type) or delta_type == "decimal":
        return _primitive(delta_type)
    return None


def _count_type(delta_type: DeltaType, physical: bool) -> pa.DataType | None:
    if isinstance(delta_type, dict) and delta_type.get("type") == "struct":
        return _struct_of(delta_type.get("fields", []), physical, _count_type)
    if delta_type == "void":
        return None
    return pa.int64()


def stats_parsed(
    stats: pa.Array | pa.ChunkedArray,
    schema_string: str,
    column_mapping_mode: str | None,
    partition_columns: Sequence[str] = (),
) -> pa.StructArray:
    """`stats_parsed` for the `stats` JSON strings, typed by `stats_type`.

    A null, empty or malformed stats string, or one that is not a JSON object, gives a null
    row. A field whose value does not fit its type (a string where a number belongs, an int
    that overflows, a decimal that would round, a struct where a leaf belongs, ...) is null
    in that row; the rest of the row is kept. Unknown fields are ignored. Never raises on data.

    `coerce_row` is the reference. The native parser (native/) does the rows in bulk and
    leaves the few it cannot reproduce exactly to `coerce_row`. Without it, rows are parsed in
    bulk by Arrow's JSON reader; only blocks it rejects are split until the offending rows are
    found, and those rows alone go through `coerce_row`.
    """
    out_type = stats_type(schema_string, column_mapping_mode, partition_columns)
    text = _combined(stats)
    if len(text) == 0:
        return pa.array([], out_type)
    text = pc.cast(text, pa.large_string())
    native = native_stats.parse(text, out_type)
    if native is not None:
        return _with_python_rows(text, *native)
    return _arrow_parsed(text, out_type)


def _with_python_rows(text: pa.Array, rows: pa.StructArray, unhandled: list[int]) -> pa.Array:
    """The native parser's rows with those it left to Python parsed by `coerce_rows`, and
    null stats strings as null rows."""
    n = len(rows)
    if unhandled:
        raw = pc.cast(text.take(pa.array(unhandled, pa.int64())), pa.large_binary())
        lines = [None if b is None else b.decode("utf-8", "replace") for b in raw.to_pylist()]
        extra = coerce_rows(lines, rows.type)
        positions = pa.array(range(n), pa.int64())
        at = pc.is_in(positions, value_set=pa.array(unhandled, pa.int64()))
        index = pc.replace_with_mask(positions, at, pa.array(range(n, n + len(unhandled))))
        rows = pa.concat_arrays([rows, extra]).take(index)
    if text.null_count == 0:
        return rows
    keep = pc.and_(pc.is_valid(text), pc.is_valid(rows))
    return pa.StructArray.from_arrays(rows.flatten(), fields=list(rows.type), mask=pc.invert(keep))


def _arrow_parsed(text: pa.Array, out_type: pa.StructType) -> pa.StructArray:
    """`stats_parsed` by Arrow's JSON reader, for when the native parser is not there."""
    valid = _maybe_objects(text)
    # Raw newlines in valid JSON can only be whitespace between tokens, so blank them out.
    for newline in ("\n", "\r"):
        if _may_contain(text, newline):
            text = pc.replace_substring(text, newline, " ")
    lines = _lines(text, valid)
    reader = _BlockReader(lines, out_type)
    parts: list[pa.Array] = []
    for lo in range(0, len(lines), BLOCK_ROWS):
        reader.parse(lo, min(lo + BLOCK_ROWS, len(lines)), parts)
    rows = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
    keep = pc.and_(valid, pc.is_valid(rows))
    return pa.StructArray.from_arrays(rows.flatten(), fields=list(out_type), mask=pc.invert(keep))


def _maybe_objects(text: pa.Array) -> pa.Array:
    """Which rows may hold a JSON object: `{...}` around optional whitespace. A truncated row,
    the common kind of bad stats, fails here and never reaches the bulk reader, whose failures
    cost a re-read each; the rare rest is found by the reader. Most rows are `{...}` exactly,
    a cheap test; only the others go through the regex (RE2)."""
    exact = pc.fill_null(pc.and_(pc.starts_with(text, "{"), pc.ends_with(text, "}")), False)
    others = pc.invert(exact)
    if not pc.any(others).as_py():
        return exact
    padded = pc.match_substring_regex(text.filter(others), r"^\s*\{(?s:.*)\}\s*$")
    return pc.replace_with_mask(exact, others, pc.fill_null(padded, False))


def _may_contain(text: pa.Array, needle: str) -> bool:
    """Whether any row of a large_string array contains the byte `needle`: one scan of the
    rows' bytes in the value buffer, far cheaper than a substring match per row. Only the rows'
    own range is read: a slice (a checkpoint batch) shares its parent's whole buffer."""
    data = text.buffers()[2]
    if data is None or len(text) == 0:
        return False
    offsets = pa.Array.from_buffers(
        pa.int64(), len(text) + 1, [None, text.buffers()[1]], offset=text.offset
    )
    lo, hi = offsets[0].as_py(), offsets[len(text)].as_py()
    return _contains_byte(data, lo, hi, needle.encode())


def _contains_byte(data: pa.Buffer, lo: int, hi: int, needle: bytes) -> bool:
    # memchr reads the buffer in place; copying it out for bytes.find took most of the time
    # of this check (0.4 s per 1,000,000 stats strings), with the GIL held.
    if _MEMCHR is not None and hi > lo:
        return _MEMCHR(data.address + lo, needle[0], hi - lo) is not None
    return bytes(memoryview(data)[lo:hi]).find(needle) >= 0


def _libc_memchr() -> Any:
    try:
        memchr = ctypes.CDLL(None).memchr
    except (OSError, AttributeError):  # no C library to load by name (Windows)
        return None
    memchr.restype = ctypes.c_void_p
    memchr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    return memchr


_MEMCHR = _libc_memchr()


def _lines(text: pa.Array, valid: pa.Array) -> pa.Array:
    """The rows joined into one newline-terminated buffer, `{}` standing in for invalid ones."""
    empty, newline = pa.scalar("", pa.large_string()), pa.scalar("\n", pa.large_string())
    if not pc.all(pc.or_(valid, pc.is_null(text))).as_py():
        text = pc.if_else(valid, text, pa.scalar(None, pa.large_string()))
    return pc.binary_join_element_wise(
        text, newline, empty, null_handling="replace", null_replacement="{}"
    )


# Rows per Arrow JSON read. A block that fails (a value of the wrong type) is re-read after the
# row Arrow names; if it names none, it is split SPLIT ways down to FALLBACK_ROWS rows. Truncated
# rows never reach the reader (`_maybe_objects`), so failures are rare and blocks can be large
# enough (a few MiB) for Arrow's thread pool to pay off.
BLOCK_ROWS = 16384
READ_THREADS = True
SPLIT = 8
FALLBACK_ROWS = 16
_ROW = re.compile(r"in row (\d+)")


class _BlockReader:
    """Arrow's JSON reader over slices of one newline-terminated buffer, bisecting failures."""

    def __init__(self, lines: pa.Array, out_type: pa.StructType) -> None:
        self.out_type = out_type
        self.read_schema = pa.schema(list(_read_type(out_type)))
        self.buffer = lines.buffers()[2]
        offsets = pa.Array.from_buffers(
            pa.int64(), len(lines) + 1, [None, lines.buffers()[1]], offset=lines.offset
        )
        self.offsets: list[int] = offsets.to_pylist()
        longest = pc.max(pc.binary_length(lines)).as_py() or 0
        self.read_options = pj.ReadOptions(
            block_size=max(1 << 20, 2 * longest + 1), use_threads=READ_THREADS
        )
        self.parse_options = pj.ParseOptions(
            explicit_schema=self.read_schema, unexpected_field_behavior="ignore"
        )

    def parse(self, lo: int, hi: int, out: list[pa.Array]) -> None:
        """Rows [lo, hi): in bulk; a row Arrow names as bad goes alone through Python."""
        while lo < hi:
            rows, bad = self.read(lo, hi)
            if rows is not None:
                out.append(rows)
                return
            if bad is None or not self._confirmed(lo, bad, hi):
                self.bisect(lo, hi, out, failed=True)
                return
            if bad > lo:
                self.parse_known_good(lo, bad, out)
            out.append(self.fallback(bad, bad + 1))
            lo = bad + 1

    def _confirmed(self, lo: int, bad: int, hi: int) -> bool:
        # The row number in Arrow's message is trusted only if that row alone fails.
        return lo <= bad < hi and self.read(bad, bad + 1)[0] is None

    def parse_known_good(self, lo: int, hi: int, out: list[pa.Array]) -> None:
        rows, _ = self.read(lo, hi)
        if rows is not None:
            out.append(rows)
        else:
            self.bisect(lo, hi, out, failed=True)

    def bisect(self, lo: int, hi: int, out: list[pa.Array], failed: bool = False) -> None:
        rows = None if failed else self.read(lo, hi)[0]
        if rows is not None:
            out.append(rows)
        elif hi - lo <= FALLBACK_ROWS:
            out.append(self.fallback(lo, hi))
        else:
            step = -(-(hi - lo) // SPLIT)
            parts = [(start, min(start + step, hi)) for start in range(lo, hi, step)]
            read = [self.read(a, b)[0] for a, b in parts]
            if all(r is None for r in read):
                # Bad rows everywhere (say a writer's floats in a long column): splitting
                # further would re-read every row at each level; Python takes them all.
                out.append(self.fallback(lo, hi))
                return
            for (a, b), r in zip(parts, read, strict=True):
                if r is not None:
                    out.append(r)
                else:
                    self.bisect(a, b, out, failed=True)

    def read(self, lo: int, hi: int) -> tuple[pa.Array | None, int | None]:
        """The parsed rows, or None and the absolute index of the row Arrow rejected."""
        start, end = self.offsets[lo], self.offsets[hi]
        try:
            table = pj.read_json(
                pa.BufferReader(self.buffer.slice(start, end - start)),
                read_options=self.read_options,
                parse_options=self.parse_options,
            )
            if table.num_rows != hi - lo:  # blank lines or two objects on one line
                return None, None
            rows = table.to_struct_array().combine_chunks()
            return rows.cast(self.out_type, safe=False), None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            m = _ROW.search(str(e))
            return None, (lo + int(m.group(1)) if m else None)

    def fallback(self, lo: int, hi: int) -> pa.Array:
        start, end = self.offsets[lo], self.offsets[hi]
        text = self.buffer.slice(start, end - start).to_pybytes().decode("utf-8", "replace")
        return coerce_rows(text.split("\n")[: hi - lo], self.out_type)


def _read_type(t: pa.DataType) -> pa.DataType:
    """What Arrow's JSON reader is asked for: dates come in as timestamps (it cannot read
    date32 from strings) and are cast back."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _read_type(f.type)) for f in t])
    if pa.types.is_date32(t):
        return pa.timestamp("s")
    return t


def coerce_rows(lines: Sequence[str | None], t: pa.StructType) -> pa.StructArray:
    """Stats JSON strings as an array of `t` by `coerce_row`, the reference semantics; a
    top-level field Arrow still refuses (a string with a lone surrogate) is null in its row."""
    rows = [None if line is None else coerce_row(line, t) for line in lines]
    try:
        return pa.array(rows, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError):
        return pa.array([_checked_row(r, t) for r in rows], t)


def coerce_row(line: str, t: pa.StructType) -> dict[str, Any] | None:
    """One stats JSON string as a row of `t`, fields that do not fit set to None."""
    try:
        value = json.loads(line, parse_float=_json_number)
    except (ValueError, RecursionError):  # RecursionError: nested too deep for the decoder
        return None
    if not isinstance(value, dict):
        return None
    row: dict[str, Any] = coerce(value, t)
    return row


def _json_number(text: str) -> Decimal | float:
    """A JSON number with a fraction or an exponent, exactly; one whose exponent is beyond
    what Decimal holds (1e2345678901234567890) as a float, infinity or zero, as the native
    parser reads it (such a number fits no integer or decimal field)."""
    try:
        return Decimal(text)
    except InvalidOperation:
        return float(text)


def _checked_row(row: dict[str, Any] | None, t: pa.StructType) -> dict[str, Any] | None:
    """The row with any top-level field Arrow still refuses (a lone surrogate) nulled."""
    if row is None:
        return None
    return {f.name: _checked(row.get(f.name), f.type) for f in t}


def _checked(value: Any, t: pa.DataType) -> Any:
    try:
        pa.array([value], t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError):
        return None
    return value


def coerce(value: Any, t: pa.DataType) -> Any:
    """A decoded JSON value as a Python value of Arrow type `t`, or None if it does not fit."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            return None
        return {f.name: coerce(value.get(f.name), f.type) for f in t}
    if pa.types.is_boolean(t):
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if pa.types.is_integer(t):
        return _coerce_int(value, t.bit_width)
    if pa.types.is_floating(t):
        return _coerce_float(value)
    if pa.types.is_decimal(t):
        if isinstance(value, str | int | Decimal):
            return parse_decimal(value, t.precision, t.scale)
        return None
    if not isinstance(value, str):
        return None
    if pa.types.is_string(t):
        return value
    parse = text_parser(t)
    return parse(value) if parse else None


def _coerce_int(value: Any, bits: int) -> int | None:
    if isinstance(value, int) and -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        return value
    return None


def _coerce_float(value: Any) -> float | None:
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # beyond the float range: infinity, as float(Decimal) gives
            return math.inf if value > 0 else -math.inf
    if isinstance(value, float | Decimal):
        return float(value)
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    return None
