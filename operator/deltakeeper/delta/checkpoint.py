"""Write a checkpoint, verify it, then move `_last_checkpoint`.

Layouts (the spec's "checkpoint naming schemes"):
- classic: one `<v>.checkpoint.parquet` (V1 spec; on a v2Checkpoint table, V2 spec with a
  `checkpointMetadata` row and every file action inline, for readers that do not know V2).
- multi-part: `<v>.checkpoint.<p>.<n>.parquet` (V1 spec), never on v2Checkpoint tables.
- v2: `<v>.checkpoint.<uuid>.parquet` holding the non-file actions, `checkpointMetadata` and one
  `sidecar` row per `_delta_log/_sidecars/` file; the sidecars hold the add and remove rows.

Rows are clustered into parts and sidecars as Delta Spark does it (spark_hash.py), and every
layout takes the add/remove rows as a stream of Arrow record batches, so a bounded-memory source
can replace the in-memory snapshot later. Part counts come from counts known up front.

Order matters for crash safety: checkpoint files are written and read back before
`_last_checkpoint` points at them, and `_last_checkpoint` never moves backwards.
"""

from __future__ import annotations

import datetime as dt
import enum
import io
import json
import math
import queue
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, ClassVar, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta import features, last_checkpoint, paths, schema, spark_hash, types
from deltakeeper.delta.errors import (
    CorruptLogError,
    DeltaError,
    InvalidInputError,
)
from deltakeeper.delta.log import Checkpoint, segment_for
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.replay import (
    Actions,
    _file_actions,
    _has,
    _open_parquet,
    _project,
    _read_checkpoint_file,
    _sidecar_key,
    dv_unique_ids,
    read_actions,
    replay,
)
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table

STRING_LIST = pa.list_(pa.string())
PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", STRING_LIST),
        ("writerFeatures", STRING_LIST),
    ]
)
METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", schema.STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", STRING_LIST),
        ("configuration", schema.STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
DOMAIN = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
CHECKPOINT_METADATA = pa.struct([("version", pa.int64()), ("tags", schema.STRING_MAP)])
SIDECAR = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", schema.STRING_MAP),
    ]
)
# Removes in checkpoints are tombstones for VACUUM: no stats, no tags (spec).
CHECKPOINT_REMOVE = tuple(c for c in schema.FULL_REMOVE if c not in ("stats", "tags"))


class Layout(enum.StrEnum):
    CLASSIC = "classic"
    MULTIPART = "multipart"
    V2 = "v2"


V2_PART_SIZE = 50_000  # Delta Spark's sidecar size when checkpoint.partSize is not set
BATCH_ROWS = 65_536  # rows per record batch handed to a layout
ROW_GROUP_ROWS = 65_536  # row groups cut by count alone, so bytes depend only on the rows
LAST_CHECKPOINT_LIST_LIMIT = 30  # Delta Spark's limit for lists embedded in _last_checkpoint
HeaderRow = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class CheckpointResult:
    version: int
    key: str  # the file a reader opens first: the classic file, part 1, or the V2 file
    rows: int
    adds: int
    tombstones: int
    expired_tombstones: int
    size_bytes: int
    last_checkpoint_moved: bool
    layout: Layout = Layout.CLASSIC
    keys: tuple[str, ...] = ()  # every file written (or that would be), sidecars first
    parts: int | None = None  # multi-part only
    sidecars: int = 0


# -- what goes into a checkpoint -----------------------------------------------------------------


@dataclass
class Content:
    """A checkpoint's rows: a few header rows, then add/remove rows as record batches.

    `batches` yields batches with exactly two columns, `add` and `remove` (one of them null in
    each row), in a deterministic order. The counts (and `expired`, the tombstones left out as
    expired) are known before the first batch, unless the source was asked not to count first
    (layouts that do not split by count); then they are final once `batches` is exhausted.
    """

    header: list[HeaderRow]
    add_type: pa.StructType
    remove_type: pa.StructType
    num_adds: int
    num_removes: int
    batches: Iterator[pa.RecordBatch] = field(repr=False)
    expired: int = 0


def load_for_checkpoint(table: Table, version: int | None = None) -> Snapshot:
    """The snapshot with every column a checkpoint carries.

    When the checkpoint it starts from cannot be read (a truncated part, a missing sidecar),
    it is rebuilt from the next older checkpoint or from the commits, so that writing a good
    checkpoint repairs the table. Nothing is deleted.
    """
    try:
        snap = table.snapshot(
            version=version, add_cols=schema.FULL_ADD, remove_cols=schema.FULL_REMOVE
        )
    except CorruptLogError as first:
        snap = _skipping_bad_checkpoints(table, version, first)
    return _stats_from_struct(table, snap)


def _stats_from_struct(table: Table, snap: Snapshot) -> Snapshot:
    """Stats of files whose checkpoint row has only `stats_parsed` (writeStatsAsJson=false),
    turned back into JSON so that rewriting the checkpoint does not lose them."""
    cp = snap.segment.checkpoint
    files = snap.files
    if cp is None or files.num_rows == 0 or not pc.any(pc.is_null(files["stats"])).as_py():
        return snap
    found: dict[str, str] = {}
    for key in _checkpoint_keys(table, [f.key for f in cp.files]):
        found.update(_parsed_stats_as_json(table, key))
    if not found:
        return snap
    paths_ = files["path"].to_pylist()
    stats = files["stats"].to_pylist()
    filled = [s if s is not None else found.get(p) for p, s in zip(paths_, stats, strict=True)]
    i = files.schema.get_field_index("stats")
    snap.files = files.set_column(i, "stats", pa.array(filled, pa.string()))
    return snap


def _checkpoint_keys(table: Table, keys: list[str]) -> list[str]:
    """Checkpoint files and the sidecars they name."""
    out = list(keys)
    for key in keys:
        if key.endswith(".json"):
            rows = [a["sidecar"] for _, a in read_actions(table.storage, key) if "sidecar" in a]
        else:
            pf = _open(table, key)
            if "sidecar" not in pf.schema_arrow.names:
                continue
            col = pf.read(columns=["sidecar"])["sidecar"]
            rows = col.filter(pc.is_valid(col)).to_pylist()
        out += [f"{paths.LOG_DIR}/{paths.sidecar(r['path'].rsplit('/', 1)[-1])}" for r in rows]
    return out


def _parsed_stats_as_json(table: Table, key: str) -> dict[str, str]:
    if key.endswith(".json"):
        return {}
    pf = _open(table, key)
    names = pf.schema_arrow.names
    if "add" not in names or pf.schema_arrow.field("add").type.get_field_index("stats_parsed") < 0:
        return {}
    col = pf.read(columns=["add.path", "add.stats_parsed"])["add"]
    col = col.filter(pc.is_valid(pc.struct_field(col, "stats_parsed")))
    return {row["path"]: _dumps(_stats_json(row["stats_parsed"])) for row in col.to_pylist()}


def _open(table: Table, key: str) -> pq.ParquetFile:
    local = table.storage.local_path(key)
    return pq.ParquetFile(local if local is not None else pa.BufferReader(table.storage.read(key)))


_EXACT = "\0"
_EXACT_NUMBER = re.compile(r'"\\u0000([^"\\]*)\\u0000"')


def _dumps(value: Any) -> str:
    return _EXACT_NUMBER.sub(r"\1", json.dumps(value, separators=(",", ":")))


def _stats_json(value: Any) -> Any:
    """A `stats_parsed` value as Delta's stats JSON: nulls left out, dates and times as text."""
    if isinstance(value, dict):
        return {k: _stats_json(v) for k, v in value.items() if v is not None}
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return f"{_EXACT}{value}{_EXACT}"  # unquoted by _dumps: exact, not via float
    if isinstance(value, float) and not math.isfinite(value):
        return str(value).replace("inf", "Infinity").replace("nan", "NaN")
    return value


def _skipping_bad_checkpoints(
    table: Table, version: int | None, first: CorruptLogError
) -> Snapshot:
    listing = table.list_log()
    while True:
        try:
            segment = segment_for(listing, table.uri, version)
        except DeltaError:
            raise first from None
        cp = segment.checkpoint
        try:
            actions = replay(table.storage, segment, schema.FULL_ADD, schema.FULL_REMOVE)
        except CorruptLogError:
            if cp is None:
                raise
            listing.checkpoints[cp.version].remove(cp)
            if not listing.checkpoints[cp.version]:
                del listing.checkpoints[cp.version]
            continue
        return table._build(segment, actions)


def write_checkpoint(
    table: Table,
    snap: Snapshot,
    now_ms: int,
    tombstone_retention_ms: int,
    txn_retention_ms: int | None = None,
    dry_run: bool = False,
    *,
    part_size: int | None = None,
    classic: bool = False,
) -> CheckpointResult:
    """Write `snap` (loaded with `load_for_checkpoint`) as a checkpoint; see `write_source`."""
    return write_source(
        table,
        CheckpointSource(table, snap),
        now_ms,
        tombstone_retention_ms,
        txn_retention_ms,
        dry_run,
        part_size=part_size,
        classic=classic,
    )


def checkpoint_table(
    table: Table,
    version: int | None,
    now_ms: int,
    tombstone_retention_ms: int,
    txn_retention_ms: int | None = None,
    dry_run: bool = False,
    *,
    part_size: int | None = None,
    classic: bool = False,
) -> CheckpointResult:
    """Checkpoint `version` (latest when None): from the newest checkpoint and the commits
    after it when that checkpoint can be streamed, else from a snapshot loaded in memory."""
    return write_source(
        table,
        checkpoint_source(table, version),
        now_ms,
        tombstone_retention_ms,
        txn_retention_ms,
        dry_run,
        part_size=part_size,
        classic=classic,
    )


def write_source(
    table: Table,
    source: CheckpointSource,
    now_ms: int,
    tombstone_retention_ms: int,
    txn_retention_ms: int | None = None,
    dry_run: bool = False,
    *,
    part_size: int | None = None,
    classic: bool = False,
) -> CheckpointResult:
    """Write a checkpoint of `source`; expire old tombstones and txns.

    The layout: on a table using V2 checkpoints (see `uses_v2`), a UUID-named V2 checkpoint
    with sidecars of at most `part_size` actions (default 50,000, as Delta Spark), or with
    `classic=True` a classic-named V2 checkpoint that older readers recognise. Otherwise a
    classic checkpoint, split into ceil(actions / part_size) parts when `part_size` is set
    and that is more than one (Delta Spark writes one file unless checkpoint.partSize is set).
    With `dry_run` everything is computed and nothing is written.
    """
    snap = source.snapshot
    features.require_writable(snap, "checkpoint")
    if part_size is not None and part_size < 1:
        raise InvalidInputError(f"checkpoint part size must be at least 1, got {part_size}")
    v2 = uses_v2(snap)
    # Only layouts split by count need the counts before the rows (a pass less otherwise).
    split = (v2 and not classic) or (not v2 and part_size is not None)
    content = source.content(now_ms, tombstone_retention_ms, txn_retention_ms, count_first=split)
    writer = _Writer(table, snap.version, now_ms, dry_run)
    if v2 and not classic:
        _write_v2(writer, content, part_size or V2_PART_SIZE)
        layout = Layout.V2
    else:
        if v2:
            content.header.insert(0, ("checkpointMetadata", _checkpoint_metadata(snap.version, {})))
        n = 1 if v2 or part_size is None else _num_parts(content, part_size)
        n = _existing_parts(snap) or n
        _write_classic(writer, content, n)
        layout = Layout.MULTIPART if n > 1 else Layout.CLASSIC
    moved = False
    if not dry_run:
        writer.verify()
        moved = _move_last_checkpoint(table, snap.version, writer, content, layout)
    return CheckpointResult(
        version=snap.version,
        key=writer.main_key,
        rows=writer.rows,
        adds=content.num_adds,
        tombstones=content.num_removes,
        expired_tombstones=content.expired,
        size_bytes=writer.size_bytes,
        last_checkpoint_moved=moved,
        layout=layout,
        keys=tuple(f.key for f in [*writer.sidecars, *writer.files]),
        parts=len(writer.files) if layout is Layout.MULTIPART else None,
        sidecars=len(writer.sidecars),
    )


def uses_v2(snap: Snapshot) -> bool:
    """V2 checkpoints when the table supports v2Checkpoint and its checkpoint policy is not
    explicitly `classic` (Delta Spark sets `classic` while the feature is being dropped)."""
    policy = snap.metadata.properties.checkpoint_policy
    return snap.protocol.has("v2Checkpoint") and policy != "classic"


def _existing_parts(snap: Snapshot) -> int | None:
    """The part count of a classic or multi-part checkpoint already at this version.

    A rewrite keeps that layout: with two layouts at one version, a reader that trusts
    `_last_checkpoint`'s part count but lists the other one first (delta-kernel does, in
    directory order) refuses the table.
    """
    cp = snap.segment.checkpoint
    if cp is not None and cp.version == snap.version and cp.kind is not Kind.UUID_CHECKPOINT:
        return len(cp.files)
    for damaged in snap.damaged_checkpoints:  # a damaged one being rewritten: same layout
        name = paths.parse(damaged.keys[0].removeprefix(paths.LOG_DIR + "/"))
        if damaged.version == snap.version and name and name.kind is Kind.MULTIPART_CHECKPOINT:
            return len(damaged.keys)
    return None


def _num_parts(content: Content, part_size: int) -> int:
    return max(1, math.ceil((content.num_adds + content.num_removes) / part_size))


# -- the in-memory snapshot as a source ----------------------------------------------------------


def snapshot_content(
    snap: Snapshot, now_ms: int, tombstone_retention_ms: int, txn_retention_ms: int | None
) -> tuple[Content, int]:
    """The checkpoint rows of a loaded snapshot, and how many tombstones expired."""
    adds = _sorted_by_key(_without_data_change(snap.files))
    removes, expired = _live_tombstones(snap.tombstones, now_ms - tombstone_retention_ms)
    removes = _sorted_by_key(removes)
    stats = StatsColumns.for_snapshot(snap)
    add_type = stats.add_type(adds.schema)
    remove_type = pa.struct(list(removes.schema))

    def batches() -> Iterator[pa.RecordBatch]:
        for lo in range(0, adds.num_rows, BATCH_ROWS):
            piece = stats.add_struct(adds.slice(lo, BATCH_ROWS))
            yield _file_batch(piece, pa.nulls(len(piece), remove_type))
        for lo in range(0, removes.num_rows, BATCH_ROWS):
            piece = _struct(removes.slice(lo, BATCH_ROWS))
            yield _file_batch(pa.nulls(len(piece), add_type), piece)

    header = _header_rows(snap, now_ms, txn_retention_ms)
    content = Content(
        header, add_type, remove_type, adds.num_rows, removes.num_rows, batches(), expired
    )
    return content, expired


def _file_batch(add: pa.Array, remove: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([add, remove], names=["add", "remove"])


def _struct(table: pa.Table) -> pa.StructArray:
    typ = pa.struct(list(table.schema))
    if table.num_rows == 0:
        return pa.array([], typ)
    return table.combine_chunks().to_struct_array().combine_chunks()


def _sorted_by_key(table: pa.Table) -> pa.Table:
    """Rows in (path, deletion vector id) order: the same snapshot gives the same bytes no
    matter whether it was read from commits or from an earlier checkpoint."""
    if table.num_rows < 2:
        return table
    keys = pa.table({"p": table["path"], "d": pc.fill_null(dv_unique_ids(table), "")})
    return table.take(pc.sort_indices(keys, sort_keys=[("p", "ascending"), ("d", "ascending")]))


def _without_data_change(adds: pa.Table) -> pa.Table:
    # dataChange has no meaning in a checkpoint; Delta Spark writes false.
    return adds.set_column(
        adds.schema.get_field_index("dataChange"),
        pa.field("dataChange", pa.bool_()),
        pa.repeat(pa.scalar(False, pa.bool_()), adds.num_rows),
    )


def _live_tombstones(tombstones: pa.Table, expire_before_ms: int) -> tuple[pa.Table, int]:
    kept = tombstones.filter(_not_expired(tombstones, expire_before_ms)).select(
        list(CHECKPOINT_REMOVE)
    )
    return kept, tombstones.num_rows - kept.num_rows


def _header_rows(snap: Snapshot, now_ms: int, txn_retention_ms: int | None) -> list[HeaderRow]:
    """protocol, metaData, the txns still within retention, live domains."""
    rows: list[HeaderRow] = [
        ("protocol", _protocol_row(snap)),
        ("metaData", snap.metadata.action()),
    ]
    for app_id in sorted(snap.txns):
        txn = snap.txns[app_id]
        last = txn.get("lastUpdated")
        if txn_retention_ms is not None and last is not None and last < now_ms - txn_retention_ms:
            continue
        rows.append(("txn", txn))
    rows += [("domainMetadata", snap.domains[d]) for d in sorted(snap.domains)]
    return rows


def _protocol_row(snap: Snapshot) -> dict[str, Any]:
    p = snap.protocol
    return {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        # Spec: non-null lists exactly when the versions support table features.
        "readerFeatures": list(p.reader_features or []) if p.min_reader_version >= 3 else None,
        "writerFeatures": list(p.writer_features or []) if p.min_writer_version >= 7 else None,
    }


# -- where the rows come from: a loaded snapshot, or the newest checkpoint streamed ----------------


class CheckpointSource:
    """The rows of a checkpoint, from one of two places.

    Full: a snapshot loaded with every add column (`load_for_checkpoint`); rows sorted by key.
    Incremental: the newest checkpoint, streamed a batch at a time, plus the commits after it;
    `snapshot` then has protocol, metadata, txns and domains but no files or tombstones. Rows
    keep the old checkpoint's order (its files, then its sidecars) with the touched keys left
    out, followed by the commits' adds and tombstones sorted by key. Both orders depend only on
    the log, so the same log gives the same bytes; the two sources agree on the set of rows.
    """

    def __init__(
        self, table: Table, snapshot: Snapshot, incremental: _Incremental | None = None
    ) -> None:
        self.table = table
        self.snapshot = snapshot
        self.incremental = incremental

    @property
    def full(self) -> bool:
        """Whether `snapshot` holds the files and tombstones (needed e.g. for a checksum)."""
        return self.incremental is None

    def content(
        self,
        now_ms: int,
        tombstone_retention_ms: int,
        txn_retention_ms: int | None,
        count_first: bool = True,
    ) -> Content:
        if self.incremental is not None:
            try:
                return self.incremental.content(
                    self.snapshot, now_ms, tombstone_retention_ms, txn_retention_ms, count_first
                )
            except CorruptLogError:  # MissingLogFileError included
                # An unreadable old checkpoint: the full path rebuilds from an older one.
                self.snapshot = load_for_checkpoint(self.table, self.snapshot.version)
                self.incremental = None
        snap = self.snapshot
        return snapshot_content(snap, now_ms, tombstone_retention_ms, txn_retention_ms)[0]


def checkpoint_source(table: Table, version: int | None = None) -> CheckpointSource:
    """The incremental source when the newest checkpoint can be streamed, else a full one."""
    found = incremental_source(table, version)
    if found is not None:
        return found
    return CheckpointSource(table, load_for_checkpoint(table, version))


def incremental_content(
    table: Table,
    version: int | None,
    now_ms: int,
    tombstone_retention_ms: int,
    txn_retention_ms: int | None = None,
) -> tuple[Content, int] | None:
    """Checkpoint rows of `version` from the newest checkpoint and the commits after it, and
    how many tombstones expired; None when there is no checkpoint this can stream."""
    source = incremental_source(table, version)
    if source is None:
        return None
    features.require_writable(source.snapshot, "checkpoint")
    assert source.incremental is not None
    try:
        content = source.incremental.content(
            source.snapshot, now_ms, tombstone_retention_ms, txn_retention_ms
        )
    except CorruptLogError:  # MissingLogFileError included
        return None
    return content, content.expired


def incremental_source(table: Table, version: int | None = None) -> CheckpointSource | None:
    """Reads the commits after the newest checkpoint and that checkpoint's non-file rows; the
    file rows are read later, a batch at a time. None when there is no checkpoint, when it is
    a JSON V2 checkpoint with file actions inline, or when it cannot be read (the full path
    then rebuilds it from an older checkpoint or the commits)."""
    listing, _ = table.listing_for(version)
    segment = segment_for(listing, table.uri, version)
    if segment.checkpoint is None:
        return None
    try:
        old = _read_old_header(table, segment.checkpoint)
        if old is None:
            return None
        commits = replace(segment, checkpoint=None)
        newer = replay(table.storage, commits, schema.FULL_ADD, schema.FULL_REMOVE)
    except CorruptLogError:  # MissingLogFileError included
        return None
    header = Actions(
        newer.adds.schema.empty_table(),
        newer.removes.schema.empty_table(),
        protocol=newer.protocol or old.actions.protocol,
        metadata=newer.metadata or old.actions.metadata,
        txns={**old.actions.txns, **newer.txns},
        domains={**old.actions.domains, **newer.domains},
        commit_info=newer.commit_info,
    )
    incremental = _Incremental(table, old.files, newer.adds, newer.removes)
    return CheckpointSource(table, table._build(segment, header), incremental)


@dataclass
class _OldHeader:
    files: list[str]  # parquet files holding file rows: the checkpoint's own, then sidecars
    actions: Actions  # its protocol, metaData, txns and domains


def _read_old_header(table: Table, cp: Checkpoint) -> _OldHeader | None:
    actions = Actions(pa.table({}), pa.table({}))
    files: list[str] = []
    rows: list[dict[str, Any]] = []
    for entry in cp.files:
        if entry.name.fmt == "json":
            found = [a for _, a in read_actions(table.storage, entry.key)]
            if any("add" in a or "remove" in a for a in found):
                return None  # inline file actions in JSON: left to the full path
            rows += found
        else:
            rows += _read_checkpoint_file(table.storage, entry.key, (), ())[2]
            files.append(entry.key)
    for row in rows:
        kind, body = next(iter(row.items()))
        if not isinstance(body, dict):
            continue
        if kind == "protocol":
            actions.protocol = body
        elif kind == "metaData":
            actions.metadata = body
        elif kind == "txn" and isinstance(body.get("appId"), str):
            actions.txns[body["appId"]] = body
        elif kind == "domainMetadata" and isinstance(body.get("domain"), str):
            actions.domains[body["domain"]] = body
        elif kind == "sidecar" and isinstance(body.get("path"), str):
            files.append(_sidecar_key(body["path"]))
    return _OldHeader(files, actions)


class _Keys:
    """Reconciliation keys (path, DV unique id) touched by the newer commits, as Arrow sets."""

    def __init__(self, tables: list[pa.Table]) -> None:
        tables = [t for t in tables if t.num_rows]
        paths_ = [t["path"].combine_chunks() for t in tables]
        keys = [_key_column(t) for t in tables]
        self.paths = pc.unique(pa.concat_arrays(paths_)) if tables else pa.array([], pa.string())
        self.keys = pc.unique(pa.concat_arrays(keys)) if tables else pa.array([], pa.string())

    def untouched(self, table: pa.Table) -> pa.Array | None:
        """A mask: True for rows whose key no newer commit touched; None when that is all."""
        if table.num_rows == 0 or len(self.paths) == 0:
            return None
        same_path = pc.is_in(table["path"].combine_chunks(), value_set=self.paths)
        rows = pc.indices_nonzero(same_path)
        if len(rows) == 0:
            return None
        # Full keys only for the few rows whose path matches: building them all is costly.
        hit = pc.is_in(_key_column(table.take(rows)), value_set=self.keys)
        every = pa.repeat(pa.scalar(True), table.num_rows)
        return pc.replace_with_mask(every, same_path, pc.invert(hit))  # in row order


def _key_column(table: pa.Table) -> pa.Array:
    # "\0" occurs in neither a path nor a DV id, so it separates the two safely.
    ids = pc.fill_null(dv_unique_ids(table), "")
    joined = pc.binary_join_element_wise(table["path"], ids, "\0")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


_KEY_ADD = ("path", "deletionVector")
_KEY_REMOVE = ("path", "deletionTimestamp", "deletionVector")


@dataclass
class _Counts:
    adds: int = 0
    removes: int = 0
    expired: int = 0


class _Incremental:
    """The old checkpoint's file rows, streamed, merged with the commits' net file actions."""

    def __init__(self, table: Table, files: list[str], adds: pa.Table, removes: pa.Table) -> None:
        self.table = table
        self.files = files
        self.adds = adds  # the commits' winning adds, schema.FULL_ADD
        self.removes = removes  # the commits' winning removes, schema.FULL_REMOVE
        self.touched = _Keys([adds, removes])

    def content(
        self,
        snap: Snapshot,
        now_ms: int,
        tombstone_retention_ms: int,
        txn_retention_ms: int | None,
        count_first: bool = True,
    ) -> Content:
        expire_before = now_ms - tombstone_retention_ms
        if count_first:
            old: _Counts | None = self._count(expire_before)
        else:
            old = None
            for key in self.files:  # a missing or truncated file: the caller falls back now
                _open_old(self.table, key)
        removes, expired = _live_tombstones(self.removes, expire_before)
        stats = StatsColumns.for_snapshot(snap)
        add_type = stats.add_type(schema.add_schema(schema.FULL_ADD))
        remove_type = pa.struct(list(schema.remove_schema(CHECKPOINT_REMOVE)))
        header = _header_rows(snap, now_ms, txn_retention_ms)
        content = Content(header, add_type, remove_type, 0, 0, iter(()), expired)
        if old is not None:
            content.num_adds = old.adds + self.adds.num_rows
            content.num_removes = old.removes + removes.num_rows
            content.expired += old.expired
        rows = self._batches(stats, content, expire_before, removes, old)
        content.batches = _prefetched(rows)
        return content

    def _count(self, expire_before: int) -> _Counts:
        """First pass over the old rows, keys only: the counts the layouts need up front."""
        counts = _Counts()
        for key in self.files:
            pf = _open_old(self.table, key)
            for adds, removes, _ in _old_rows(self.table, key, pf, _KEY_ADD, _KEY_REMOVE, False):
                counts.adds += _keep(adds, self.touched.untouched(adds)).num_rows
                removes = _keep(removes, self.touched.untouched(removes))
                live = _true_count(_not_expired(removes, expire_before))
                counts.removes += live
                counts.expired += removes.num_rows - live
        return counts

    def _batches(
        self,
        stats: StatsColumns,
        content: Content,
        expire_before: int,
        removes: pa.Table,
        expected: _Counts | None,
    ) -> Iterator[pa.RecordBatch]:
        """Second pass: the old rows still valid, then the commits' rows sorted by key. Without
        `expected` counts, the counts of `content` are set once the old rows are through."""
        add_type, remove_type = content.add_type, content.remove_type
        want = _paths_without_stats(self.adds)
        found: dict[str, str] = {}  # stats JSON for those paths, from old stats_parsed
        seen = _Counts()
        for key in self.files:
            pf = _open_old(self.table, key)
            reuse = stats.as_struct and _has(pf, "add", "stats_parsed")
            parsed = reuse or (
                _has(pf, "add", "stats_parsed") and (bool(want) or _stats_missing(pf))
            )
            for adds, old_removes, stats_parsed in _old_rows(
                self.table, key, pf, schema.FULL_ADD, CHECKPOINT_REMOVE, parsed
            ):
                if stats_parsed is not None:
                    found.update(_parsed_stats(adds, stats_parsed, want))
                    adds = _fill_stats(adds, stats_parsed)
                    if reuse:
                        adds = adds.append_column(StatsColumns.KNOWN, stats_parsed)
                adds = _without_data_change(_keep(adds, self.touched.untouched(adds)))
                old_removes = _keep(old_removes, self.touched.untouched(old_removes))
                untouched = old_removes.num_rows
                old_removes = _keep(old_removes, _not_expired(old_removes, expire_before))
                seen.adds += adds.num_rows
                seen.removes += old_removes.num_rows
                seen.expired += untouched - old_removes.num_rows
                if adds.num_rows:
                    piece = stats.add_struct(adds)
                    yield _file_batch(piece, pa.nulls(len(piece), remove_type))
                if old_removes.num_rows:
                    piece = _struct(old_removes)
                    yield _file_batch(pa.nulls(len(piece), add_type), piece)
        if expected is None:
            content.num_adds = seen.adds + self.adds.num_rows
            content.num_removes = seen.removes + removes.num_rows
            content.expired += seen.expired
        elif (seen.adds, seen.removes) != (expected.adds, expected.removes):
            raise CorruptLogError(
                f"{self.table.uri}: the checkpoint files changed while being read; nothing was "
                "written, so run the checkpoint again"
            )
        adds = _sorted_by_key(_without_data_change(_with_stats(self.adds, found)))
        for lo in range(0, adds.num_rows, BATCH_ROWS):
            piece = stats.add_struct(adds.slice(lo, BATCH_ROWS))
            yield _file_batch(piece, pa.nulls(len(piece), remove_type))
        removes = _sorted_by_key(removes)
        for lo in range(0, removes.num_rows, BATCH_ROWS):
            piece = _struct(removes.slice(lo, BATCH_ROWS))
            yield _file_batch(pa.nulls(len(piece), add_type), piece)


_T = TypeVar("_T")
_Rows = TypeVar("_Rows", pa.Table, pa.ChunkedArray)
PREFETCH = 2  # batches read ahead of the writer


def _prefetched(items: Iterator[_T], depth: int = PREFETCH) -> Iterator[_T]:
    """`items` produced by a background thread, at most `depth` ahead. Reading and decoding the
    old checkpoint then overlaps with encoding and compressing the new one (pyarrow releases
    the GIL in both); memory grows by `depth` batches. Errors surface in the consumer."""
    slots: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer(("item", item)):
                    return
            offer(("done", None))
        except BaseException as e:  # handed to the consumer, raised there
            offer(("error", e))

    worker = threading.Thread(target=produce, name="checkpoint-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = slots.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        worker.join()


def _open_old(table: Table, key: str) -> pq.ParquetFile:
    try:
        return _open_parquet(table.storage, key)
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(f"{table.uri}/{key}: unreadable checkpoint parquet: {e}") from e


def _old_rows(
    table: Table,
    key: str,
    pf: pq.ParquetFile,
    add_cols: tuple[str, ...],
    remove_cols: tuple[str, ...],
    parsed: bool,
) -> Iterator[tuple[pa.Table, pa.Table, pa.ChunkedArray | None]]:
    """(adds, removes, the adds' stats_parsed when `parsed`) of an old checkpoint file, one
    record batch at a time, projected and cast to our columns."""
    columns = [f"add.{c}" for c in add_cols if _has(pf, "add", c)]
    columns += ["add.stats_parsed"] if parsed else []
    columns += [f"remove.{c}" for c in remove_cols if _has(pf, "remove", c)]
    if not columns:
        return
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            rows = pa.Table.from_batches([batch])
            adds, stats_parsed = _old_adds(rows, add_cols, parsed)
            removes = _file_actions(rows, "remove", remove_cols, schema.remove_schema(remove_cols))
            yield adds, removes, stats_parsed
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(f"{table.uri}/{key}: unreadable checkpoint parquet: {e}") from e


def _old_adds(
    rows: pa.Table, cols: tuple[str, ...], parsed: bool
) -> tuple[pa.Table, pa.ChunkedArray | None]:
    target = schema.add_schema(cols)
    if "add" not in rows.column_names:
        return target.empty_table(), None
    struct = rows["add"]
    present = _keep(struct, pc.is_valid(pc.struct_field(struct, "path")))
    stats_parsed = pc.struct_field(present, "stats_parsed") if parsed else None
    return _project(present, cols, target), stats_parsed


def _stats_missing(pf: pq.ParquetFile) -> bool:
    """Whether some add row may lack JSON stats, judged from the row groups' null counts."""
    meta = pf.metadata
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        nulls: dict[str, int] = {}
        for i in range(group.num_columns):
            col = group.column(i)
            if col.path_in_schema in ("add.path", "add.stats"):
                st = col.statistics
                if st is None or not st.has_null_count:
                    return True
                nulls[col.path_in_schema] = st.null_count
        if nulls.get("add.stats") != nulls.get("add.path"):
            return True
    return False


def _fill_stats(adds: pa.Table, stats_parsed: pa.ChunkedArray) -> pa.Table:
    """Null `stats` filled from the row's own `stats_parsed`, as the full path does."""
    need = pc.and_(pc.is_null(adds["stats"]), pc.is_valid(stats_parsed))
    if not pc.any(need).as_py():
        return adds
    stats = adds["stats"].to_pylist()
    for i in pc.indices_nonzero(need).to_pylist():
        stats[i] = _dumps(_stats_json(stats_parsed[i].as_py()))
    i = adds.schema.get_field_index("stats")
    return adds.set_column(i, "stats", pa.array(stats, pa.string()))


def _parsed_stats(adds: pa.Table, stats_parsed: pa.ChunkedArray, want: set[str]) -> dict[str, str]:
    """`stats_parsed` as JSON for the rows whose path is in `want`."""
    if not want:
        return {}
    hit = pc.is_in(adds["path"], value_set=pa.array(sorted(want), pa.string()))
    hit = pc.and_(hit, pc.is_valid(stats_parsed))
    if not pc.any(hit).as_py():
        return {}
    rows = zip(
        adds["path"].filter(hit).to_pylist(), stats_parsed.filter(hit).to_pylist(), strict=True
    )
    return {p: _dumps(_stats_json(v)) for p, v in rows}


def _paths_without_stats(adds: pa.Table) -> set[str]:
    return set(adds["path"].filter(pc.is_null(adds["stats"])).to_pylist())


def _with_stats(adds: pa.Table, found: dict[str, str]) -> pa.Table:
    """The commits' adds without stats take those an old row had in `stats_parsed` (the full
    path looks them up by path the same way)."""
    if not found:
        return adds
    paths_ = adds["path"].to_pylist()
    stats = adds["stats"].to_pylist()
    filled = [s if s is not None else found.get(p) for p, s in zip(paths_, stats, strict=True)]
    i = adds.schema.get_field_index("stats")
    return adds.set_column(i, "stats", pa.array(filled, pa.string()))


def _keep(rows: _Rows, mask: pa.Array | pa.ChunkedArray | None) -> _Rows:
    """`rows` where `mask` is true; the rows themselves (no copy) when it is true throughout."""
    if mask is None or pc.all(mask).as_py():
        return rows
    return rows.filter(mask)


def _not_expired(tombstones: pa.Table, expire_before_ms: int) -> pa.Array:
    return pc.greater_equal(pc.fill_null(tombstones["deletionTimestamp"], 0), expire_before_ms)


def _true_count(mask: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


# -- stats and partition values as JSON and/or typed structs -------------------------------------


@dataclass(frozen=True)
class StatsColumns:
    """Which of `stats`, `partitionValues_parsed` and `stats_parsed` an add row carries.

    `delta.checkpoint.writeStatsAsJson` (default true) keeps the JSON;
    `delta.checkpoint.writeStatsAsStruct` (default true, as in Delta Spark) adds the typed
    columns (physical names under column mapping). When the JSON is turned off, a stats string
    that does not parse is still kept as JSON in that row, so no statistics are lost.
    """

    KNOWN: ClassVar[str] = "_known_stats_parsed"

    as_json: bool
    as_struct: bool
    schema_string: str
    partition_columns: tuple[str, ...]
    mapping_mode: str | None

    @classmethod
    def for_snapshot(cls, snap: Snapshot) -> StatsColumns:
        props = snap.metadata.properties
        return cls(
            as_json=props.write_stats_as_json,
            as_struct=props.write_stats_as_struct,
            schema_string=snap.metadata.schema_string,
            partition_columns=snap.metadata.partition_columns,
            mapping_mode=props.column_mapping_mode,
        )

    @property
    def keeps_stats(self) -> bool:
        return self.as_json or self.as_struct

    def add_type(self, adds: pa.Schema) -> pa.StructType:
        fields = [f for f in adds if f.name != "stats" or self.keeps_stats]
        if self.as_struct:
            if self.partition_columns:
                fields.append(pa.field("partitionValues_parsed", self._partition_type()))
            fields.append(pa.field("stats_parsed", self._stats_type()))
        return pa.struct(fields)

    def add_struct(self, adds: pa.Table) -> pa.StructArray:
        """The add rows as checkpoint structs. A `KNOWN` column holds `stats_parsed` an old
        checkpoint already had for these rows: it is taken as is where its type is ours."""
        known = None
        if self.KNOWN in adds.column_names:
            known = adds[self.KNOWN]
            adds = adds.drop_columns([self.KNOWN])
        if not self.as_struct:
            return _struct(adds if self.keeps_stats else adds.drop_columns(["stats"]))
        stats = adds["stats"]
        parsed = self._stats_parsed(stats, known)
        if not self.as_json:
            unparsed = pc.and_(pc.is_valid(stats), pc.is_null(parsed))
            kept = pc.if_else(unparsed, stats, pa.scalar(None, pa.string()))
            adds = adds.set_column(adds.schema.get_field_index("stats"), "stats", kept)
        if self.partition_columns:
            pv = types.partition_values_parsed(
                adds["partitionValues"],
                self.schema_string,
                self.partition_columns,
                self.mapping_mode,
            )
            adds = adds.append_column("partitionValues_parsed", pv)
        return _struct(adds.append_column("stats_parsed", parsed))

    def _stats_parsed(self, stats: pa.ChunkedArray, known: pa.ChunkedArray | None) -> pa.Array:
        """`stats` parsed, except rows whose `known` value (of our exact type) can be kept:
        an old checkpoint's rows then cost a copy, not a JSON parse."""
        if known is None or known.type != self._stats_type():
            return self._parse(stats)
        known = known.combine_chunks()
        missing = pc.and_(pc.is_null(known), pc.is_valid(stats))
        if not pc.any(missing).as_py():
            return known
        fresh = self._parse(stats.filter(missing))
        # Row i comes from `known`, or from `fresh` at its rank among the missing rows.
        rank = pc.subtract(pc.cumulative_sum(pc.cast(missing, pa.int64())), 1)
        index = pc.if_else(missing, pc.add(rank, len(known)), pa.array(range(len(known))))
        return pa.concat_arrays([known, fresh]).take(index)

    def _parse(self, stats: pa.ChunkedArray) -> pa.Array:
        return types.stats_parsed(
            stats, self.schema_string, self.mapping_mode, self.partition_columns
        )

    def _partition_type(self) -> pa.DataType:
        empty = pa.array([], schema.STRING_MAP)
        return types.partition_values_parsed(
            empty, self.schema_string, self.partition_columns, self.mapping_mode
        ).type

    def _stats_type(self) -> pa.DataType:
        return types.stats_type(self.schema_string, self.mapping_mode, self.partition_columns)


# -- writing files -------------------------------------------------------------------------------


@dataclass
class _File:
    key: str
    body: bytes
    rows: int
    schema: pa.Schema
    mtime_ms: int = 0


UNIQUE_STRING_COLUMNS = frozenset({"add.path", "add.stats", "remove.path"})


def _leaf_columns(schema_: pa.Schema) -> list[str]:
    """Parquet column paths of an Arrow schema (maps as key_value, lists as list.element)."""

    def walk(name: str, typ: pa.DataType) -> list[str]:
        if pa.types.is_struct(typ):
            return [
                c
                for i in range(typ.num_fields)
                for c in walk(f"{name}.{typ.field(i).name}", typ.field(i).type)
            ]
        if pa.types.is_map(typ):
            return [
                *walk(f"{name}.key_value.key", typ.key_type),
                *walk(f"{name}.key_value.value", typ.item_type),
            ]
        if pa.types.is_list(typ):
            return walk(f"{name}.list.element", typ.value_type)
        return [name]

    return [c for f in schema_ for c in walk(f.name, f.type)]


class _ParquetBuffer:
    """One parquet file built in memory; row groups are cut every ROW_GROUP_ROWS rows."""

    def __init__(self, schema_: pa.Schema) -> None:
        self.schema = schema_
        self.sink = io.BytesIO()
        leaves = _leaf_columns(schema_)
        self.writer = pq.ParquetWriter(
            self.sink,
            schema_,
            compression="snappy",
            # Paths and stats JSON are unique per row: a dictionary attempt is wasted work,
            # and min/max of stats JSON help no reader.
            use_dictionary=[c for c in leaves if c not in UNIQUE_STRING_COLUMNS],
            write_statistics=[c for c in leaves if c != "add.stats"],
        )
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self.pending.append(table)
        self.pending_rows += table.num_rows
        self.rows += table.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        data = pa.concat_tables(self.pending) if self.pending else self.schema.empty_table()
        whole = data.num_rows if final else data.num_rows - data.num_rows % ROW_GROUP_ROWS
        for lo in range(0, whole, ROW_GROUP_ROWS):
            self.writer.write_table(data.slice(lo, min(ROW_GROUP_ROWS, whole - lo)))
        rest = data.slice(whole)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def finish(self) -> bytes:
        self._flush(final=True)
        self.writer.close()
        return self.sink.getvalue()


class _Writer:
    """Collects the files of one checkpoint, puts them (unless a dry run) and verifies them."""

    def __init__(self, table: Table, version: int, now_ms: int, dry_run: bool) -> None:
        self.table = table
        self.version = version
        self.now_ms = now_ms
        self.dry_run = dry_run
        self.files: list[_File] = []
        self.sidecars: list[_File] = []
        self.main_key = ""

    def put(
        self, key: str, buf: _ParquetBuffer, *, unique: bool = False, sidecar: bool = False
    ) -> _File:
        """Store a file; `unique` names (UUIDs) are created once, never replaced."""
        f = _File(key, buf.finish(), buf.rows, buf.schema, self.now_ms)
        if not self.dry_run:
            if unique:
                self.table.storage.put_if_absent(key, f.body)
            else:
                # Classic and multi-part names: the latest writer wins (spec). Parts are
                # deterministic, so a retry rewrites the same bytes.
                self.table.storage.overwrite(key, f.body)
            info = self.table.storage.head(key)
            f.mtime_ms = info.mtime_ms if info is not None else self.now_ms
        (self.sidecars if sidecar else self.files).append(f)
        return f

    @property
    def rows(self) -> int:
        return sum(f.rows for f in [*self.sidecars, *self.files])

    @property
    def size_bytes(self) -> int:
        return sum(len(f.body) for f in [*self.sidecars, *self.files])

    def verify(self) -> None:
        for f in [*self.sidecars, *self.files]:
            _verify(self.table, f)


def _table_schema(columns: list[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in columns])


def _header_columns(content: Content, kinds: list[str]) -> list[tuple[str, pa.DataType]]:
    """The non-file action columns of a checkpoint file, in a fixed order."""
    types_ = {
        "checkpointMetadata": CHECKPOINT_METADATA,
        "sidecar": SIDECAR,
        "protocol": PROTOCOL,
        "metaData": METADATA,
        "txn": TXN,
        "domainMetadata": DOMAIN,
    }
    present = {kind for kind, _ in content.header} | set(kinds)
    order = ["checkpointMetadata", "sidecar", "protocol", "metaData", "txn", "domainMetadata"]
    return [(k, types_[k]) for k in order if k in present]


def _rows_table(schema_: pa.Schema, rows: list[HeaderRow]) -> pa.Table:
    """Header rows as a table of `schema_`: each row fills its own column, the rest null."""
    arrays = [
        pa.array([body if kind == f.name else None for kind, body in rows], type=f.type)
        for f in schema_
    ]
    return pa.Table.from_arrays(arrays, schema=schema_)


def _batch_table(schema_: pa.Schema, batch: pa.RecordBatch) -> pa.Table:
    """A file-action batch widened to `schema_` (header columns all null)."""
    n = batch.num_rows
    arrays = [
        batch.column(f.name) if f.name in batch.schema.names else pa.nulls(n, f.type)
        for f in schema_
    ]
    return pa.Table.from_arrays(arrays, schema=schema_)


def _route(
    batches: Iterator[pa.RecordBatch],
    buffers: list[_ParquetBuffer],
    widen: Callable[[pa.RecordBatch], pa.Table],
) -> None:
    """Send each row to buffer pmod(hash(add.path or remove.path), n), as Delta Spark does."""
    n = len(buffers)
    for batch in batches:
        table = widen(batch)
        if n == 1:
            buffers[0].write(table)
            continue
        key = pc.coalesce(
            pc.struct_field(batch.column("add"), "path"),
            pc.struct_field(batch.column("remove"), "path"),
        )
        part = spark_hash.pmod(spark_hash.hash_strings(key), n)
        for p in pc.unique(part).to_pylist():
            buffers[p].write(table.filter(pc.equal(part, p)))


def _header_part(n: int) -> int:
    # Non-file actions have a null key, which Spark hashes to the seed.
    return spark_hash.SEED % n


def _write_classic(writer: _Writer, content: Content, n: int) -> None:
    """A classic file (n == 1) or n multi-part files, all with the same schema."""
    cols = _header_columns(content, ["protocol", "metaData", "txn"])
    schema_ = _table_schema([*cols, ("add", content.add_type), ("remove", content.remove_type)])
    buffers = [_ParquetBuffer(schema_) for _ in range(n)]
    buffers[_header_part(n)].write(_rows_table(schema_, content.header))
    _route(content.batches, buffers, lambda b: _batch_table(schema_, b))
    v = writer.version
    for i, buf in enumerate(buffers):
        name = paths.checkpoint(v) if n == 1 else paths.multipart_checkpoint(v, i + 1, n)
        writer.put(f"{paths.LOG_DIR}/{name}", buf)
    writer.main_key = writer.files[0].key


def _write_v2(writer: _Writer, content: Content, part_size: int) -> None:
    """Sidecars with the add/remove rows, then the UUID-named file that lists them."""
    n = _num_parts(content, part_size)
    file_schema = _table_schema([("add", content.add_type), ("remove", content.remove_type)])
    buffers = [_ParquetBuffer(file_schema) for _ in range(n)]
    _route(content.batches, buffers, lambda b: pa.Table.from_batches([b]))
    v = writer.version
    for i, buf in enumerate(buffers):
        name = f"{paths.version_prefix(v)}.checkpoint.{i + 1:010d}.{n:010d}.{uuid.uuid4()}.parquet"
        writer.put(f"{paths.LOG_DIR}/{paths.sidecar(name)}", buf, unique=True, sidecar=True)
    tags = {
        "sidecarNumActions": str(sum(f.rows for f in writer.sidecars)),
        "sidecarSizeInBytes": str(sum(len(f.body) for f in writer.sidecars)),
        "numOfAddFiles": str(content.num_adds),
    }
    header: list[HeaderRow] = [("checkpointMetadata", _checkpoint_metadata(v, tags))]
    header += [("sidecar", _sidecar_row(f)) for f in writer.sidecars]
    header += content.header
    content.header = header
    cols = _header_columns(content, ["protocol", "metaData", "txn"])
    # add/remove stay in the schema (all null) for readers that expect the columns.
    top_schema = _table_schema([*cols, ("add", content.add_type), ("remove", content.remove_type)])
    top = _ParquetBuffer(top_schema)
    top.write(_rows_table(top_schema, header))
    key = f"{paths.LOG_DIR}/{paths.uuid_checkpoint(v, str(uuid.uuid4()))}"
    writer.main_key = writer.put(key, top, unique=True).key


def _checkpoint_metadata(version: int, tags: dict[str, str]) -> dict[str, Any]:
    return {"version": version, "tags": tags}


def _sidecar_row(f: _File) -> dict[str, Any]:
    name = f.key.rsplit("/", 1)[-1]  # spec: store the name only
    return {"path": name, "sizeInBytes": len(f.body), "modificationTime": f.mtime_ms, "tags": None}


# -- verification and _last_checkpoint -----------------------------------------------------------


def _verify(table: Table, f: _File) -> None:
    """Read a written file back: same row count and schema, or it must not be used."""
    try:
        local = table.storage.local_path(f.key)
        source = local if local is not None else pa.BufferReader(table.storage.read(f.key))
        meta = pq.ParquetFile(source)
        ok = meta.metadata.num_rows == f.rows and meta.schema_arrow.equals(f.schema)
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(
            f"{table.uri}/{f.key}: checkpoint unreadable after writing: {e}; nothing points at "
            "it yet, so run the checkpoint again"
        ) from e
    if not ok:
        raise CorruptLogError(
            f"{table.uri}/{f.key}: checkpoint read back differs from what was written; nothing "
            "points at it yet, so run the checkpoint again"
        )


def _move_last_checkpoint(
    table: Table, version: int, writer: _Writer, content: Content, layout: Layout
) -> bool:
    current = table.read_hint().checkpoint
    if current is not None and current.version > version and _exists(table, current.version):
        return False  # never move backwards, unless the newer one it names is gone
    fields: dict[str, Any] = {
        "version": version,
        "size": writer.rows,
        "parts": len(writer.files) if layout is Layout.MULTIPART else None,
        "sizeInBytes": writer.size_bytes,
        "numOfAddFiles": content.num_adds,
    }
    if layout is Layout.V2:
        fields["v2Checkpoint"] = _v2_info(writer, content.header)
    body = last_checkpoint.serialize(fields)
    table.storage.overwrite(f"{paths.LOG_DIR}/{paths.LAST_CHECKPOINT}", body)
    return True


def _exists(table: Table, version: int) -> bool:
    return version in table.list_log(version).checkpoints


def _v2_info(writer: _Writer, header: list[HeaderRow]) -> dict[str, Any]:
    """The `v2Checkpoint` entry of `_last_checkpoint`, as Delta Spark writes it; the embedded
    lists are left out when long, and then readers read the V2 file itself."""
    top = writer.files[-1]
    info: dict[str, Any] = {
        "path": top.key.rsplit("/", 1)[-1],
        "sizeInBytes": len(top.body),
        "modificationTime": top.mtime_ms,
    }
    actions = [{kind: _json_value(body)} for kind, body in header if kind != "sidecar"]
    if len(actions) <= LAST_CHECKPOINT_LIST_LIMIT:
        info["nonFileActions"] = actions
    if len(writer.sidecars) <= LAST_CHECKPOINT_LIST_LIMIT:
        info["sidecarFiles"] = [_json_value(_sidecar_row(f)) for f in writer.sidecars]
    return info


def _json_value(value: Any) -> Any:
    """A header row as JSON for `_last_checkpoint`: null fields left out."""
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_json_value(x) for x in value]
    return value
