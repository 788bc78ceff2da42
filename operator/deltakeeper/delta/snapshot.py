"""Snapshot: the state of a table at one version, with file actions held as Arrow tables."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.delta.features import Protocol, unsupported_reader, unsupported_writer
from deltakeeper.delta.log.segment import LogSegment
from deltakeeper.delta.properties import TableProperties

_NONE: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Metadata:
    id: str
    name: str | None
    description: str | None
    provider: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    created_time: int | None
    # The format's options, the one part of the action not above (the action itself is not
    # kept: a daemon holds a Metadata per table).
    format_options: Mapping[str, Any] = field(
        compare=False, repr=False, default_factory=lambda: _NONE
    )

    @classmethod
    def from_action(cls, a: dict[str, Any]) -> Metadata:
        fmt = a.get("format") or {}
        return cls(
            id=str(a.get("id")),
            name=a.get("name"),
            description=a.get("description"),
            provider=str(fmt.get("provider") or "parquet"),
            schema_string=str(a.get("schemaString") or ""),
            partition_columns=tuple(a.get("partitionColumns") or ()),
            configuration={str(k): str(v) for k, v in (a.get("configuration") or {}).items()},
            created_time=a.get("createdTime"),
            format_options=dict(fmt.get("options") or {}) or _NONE,
        )

    @property
    def properties(self) -> TableProperties:
        return TableProperties(self.configuration)

    def action(self) -> dict[str, Any]:
        """The metaData action with every field, defaults filled in (what writers write back)."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "format": {"provider": self.provider, "options": dict(self.format_options)},
            "schemaString": self.schema_string,
            "partitionColumns": list(self.partition_columns),
            "configuration": dict(self.configuration),
            "createdTime": self.created_time,
        }


@dataclass(frozen=True)
class DamagedCheckpoint:
    """A checkpoint the reader could not read and read past (an older one, or the commits)."""

    version: int
    keys: tuple[str, ...]
    error: str

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "files": list(self.keys), "error": self.error}


@dataclass(frozen=True)
class FileActions:
    """A snapshot's file actions as Arrow tables: live adds, one row per logical file, and the
    removes not yet expired from the log's point of view."""

    adds: pa.Table
    tombstones: pa.Table


def in_commit_timestamps(protocol: Protocol, metadata: Metadata) -> bool:
    return protocol.has("inCommitTimestamp") and metadata.properties.in_commit_timestamps


@dataclass(frozen=True, kw_only=True)
class SnapshotHeader:
    """The state of a table at one version, without its file actions: what a checkpoint
    streamed from an older one needs, and what every Snapshot has."""

    uri: str
    version: int
    timestamp_ms: int
    protocol: Protocol
    metadata: Metadata
    txns: dict[str, dict[str, Any]]
    domains: dict[str, dict[str, Any]]  # live domains only (removed ones dropped)
    segment: LogSegment
    commit_info: dict[str, Any] | None = None
    damaged_checkpoints: tuple[DamagedCheckpoint, ...] = ()

    def damage_note(self) -> str | None:
        """What the reader read past, and what it used instead; None when nothing."""
        if not self.damaged_checkpoints:
            return None
        names = ", ".join(f"{d.keys[0]} ({d.error})" for d in self.damaged_checkpoints)
        cp = self.segment.checkpoint
        used = f"the checkpoint at version {cp.version}" if cp else "the commits alone"
        return (
            f"damaged checkpoint {names} read past: read {used} instead; run `deltakeeper "
            "checkpoint` (or maintain) to rewrite it"
        )

    def header_fields(self) -> dict[str, Any]:
        """This header's fields by name: what a Snapshot or a held one is built from."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(SnapshotHeader)}

    @property
    def in_commit_timestamps(self) -> bool:
        return in_commit_timestamps(self.protocol, self.metadata)

    @property
    def commits_since_checkpoint(self) -> int:
        """The commits a reader replays after the newest checkpoint (all of them without one)."""
        cp = self.segment.checkpoint
        return self.version - cp.version if cp is not None else self.version + 1

    @property
    def unsupported_reader_features(self) -> list[str]:
        return unsupported_reader(self.protocol)

    @functools.cached_property
    def unsupported_features(self) -> list[str]:
        """Everything that stops deltakeeper from writing to this table (asked every poll)."""
        return unsupported_writer(self.protocol)


@dataclass(frozen=True, kw_only=True)
class Snapshot(SnapshotHeader):
    """A table at one version with its file actions."""

    file_actions: FileActions

    @classmethod
    def of(cls, header: SnapshotHeader, file_actions: FileActions) -> Snapshot:
        return cls(**header.header_fields(), file_actions=file_actions)

    def with_adds(self, adds: pa.Table) -> Snapshot:
        """This snapshot with other add rows (the same files, e.g. with stats filled in)."""
        return dataclasses.replace(
            self, file_actions=dataclasses.replace(self.file_actions, adds=adds)
        )

    @property
    def files(self) -> pa.Table:
        return self.file_actions.adds

    @property
    def tombstones(self) -> pa.Table:
        return self.file_actions.tombstones

    @property
    def num_files(self) -> int:
        return self.files.num_rows

    @property
    def size_bytes(self) -> int:
        total = pc.sum(self.files["size"]).as_py() if self.files.num_rows else 0
        return int(total or 0)

    @property
    def num_tombstones(self) -> int:
        return self.tombstones.num_rows

    def small_files(self, threshold_bytes: int) -> SmallFiles:
        """The live files below `threshold_bytes`."""
        cols = self.files.select(["size", "partitionValues"])
        smalls = cols.filter(pc.less(cols["size"], threshold_bytes))
        return SmallFiles.of(smalls["size"], partition_names(smalls), threshold_bytes)

    def expired_tombstones(self, before_ms: int) -> tuple[int, int]:
        """Tombstones deleted before `before_ms` whose file no live file still uses (a
        deletion vector update removes and adds the same file): how many, and their bytes (a
        remove without a size counts 0). What a vacuum would delete of the files the log names."""
        t = self.tombstones
        old = t.filter(expired(t["deletionTimestamp"], before_ms))
        if not old.num_rows:
            return 0, 0
        paths = old["path"].combine_chunks()  # the few old paths are the set looked up
        live = self.files["path"]
        used = live.filter(pc.is_in(live, value_set=paths)).combine_chunks()
        gone = old.filter(pc.invert(pc.is_in(paths, value_set=used)))
        return gone.num_rows, int(pc.sum(gone["size"]).as_py() or 0)

    def next_deletion(self, from_ms: int) -> int | None:
        """The earliest tombstone deletion time at or after `from_ms` (None: none)."""
        return earliest(self.tombstones["deletionTimestamp"], from_ms)

    def record_counts(self) -> RecordCounts | None:
        """The files' records and deleted rows; None when read without record counts."""
        f = self.files
        if "numRecords" not in f.column_names:
            return None
        if not f.num_rows:
            return RecordCounts(0, 0, 0)
        counted = pc.is_valid(f["numRecords"])
        cardinality = pc.fill_null(pc.struct_field(f["deletionVector"], "cardinality"), 0)
        deleted = pc.if_else(counted, cardinality, 0)  # of files whose records are counted
        return RecordCounts(
            records=int(pc.sum(f["numRecords"]).as_py() or 0),
            deleted=int(pc.sum(deleted).as_py() or 0),
            without=f["numRecords"].null_count,
        )


@dataclass(frozen=True)
class RecordCounts:
    """What the files' statistics say: records in the files that have a count, rows their
    deletion vectors hide, and the files without a count."""

    records: int
    deleted: int
    without: int


@dataclass(frozen=True)
class SmallFiles:
    """Live files below a size: how many, their bytes, and how many of them compacting each
    partition's would remove (its small files less the files their bytes fill at that size, at
    least one)."""

    files: int
    bytes: int
    removable: int

    @classmethod
    def of(
        cls, sizes: pa.ChunkedArray | pa.Array, partitions: pa.Array, threshold: int
    ) -> SmallFiles:
        """From the small files' sizes and partitions (any type naming each partition)."""
        total = int(pc.sum(sizes).as_py() or 0) if len(sizes) else 0
        return cls(len(sizes), total, small_excess(partitions, sizes, threshold))


def partition_names(adds: pa.Table) -> pa.Array:
    """Per file, one string naming its partition: its partitionValues' keys and values joined
    in the order written ("" unpartitioned). Writers write them in one order (the partition
    columns'), so a partition's files get one name."""
    if not adds.num_rows:
        return pa.array([], pa.string())
    pv = adds["partitionValues"].combine_chunks()
    # NUL, STX and SOH cannot be in a name or value read from JSON text: separators and null.
    pairs = pc.binary_join_element_wise(
        pv.keys, pv.items, "\x02", null_handling="replace", null_replacement="\x01"
    )
    rows = pa.ListArray.from_arrays(pv.offsets, pairs)
    return pc.fill_null(pc.binary_join(rows, "\x00"), "")


def small_excess(
    partitions: pa.Array | pa.ChunkedArray, sizes: pa.Array | pa.ChunkedArray, threshold: int
) -> int:
    """Of small files (below `threshold`) in these partitions, those a compaction would remove:
    in each partition, its small files less the files their bytes fill at the threshold (at
    least one)."""
    if not len(sizes):
        return 0
    if len(sizes) <= _FEW:  # Arrow's grouping costs milliseconds before it starts
        groups: dict[object, list[int]] = {}
        for p, size in zip(partitions.to_pylist(), sizes.to_pylist(), strict=True):
            groups.setdefault(p, []).append(size or 0)
        return sum(len(g) - max(1, -(-sum(g) // threshold)) for g in groups.values())
    table = pa.table({"p": partitions, "s": sizes})
    grouped = table.group_by("p").aggregate([("s", "count"), ("s", "sum")])
    fill = pc.max_element_wise(pc.ceil(pc.divide(grouped["s_sum"], float(threshold))), 1)
    return int(pc.sum(pc.subtract(grouped["s_count"], pc.cast(fill, pa.int64()))).as_py())


_FEW = 1000


def earliest(times: pa.Array | pa.ChunkedArray, from_ms: int) -> int | None:
    """The smallest of `times` at or after `from_ms`; None when there is none."""
    if not len(times):
        return None
    later = pc.filter(times, pc.fill_null(pc.greater_equal(times, from_ms), False))
    return pc.min(later).as_py() if len(later) else None


def expired(deleted_ms: pa.Array | pa.ChunkedArray, before_ms: int) -> pa.Array:
    """Which tombstones with these deletion times were deleted before `before_ms` (a remove
    without a deletion time has expired, as in Delta's vacuum)."""
    if not len(deleted_ms):
        return pa.array([], pa.bool_())
    return pc.fill_null(pc.less(deleted_ms, before_ms), True)
