"""Which files an expiry removes, read from the snapshot alone.

- The column is a partition column: every file of a partition whose value is older than the
  cutoff (times.py says when a value is). A null partition value never expires (SQL's
  `NULL < cutoff` is not true), as with Delta Spark's DELETE.
- Otherwise: every file whose maximum statistic for the column is older than the cutoff and
  which holds no null in it. A partition column generated from the column prunes first:
  files of a partition wholly older go without their statistics being read, those of a
  partition wholly newer stay. Files without statistics for the column stay and are reported
  (`compute-stats` gives them some); files with rows on both sides of the cutoff (or older
  rows and nulls) straddle it and stay: removing them would lose rows a DELETE keeps.

Refused, nothing planned: a table with a feature this build does not support or a catalog
that owns it (`features.require_writable`), `delta.appendOnly`, a column the schema lacks, a
column of another type than date, timestamp, timestamp_ntz (or string, for a partition
column), and a string partition value that is not ISO-8601."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.delta import schema
from deltakeeper.delta.bulk import collector_paused
from deltakeeper.delta.errors import ExpiryLimitError, InvalidInputError
from deltakeeper.delta.expire import times
from deltakeeper.delta.expire.times import Generated, Span
from deltakeeper.delta.features import require_writable
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.types import field_name, map_values, mapping_on, schema_fields

GENERATION = "delta.generationExpression"
REFUSED = "expire refused, nothing removed"
DEFAULT_MAX_FRACTION = 0.5
RECORDS = schema.NUM_RECORDS.name


class Fate(enum.Enum):
    """What becomes of one file."""

    EXPIRED = "expired"  # every row is older than the cutoff: removed
    STRADDLING = "straddling"  # some rows are, some are not (or are null): kept
    WITHOUT_STATS = "without statistics"  # no statistics say: kept
    KEPT = "kept"  # no row is older than the cutoff


@dataclass(frozen=True)
class Column:
    """The time column as the log names it."""

    name: str  # as the schema spells it
    physical: str  # the key of its partition values and statistics
    type: str  # date, timestamp, timestamp_ntz or string
    partition: bool
    generated: Generated | None = None  # a partition column generated from it
    generated_physical: str | None = None


@dataclass
class ExpiryPlan:
    """The files an expiry removes, those it keeps and why, and the table's totals (for
    maxFraction)."""

    base: SnapshotHeader = field(repr=False)  # the snapshot planned from, which a commit follows
    column: Column
    cutoff_us: int
    predicate: str  # the rows that expire, as Delta Spark's DELETE would be asked
    # The add rows of the files that go (the snapshot's columns, record counts included).
    removed: pa.Table = field(default_factory=lambda: pa.table({"path": pa.array([], pa.string())}))
    rows: int = 0  # rows the removed files hold (deletion vectors applied)
    uncounted: int = 0  # removed files without a record count
    bytes: int = 0
    straddling: list[str] = field(default_factory=list)
    # The partitions of the straddling files (partition values as the log keys them), once
    # each: where a rewrite (Delta Spark's DELETE) must look.
    straddling_partitions: list[dict[str, str | None]] = field(default_factory=list)
    without_stats: list[str] = field(default_factory=list)
    table_files: int = 0
    table_rows: int = 0
    table_uncounted: int = 0  # live files without a record count
    table_bytes: int = 0
    # Whether a file another writer adds may hold rows older than the cutoff (the conflict
    # rule: such an append makes the commit give up rather than miss or race it).
    may_expire: Callable[[Mapping[str, Any]], bool] = field(default=lambda add: True, repr=False)

    @property
    def uri(self) -> str:
        return self.base.uri

    @property
    def version(self) -> int:
        return self.base.version

    @property
    def files(self) -> int:
        return self.removed.num_rows

    def paths(self) -> list[str]:
        """The removed files' paths, in the snapshot's order."""
        return self.removed["path"].to_pylist()

    @property
    def by(self) -> str:
        """How the files were chosen."""
        if self.column.partition:
            return "partition values"
        if self.column.generated is not None:
            return f"generated partition column {self.column.generated.partition} and statistics"
        return "statistics"

    def share(self) -> tuple[float, str]:
        """The share of the table it removes, and of what: rows when every live file has a
        record count, bytes otherwise."""
        if not self.table_uncounted:
            return (self.rows / self.table_rows if self.table_rows else 0.0), "rows"
        return (self.bytes / self.table_bytes if self.table_bytes else 0.0), "bytes"


# Each file's fate as a small integer, so the plan is judged once per partition value (or
# per file's statistics) and tallied over Arrow columns.
CODE = {fate: n for n, fate in enumerate(Fate)}


@collector_paused()  # a value per file, none in a cycle
def expiry_plan(snap: Snapshot, column: str, cutoff_us: int) -> ExpiryPlan:
    """The files of `snap` whose rows are all older than the cutoff in `column` (a snapshot
    read with the full add columns and `numRecords`). Raises the refusals of the module."""
    require_writable(snap, "expire")
    if snap.metadata.configuration.get("delta.appendOnly", "").strip().lower() == "true":
        raise InvalidInputError(
            f"{snap.uri}: {REFUSED}: delta.appendOnly is set, so no file may be removed"
        )
    col = resolve(snap, column)
    files = snap.files
    if col.partition:
        judge = functools.partial(_value_fate, snap.uri, col, cutoff_us)
        values = _lookup(files, col.physical)
        fates = _fates_by_value(values, judge)
        plan = ExpiryPlan(snap, col, cutoff_us, predicate(col, cutoff_us, values.unique()))
        plan.may_expire = _may_expire(lambda add: judge(_partition_value(add, col.physical)))
    else:
        fates = _fates_by_stats(files, col, cutoff_us)
        plan = ExpiryPlan(snap, col, cutoff_us, predicate(col, cutoff_us, pa.array([])))
        plan.may_expire = _may_expire(lambda add: _add_stats_fate(add, col, cutoff_us))
    _tally(plan, files, fates)
    return plan


def check_fraction(plan: ExpiryPlan, max_fraction: float) -> None:
    """ExpiryLimitError when the plan removes a larger share of the table than allowed."""
    share, of = plan.share()
    if share <= max_fraction:
        return
    removed, total = (
        (plan.rows, plan.table_rows) if of == "rows" else (plan.bytes, plan.table_bytes)
    )
    raise ExpiryLimitError(
        f"{plan.uri}: {REFUSED}: it would remove {removed} of the table's {total} {of} "
        f"({share:.1%}), more than maxFraction {max_fraction:g} ({max_fraction:.0%}) allows; "
        "check keep, or raise maxFraction (--max-fraction) if this is meant"
    )


def resolve(snap: SnapshotHeader, name: str) -> Column:
    """The column `name` of the table's schema (Spark's rules: case-insensitive), refused
    when missing or of a type expiry does not read."""
    meta = snap.metadata
    fields = schema_fields(meta.schema_string)
    found = next((f for f in fields if f["name"] == name), None) or next(
        (f for f in fields if str(f["name"]).lower() == name.lower()), None
    )
    if found is None:
        names = ", ".join(str(f["name"]) for f in fields)
        raise InvalidInputError(
            f"{snap.uri}: {REFUSED}: no column {name!r} in the table (columns: {names})"
        )
    physical = mapping_on(meta.properties.column_mapping_mode)
    partitions = {p.lower() for p in meta.partition_columns}
    is_partition = str(found["name"]).lower() in partitions
    kind = found["type"] if isinstance(found["type"], str) else "struct"
    readable = times.TIME_TYPES + (("string",) if is_partition else ())
    if kind not in readable:
        what = "date, timestamp or timestamp_ntz columns and ISO-8601 string partition columns"
        raise InvalidInputError(
            f"{snap.uri}: {REFUSED}: column {found['name']!r} is of type {kind}"
            f"{' (not a partition column)' if kind == 'string' else ''}; expire reads {what}"
        )
    col = Column(str(found["name"]), field_name(found, physical), kind, is_partition)
    if is_partition:
        return col
    return _with_generated(col, fields, partitions, physical)


def _with_generated(
    col: Column, fields: list[dict[str, Any]], partitions: set[str], physical: bool
) -> Column:
    """`col` with the first partition column generated from it that expiry can read."""
    types = {str(f["name"]): f["type"] for f in fields if isinstance(f["type"], str)}
    types[col.name] = col.type
    for f in fields:
        expression = (f.get("metadata") or {}).get(GENERATION)
        if str(f["name"]).lower() not in partitions or not isinstance(expression, str):
            continue
        kind = f["type"] if isinstance(f["type"], str) else ""
        found = times.generated(str(f["name"]), expression, kind, types)
        if found is not None and found.source.lower() == col.name.lower():
            return Column(col.name, col.physical, col.type, False, found, field_name(f, physical))
    return col


def _value_fate(uri: str, col: Column, cutoff_us: int, value: str | None) -> Fate:
    """The fate of the files of a partition whose value for `col` is `value`."""
    if not value:
        return Fate.KEPT  # a null (or empty: null in Delta) never compares older
    span = _partition_span(value, col.type)
    if span is None:
        raise InvalidInputError(
            f"{uri}: {REFUSED}: partition value {value!r} of column {col.name!r} "
            f"is not {'an ISO-8601 date or time' if col.type == 'string' else 'a ' + col.type}"
        )
    return Fate.EXPIRED if span.expired(cutoff_us) else Fate.KEPT


def _stats_fate(col: Column, cutoff_us: int, stats_text: Any, generated: str | None) -> Fate:
    """The fate of a file by its statistics, and first by the value of a partition column
    generated from the column (`generated`) when there is one."""
    if col.generated is not None and generated:
        span = col.generated.read(generated)
        if span is not None and span.expired(cutoff_us):
            return Fate.EXPIRED
        if span is not None and not span.older(cutoff_us):
            return Fate.KEPT
    return _by_stats(_stats(stats_text), col, cutoff_us)


def _add_stats_fate(add: Mapping[str, Any], col: Column, cutoff_us: int) -> Fate:
    generated = col.generated_physical
    value = _partition_value(add, generated) if generated is not None else None
    return _stats_fate(col, cutoff_us, add.get("stats"), value)


def _by_stats(stats: Mapping[str, Any], col: Column, cutoff_us: int) -> Fate:
    records = stats.get("numRecords")
    nulls = _leaf(stats, "nullCount", col.physical)
    if isinstance(nulls, int) and nulls == records:
        return Fate.KEPT  # every value null: none is older than anything
    low = times.stat_span(_leaf(stats, "minValues", col.physical), col.type)
    high = times.stat_span(_leaf(stats, "maxValues", col.physical), col.type)
    if low is None or high is None or not isinstance(nulls, int):
        return Fate.WITHOUT_STATS
    if high.expired(cutoff_us) and nulls == 0:
        return Fate.EXPIRED
    return Fate.STRADDLING if low.older(cutoff_us) else Fate.KEPT


def _may_expire(judge: Callable[[Mapping[str, Any]], Fate]) -> Callable[[Mapping[str, Any]], bool]:
    """Whether an add another writer commits may hold expiring rows, by `judge`."""

    def may(add: Mapping[str, Any]) -> bool:
        try:
            return judge(add) is not Fate.KEPT
        except InvalidInputError:  # a partition value expiry cannot read: it may be old
            return True

    return may


def _fates_by_value(values: pa.Array, judge: Callable[[str | None], Fate]) -> pa.Array:
    """Each file's fate code, judged once per distinct value (a partition's files share it)."""
    encoded = values.dictionary_encode()
    codes = pa.array([CODE[judge(v)] for v in encoded.dictionary.to_pylist()], pa.int8())
    return codes.take(encoded.indices).fill_null(CODE[judge(None)])


def _fates_by_stats(files: pa.Table, col: Column, cutoff_us: int) -> pa.Array:
    """Each file's fate code, judged by its statistics (per file: they are JSON text)."""
    n = files.num_rows
    stats = files["stats"].to_pylist() if "stats" in files.column_names else [None] * n
    generated = (
        _lookup(files, col.generated_physical).to_pylist()
        if col.generated_physical is not None
        else [None] * n
    )
    judged = [
        CODE[_stats_fate(col, cutoff_us, s, g)] for s, g in zip(stats, generated, strict=True)
    ]
    return pa.array(judged, pa.int8())


def _tally(plan: ExpiryPlan, files: pa.Table, fates: pa.Array) -> None:
    """The plan's files and totals from each file's fate, over Arrow columns."""
    rows = _rows(files)
    sizes = files["size"].fill_null(0)
    plan.table_files = files.num_rows
    plan.table_bytes = _sum(sizes)
    plan.table_rows, plan.table_uncounted = _sum(rows), rows.null_count
    expired = pc.equal(fates, CODE[Fate.EXPIRED])
    plan.removed = files.filter(expired)
    plan.bytes = _sum(sizes.filter(expired))
    gone = rows.filter(expired)
    plan.rows, plan.uncounted = _sum(gone), gone.null_count
    kept = files.select(["path", "partitionValues"])  # all a kept file is reported by
    straddling = kept.filter(pc.equal(fates, CODE[Fate.STRADDLING]))
    plan.straddling = straddling["path"].to_pylist()
    for values in straddling["partitionValues"].to_pylist():
        found = dict(values or ())
        if found not in plan.straddling_partitions:
            plan.straddling_partitions.append(found)
    without = kept.filter(pc.equal(fates, CODE[Fate.WITHOUT_STATS]))
    plan.without_stats = without["path"].to_pylist()


def _rows(files: pa.Table) -> pa.ChunkedArray:
    """The rows each file holds as readers see them (its deletion vector applied); null where
    the file has no record count."""
    records = files[RECORDS]
    if "deletionVector" not in files.column_names:
        return records
    hidden = pc.struct_field(files["deletionVector"], "cardinality").fill_null(0)
    return pc.subtract(records, hidden)


def _sum(values: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(values).as_py() or 0)


def _lookup(files: pa.Table, key: str) -> pa.Array:
    """Each file's partition value for `key` (null where it has none)."""
    return map_values(files["partitionValues"], key)


def _partition_value(add: Mapping[str, Any], key: str) -> str | None:
    values = add.get("partitionValues") or {}
    if isinstance(values, list):  # Arrow's map as pairs
        values = dict(values)
    value = values.get(key)
    return value if value else None  # an empty string is a null partition value


@functools.lru_cache(maxsize=4096)  # a partition's files share its value: parsed once
def _partition_span(value: str, kind: str) -> Span | None:
    if kind == "string":
        iso = times.parse_iso(value)
        return None if iso is None else iso.span
    return times.value_span(value, kind)


def _stats(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        return {}
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _leaf(stats: Mapping[str, Any], kind: str, name: str) -> Any:
    group = stats.get(kind)
    return group.get(name) if isinstance(group, dict) else None


def predicate(col: Column, cutoff_us: int, values: pa.Array) -> str:
    """The expiring rows as a Spark SQL condition: what Delta Spark's DELETE would be given
    (commitInfo's predicate; the rewrite job's condition). A string partition column is
    compared as text, with the cutoff written at the precision of its first value that reads
    as ISO-8601 (`values`: the partition's distinct values)."""
    quoted = f"`{col.name.replace('`', '``')}`"
    if col.type == "date":
        return f"{quoted} < DATE'{times.at(cutoff_us):%Y-%m-%d}'"
    if col.type == "string":
        sample = next(
            (iso for v in values.to_pylist() if v and (iso := times.parse_iso(v)) is not None),
            None,
        )
        if sample is None:
            return f"{quoted} < '{times.at(cutoff_us):%Y-%m-%d}'"
        return f"{quoted} < '{times.format_like(cutoff_us, sample)}'"
    text = f"{times.at(cutoff_us):%Y-%m-%d %H:%M:%S.%f}"
    if col.type == "timestamp_ntz":
        return f"{quoted} < TIMESTAMP_NTZ'{text}'"
    return f"{quoted} < TIMESTAMP'{text}Z'"  # UTC, whatever the session's time zone
