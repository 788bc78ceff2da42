"""A data file's statistics as Delta Spark writes them (`stats/StatisticsCollection.scala`),
built from its Parquet footer, and from the column data only where the footer cannot say.

Which columns: the table's `delta.dataSkippingStatsColumns` when set, else its first
`delta.dataSkippingNumIndexedCols` leaf columns (32; negative: all), partition columns never;
a map or an array counts as one leaf. Each indexed leaf gets a `nullCount`; numbers, dates,
timestamps, strings and decimals get `minValues` and `maxValues` too.

What Delta Spark's statsCollector would write, and how the footer gives it:
- `numRecords`: the row groups' row counts.
- `nullCount`: the footer's null counts (a struct's nulls are counted by its leaves, as Spark's
  `a.b IS NULL` counts them); maps and arrays, which Parquet stores as their elements, are read.
- bounds: the row groups' min and max. Strings keep a prefix of
  `delta.dataSkippingStringPrefixLength` (32) characters: the minimum cut, the maximum cut and
  closed with a tie-breaker (`truncateMaxStringAgg`). Timestamps are written to the millisecond
  in UTC, cut (readers widen the maximum by 1 ms), as Spark's `to_json` writes them.
- float and double bounds from writers other than parquet-mr are dropped, as Delta's
  `skipFloatingPointFromFooter` does: those writers leave NaN out of their footer bounds, so a
  finite maximum may hide a NaN; Spark computing from the data writes NaN there. A non-finite
  bound is dropped too (JSON has no Infinity).
- a column the file lacks: `nullCount` = `numRecords`, no bounds (Spark reads it as nulls).
- a leaf the footer has no statistics for (no min/max, no null count, INT96 timestamps) is
  computed from its column chunks, which the caller bounds (`needs_data` / `data_bytes`).
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.properties import (
    NUM_INDEXED_COLS,
    NUM_INDEXED_COLS_DEFAULT,
    STATS_COLUMNS,
    STRING_PREFIX,
    STRING_PREFIX_DEFAULT,
)
from deltakeeper.delta.types import MIN_MAX_TYPES, field_name, mapping_on, schema_fields

ASCII_MAX = "\u007f"
UTF8_MAX = "\U0010ffff"
_DECIMAL_PREFIX = "decimal"
_EPOCH = dt.datetime(1970, 1, 1)
_UNIT_PER_MS = {"milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}


class UnreadableFileError(InvalidInputError):
    """A data file whose statistics cannot be built (a column of another type than the
    table's): compute-stats lists it as unreadable, by path, and goes on with the others."""


# What a Parquet column may hold, (physical types, logical types), for each bounded Delta type
# (integers and floats as Delta's type widening may have left older files).
_INTEGERS = ({"INT32", "INT64"}, {"NONE", "INT"})
_FITS: dict[str, tuple[set[str], set[str]]] = {
    **dict.fromkeys(("byte", "short", "integer", "int", "long"), _INTEGERS),
    "float": ({"FLOAT"}, {"NONE"}),
    "double": ({"FLOAT", "DOUBLE", "INT32", "INT64"}, {"NONE", "INT"}),
    "date": ({"INT32"}, {"DATE"}),
    "timestamp": ({"INT64"}, {"TIMESTAMP"}),
    "timestamp_ntz": ({"INT64"}, {"TIMESTAMP"}),
    "string": ({"BYTE_ARRAY"}, {"NONE", "STRING", "ENUM", "JSON"}),
}
_DECIMALS = {"INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"}


@dataclass(frozen=True)
class Leaf:
    """One indexed column: its path of physical names and its Delta type."""

    path: tuple[str, ...]
    delta_type: Any  # a type name, or a dict for map/array/struct (a struct with no fields)

    @property
    def bounded(self) -> bool:
        t = self.delta_type
        return isinstance(t, str) and (t in MIN_MAX_TYPES or t.startswith(_DECIMAL_PREFIX))

    @property
    def nested(self) -> bool:
        """A map or an array: Parquet holds its elements, not its nulls."""
        return isinstance(self.delta_type, dict)

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class StatsSpec:
    """What a table's statistics hold: its indexed leaves, in schema order."""

    leaves: tuple[Leaf, ...]
    string_prefix: int = STRING_PREFIX_DEFAULT
    tight_bounds: bool = False  # deletion vectors supported: Spark writes tightBounds

    def complete(self, stats: str | None) -> bool:
        """Whether a file's `stats` JSON has `numRecords` and a `nullCount` for every leaf."""
        if not stats:
            return False
        try:
            doc = orjson.loads(stats)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(doc, dict) or not isinstance(doc.get("numRecords"), int):
            return False
        counts = doc.get("nullCount", {})
        return all(_has_path(counts, leaf.path) for leaf in self.leaves)


def spec_for(
    schema_string: str,
    configuration: Mapping[str, str],
    partition_columns: Sequence[str],
    column_mapping_mode: str | None,
    tight_bounds: bool = False,
    columns: str | None = None,
) -> StatsSpec:
    """The table's statistics spec; `columns` (dataSkippingStatsColumns' syntax) overrides it."""
    skip = {c.lower() for c in partition_columns}
    data = [f for f in schema_fields(schema_string) if str(f["name"]).lower() not in skip]
    named = columns if columns is not None else configuration.get(STATS_COLUMNS)
    if named is not None:
        paths = [[p.lower() for p in c] for c in parse_column_list(named)]
        if columns is not None:  # asked for now: a typo must not commit numRecords alone
            _require_columns(data, paths, partition_columns)
        chosen = _named(data, paths)
    else:
        n = _int_property(configuration, NUM_INDEXED_COLS, NUM_INDEXED_COLS_DEFAULT)
        chosen = data if n < 0 else _first_leaves(data, n)[0]
    physical = mapping_on(column_mapping_mode)
    prefix = _int_property(configuration, STRING_PREFIX, STRING_PREFIX_DEFAULT)
    return StatsSpec(tuple(_leaves(chosen, physical, ())), prefix, tight_bounds)


def _int_property(configuration: Mapping[str, str], key: str, default: int) -> int:
    text = configuration.get(key)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError as e:
        raise InvalidInputError(f"table property {key}: {text!r} is not a whole number") from e


def parse_column_list(text: str) -> list[list[str]]:
    """`a, b.c, `d.e`` as Spark parses a multipart column list: commas and dots split, backticks
    quote (a doubled backtick is one)."""
    columns: list[list[str]] = []
    parts: list[str] = []
    word, quoted, i = "", False, 0
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "`" and text[i + 1 : i + 2] == "`":
                word, i = word + "`", i + 1
            elif ch == "`":
                quoted = False
            else:
                word += ch
        elif ch == "`":
            quoted = True
        elif ch in ",.":
            parts.append(word.strip())
            word = ""
            if ch == ",":
                columns.append(parts)
                parts = []
        else:
            word += ch
        i += 1
    if quoted:
        raise InvalidInputError(f"column list {text!r}: a backtick is not closed")
    parts.append(word.strip())
    columns.append(parts)
    return [c for c in columns if c != [""]]


def _first_leaves(fields: list[dict[str, Any]], n: int) -> tuple[list[dict[str, Any]], int]:
    """The fields holding the first n leaves (Delta's truncateSchema)."""
    out, count = [], 0
    for f in fields:
        if count >= n:
            break
        t = f.get("type")
        if isinstance(t, dict) and t.get("type") == "struct":
            inner, c = _first_leaves(t.get("fields", []), n - count)
            count += c
            out.append({**f, "type": {**t, "fields": inner}})
        else:
            count += 1
            out.append(f)
    return out, count


def _named(fields: list[dict[str, Any]], paths: list[list[str]]) -> list[dict[str, Any]]:
    """The fields the paths name, struct fields recursed (Delta's filterSchema)."""
    out = []
    for f in fields:
        rest = [p[1:] for p in paths if p and p[0] == str(f["name"]).lower()]
        if not rest:
            continue
        t = f.get("type")
        if any(not r for r in rest):
            out.append(f)
        elif isinstance(t, dict) and t.get("type") == "struct":
            out.append({**f, "type": {**t, "fields": _named(t.get("fields", []), rest)}})
    return out


def _require_columns(
    fields: list[dict[str, Any]], paths: list[list[str]], partition_columns: Sequence[str]
) -> None:
    """Refuse column paths that name no data column (or a struct's field) of the table."""
    unknown = [".".join(p) for p in paths if not _resolves(fields, p)]
    if unknown:
        names = ", ".join(str(f["name"]) for f in fields) or "none"
        partitions = f"; partition columns ({', '.join(partition_columns)}) have no statistics"
        raise InvalidInputError(
            f"no column {', '.join(unknown)} in the table's data columns ({names})"
            + (partitions if partition_columns else "")
        )


def _resolves(fields: list[dict[str, Any]], path: list[str]) -> bool:
    for f in fields:
        if str(f["name"]).lower() != path[0]:
            continue
        t = f.get("type")
        if len(path) == 1:
            return True
        if isinstance(t, dict) and t.get("type") == "struct":
            return _resolves(t.get("fields", []), path[1:])
    return False


def _leaves(
    fields: Iterable[dict[str, Any]], physical: bool, parent: tuple[str, ...]
) -> list[Leaf]:
    out = []
    for f in fields:
        path = (*parent, field_name(f, physical))
        t = f.get("type")
        if isinstance(t, dict) and t.get("type") == "struct":
            out += _leaves(t.get("fields", []), physical, path)
        else:
            out.append(Leaf(path, t))
    return out


def _has_path(doc: Any, path: tuple[str, ...]) -> bool:
    for name in path:
        if not isinstance(doc, dict) or name not in doc:
            return False
        doc = doc[name]
    return True


# ---------------------------------------------------------------------------- one file


@dataclass(frozen=True)
class FileStats:
    """A file's statistics, or the column chunks they still need."""

    stats: dict[str, Any] | None  # None: needs_data says what to read
    needs_data: tuple[str, ...] = ()  # top-level physical columns to read
    data_bytes: int = 0  # their compressed size in this file


@dataclass
class _Values:
    """min, max and null count of one leaf; None where unknown."""

    low: Any = None
    high: Any = None
    nulls: int | None = None


def from_footer(spec: StatsSpec, pf: pq.ParquetFile) -> FileStats:
    """Statistics from the footer alone; when a leaf needs its data, what to read instead."""
    md = pf.metadata
    columns = _parquet_columns(md)
    drop_floats = not (md.created_by or "").startswith("parquet-mr")
    values: dict[tuple[str, ...], _Values] = {}
    missing: set[str] = set()
    for leaf in spec.leaves:
        found = _lookup(columns, leaf.dotted)
        if found is not None:
            _check_type(md, found, leaf)
        elif not leaf.nested and _is_group(columns, leaf.dotted):
            # Not absent: a group where the table has a value; "all null" would be false.
            raise UnreadableFileError(
                f"column {leaf.dotted}: the file holds a group (struct, map or list), the "
                f"table's type is {leaf.delta_type}"
            )
        got = None if found is None else _footer_values(md, found, leaf, drop_floats)
        top = _file_top(columns, leaf.path[0])
        if got is None and top is not None and (found is not None or leaf.nested):
            missing.add(top)
        else:
            values[leaf.path] = got or _Values(nulls=md.num_rows)  # absent: all null
    if missing:
        return FileStats(None, tuple(sorted(missing)), _chunk_bytes(md, columns, missing))
    return FileStats(_document(spec, md.num_rows, values))


def from_data(spec: StatsSpec, pf: pq.ParquetFile, footer: FileStats) -> dict[str, Any]:
    """Statistics with the columns `footer` could not give read from their column chunks."""
    md = pf.metadata
    columns = _parquet_columns(md)
    drop_floats = not (md.created_by or "").startswith("parquet-mr")
    table = pf.read(columns=list(footer.needs_data))
    read = {name.lower() for name in footer.needs_data}
    values: dict[tuple[str, ...], _Values] = {}
    for leaf in spec.leaves:
        if leaf.path[0].lower() in read:
            values[leaf.path] = _data_values(table, leaf, md.num_rows)
            continue
        found = _lookup(columns, leaf.dotted)
        got = _footer_values(md, found, leaf, drop_floats) if found is not None else None
        values[leaf.path] = got or _Values(nulls=md.num_rows)
    return _document(spec, md.num_rows, values)


def _check_type(md: pq.FileMetaData, j: int, leaf: Leaf) -> None:
    """Refuse a column the file stores as another type than the table's: its footer bounds
    would be of that type (a long column written as strings would get string bounds)."""
    if not leaf.bounded:
        return
    column = md.schema.column(j)
    physical, logical = column.physical_type, column.logical_type.type
    t = str(leaf.delta_type)
    if t.startswith(_DECIMAL_PREFIX):
        fits = (physical in _DECIMALS and logical == "DECIMAL") or (physical, logical) in {
            ("INT32", "NONE"),
            ("INT64", "NONE"),
            ("INT32", "INT"),
            ("INT64", "INT"),
        }
    elif t in ("timestamp", "timestamp_ntz") and physical == "INT96":
        fits = True  # Spark's legacy timestamps: read from the data
    else:
        physicals, logicals = _FITS[t]
        fits = physical in physicals and logical in logicals
    if not fits:
        held = physical if logical == "NONE" else f"{physical} ({logical.lower()})"
        raise UnreadableFileError(
            f"column {leaf.dotted}: the file holds {held}, the table's type is {t}"
        )


def _is_group(columns: Mapping[str, int], dotted: str) -> bool:
    """Whether the file has columns inside `dotted` (Spark matches names case-blind)."""
    prefix = dotted.lower() + "."
    return any(key.lower().startswith(prefix) for key in columns)


def _file_top(columns: Mapping[str, int], name: str) -> str | None:
    """The file's own spelling of a top-level column (Spark matches names case-blind)."""
    for key in columns:
        top = key.split(".")[0]
        if top.lower() == name.lower():
            return top
    return None


def _parquet_columns(md: pq.FileMetaData) -> dict[str, int]:
    if md.num_row_groups == 0:
        return {md.schema.column(j).path: j for j in range(md.num_columns)}
    rg = md.row_group(0)
    return {rg.column(j).path_in_schema: j for j in range(rg.num_columns)}


def _lookup(columns: Mapping[str, int], dotted: str) -> int | None:
    if dotted in columns:
        return columns[dotted]
    lowered = {k.lower(): v for k, v in columns.items()}  # Spark resolves names case-blind
    return lowered.get(dotted.lower())


def _chunk_bytes(md: pq.FileMetaData, columns: Mapping[str, int], tops: set[str]) -> int:
    wanted = {t.lower() for t in tops}
    total = 0
    for name, j in columns.items():
        if name.split(".")[0].lower() in wanted:
            total += sum(
                md.row_group(r).column(j).total_compressed_size for r in range(md.num_row_groups)
            )
    return total


def _footer_values(md: pq.FileMetaData, j: int, leaf: Leaf, drop_floats: bool) -> _Values | None:
    """A leaf's values from its row groups' statistics; None when they cannot say."""
    nulls, low, high = 0, None, None
    physical = None
    for r in range(md.num_row_groups):
        chunk = md.row_group(r).column(j)
        physical = chunk.physical_type
        st = chunk.statistics
        if st is None or not st.has_null_count:
            return None
        nulls += st.null_count
        if not leaf.bounded or st.null_count == chunk.num_values:
            continue
        if not st.has_min_max or physical == "INT96":
            return None
        lo, hi = _footer_bound(st, leaf), _footer_bound(st, leaf, high=True)
        low = lo if low is None or lo < low else low
        high = hi if high is None or hi > high else high
    if physical in ("FLOAT", "DOUBLE") and drop_floats:
        low = high = None
    return _Values(low, high, nulls)


def _footer_bound(st: Any, leaf: Leaf, high: bool = False) -> Any:
    """A footer bound in the form _json_bound takes: timestamps as (raw, unit)."""
    if leaf.delta_type in ("timestamp", "timestamp_ntz"):
        unit = orjson.loads(st.logical_type.to_json()).get("timeUnit")
        if unit not in _UNIT_PER_MS:
            raise UnreadableFileError(f"column {leaf.dotted}: timestamps in {unit!r}")
        return _Stamp(st.max_raw if high else st.min_raw, unit)
    value = st.max if high else st.min
    return value.decode("utf-8") if isinstance(value, bytes) else value


@dataclass(frozen=True, order=True)
class _Stamp:
    raw: int
    unit: str


def _data_values(table: pa.Table, leaf: Leaf, rows: int) -> _Values:
    column = _column_at(table, leaf.path)
    if column is None:
        return _Values(nulls=rows)
    nulls = column.null_count
    if not leaf.bounded or nulls == len(column):
        return _Values(nulls=nulls)
    t = column.type
    if pa.types.is_floating(t):  # the data shows NaN: Spark's max would be NaN, so none
        has_nan = pc.any(pc.is_nan(column)).as_py()
        bounds = pc.min_max(column)
        high = None if has_nan else bounds["max"].as_py()
        return _Values(bounds["min"].as_py(), high, nulls)
    if pa.types.is_timestamp(t):
        if t.unit == "s":
            raise UnreadableFileError(f"column {leaf.dotted}: timestamps in seconds")
        unit = {"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}[t.unit]
        bounds = pc.min_max(column.cast(pa.int64()))
        low, high = (_Stamp(bounds[k].as_py(), unit) for k in ("min", "max"))
        return _Values(low, high, nulls)
    bounds = pc.min_max(column)
    return _Values(bounds["min"].as_py(), bounds["max"].as_py(), nulls)


def _column_at(table: pa.Table, path: tuple[str, ...]) -> pa.Array | None:
    names = {n.lower(): n for n in table.column_names}
    top = names.get(path[0].lower())
    if top is None:
        return None
    array = table.column(top).combine_chunks()
    for name in path[1:]:
        if not pa.types.is_struct(array.type):
            return None
        index = {array.type.field(i).name.lower(): i for i in range(array.type.num_fields)}
        if name.lower() not in index:
            return None
        array = array.flatten()[index[name.lower()]]  # flatten carries the struct's nulls
    return array


# ---------------------------------------------------------------------------- the document


def _document(
    spec: StatsSpec, rows: int, values: Mapping[tuple[str, ...], _Values]
) -> dict[str, Any]:
    """The stats object, keys in Delta Spark's order."""
    doc: dict[str, Any] = {"numRecords": rows}
    bounded = [leaf for leaf in spec.leaves if leaf.bounded]
    if bounded:
        low: dict[str, Any] = {}
        high: dict[str, Any] = {}
        for leaf in bounded:
            v = values[leaf.path]
            _put(low, leaf.path, _json_bound(v.low, leaf, spec.string_prefix, False))
            _put(high, leaf.path, _json_bound(v.high, leaf, spec.string_prefix, True))
        doc["minValues"], doc["maxValues"] = low, high
    if spec.leaves:
        counts: dict[str, Any] = {}
        for leaf in spec.leaves:
            _put(counts, leaf.path, values[leaf.path].nulls)
        doc["nullCount"] = counts
    if spec.tight_bounds:
        doc["tightBounds"] = True
    return doc


def _put(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set a nested value; the parents exist even when the value is unknown (Spark writes an
    all-null struct as {})."""
    for name in path[:-1]:
        doc = doc.setdefault(name, {})
    if value is not None:
        doc[path[-1]] = value


def _json_bound(value: Any, leaf: Leaf, prefix: int, high: bool) -> Any:
    if value is None:
        return None
    t = leaf.delta_type
    if isinstance(value, _Stamp):
        return _timestamp(value, utc=t == "timestamp")
    if isinstance(value, str):
        return truncate_max(value, prefix) if high else truncate_min(value, prefix)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return _Float32(value) if t == "float" else value
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int | bool):
        return value
    raise UnreadableFileError(f"column {leaf.dotted}: a {type(value).__name__} bound")


def _timestamp(stamp: _Stamp, utc: bool) -> str:
    """To the millisecond, cut toward the past, as Spark's to_json writes it."""
    ms = stamp.raw // _UNIT_PER_MS[stamp.unit]
    at = _EPOCH + dt.timedelta(milliseconds=ms)
    text = at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}"
    return text + "Z" if utc else text


def truncate_min(value: str, prefix: int) -> str | None:
    """The minimum's prefix: `prefix` characters (code points, as Spark's substring counts)."""
    if prefix <= 0:
        return None
    return value[:prefix]


def truncate_max(value: str, prefix: int) -> str | None:
    """Delta's truncateMaxStringAgg, counting in UTF-16 units as Java does: a prefix closed
    with a tie-breaker so that every value of the column stays at or under it; None when no
    prefix of at most twice the length can be closed."""
    units = value.encode("utf-16-le")
    length = len(units) // 2
    if length <= prefix:
        return value
    if prefix <= 0:
        return None

    def unit(i: int) -> int:
        return int.from_bytes(units[2 * i : 2 * i + 2], "little")

    def head(n: int) -> str:
        return units[: 2 * n].decode("utf-16-le", "surrogatepass")

    cut = (
        prefix + 1
        if 0xD800 <= unit(prefix - 1) <= 0xDBFF and 0xDC00 <= unit(prefix) <= 0xDFFF
        else prefix
    )
    while cut <= 2 * prefix:
        if cut >= length:
            return value
        if cut + 1 < length and unit(cut) == 0xDBFF and unit(cut + 1) == 0xDFFF:
            cut += 2
        elif unit(cut) < 0x7F:
            return head(cut) + ASCII_MAX
        else:
            return head(cut) + UTF8_MAX
    return None


class _Float32(float):
    """A float column's bound: written as the shortest text that reads back as the same
    32-bit float, as Java's Float.toString does."""


def _float32_text(x: float) -> str:
    f32 = struct.unpack("f", struct.pack("f", x))[0]
    for digits in range(1, 10):
        text = f"{x:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f32:
            return text
    return repr(x)


def dumps(doc: Any) -> str:
    """JSON with decimals as written (scale kept) and float columns as 32-bit floats."""
    if isinstance(doc, dict):
        return (
            "{" + ",".join(f"{orjson.dumps(k).decode()}:{dumps(v)}" for k, v in doc.items()) + "}"
        )
    if isinstance(doc, bool):
        return "true" if doc else "false"
    if isinstance(doc, _Float32):
        return _float32_text(doc)
    if isinstance(doc, Decimal):
        return str(doc)
    return orjson.dumps(doc).decode()
