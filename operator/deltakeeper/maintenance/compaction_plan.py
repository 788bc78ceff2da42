"""Which partitions of a table need compaction, and why: planned from the file actions alone.

Delta's own OPTIMIZE rewrites every file under `minFileSize` (default 1 GiB) on every run, so a
table compacted to 128 MiB files is rewritten whole again and again. Here a file is small below
`min_file_size` (half the target by default), and a partition is due only when its small files
are worth a job: at least `min_files_per_partition` of them (Delta's auto compaction uses 50),
or more than one with the oldest older than `max_age_ms`, or a file whose deletion vector hides
more than `max_deleted_rows_ratio` of its rows. A partition due only for deleted rows is purged
(REORG ... APPLY (PURGE)) rather than bin-packed: OPTIMIZE drops single-file bins, so a lone file
full of deleted rows would never be rewritten.

Everything is computed with Arrow over the snapshot's file table; no Python object per file.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.compaction.launcher import Planned
from deltakeeper.delta import features, schema
from deltakeeper.delta.errors import MissingLogFileError, UnsupportedProtocolError
from deltakeeper.delta.log.json_files import read_actions
from deltakeeper.delta.paths import LOG_DIR, commit
from deltakeeper.delta.snapshot import Metadata, Snapshot
from deltakeeper.delta.table import Table
from deltakeeper.delta.types import arrow_type, field_name, map_values, mapping_on, schema_fields
from deltakeeper.maintenance.policy import (
    COMPACTION_SNAPSHOT_ACTIONS_PER_PARTITION,
    COMPACTION_SNAPSHOT_PARTITIONS_MAX,
    CompactionSettings,
)


class Why(enum.StrEnum):
    MANY_SMALL_FILES = "many-small-files"
    SMALL_FILES_AGED = "small-files-aged"
    DELETED_ROWS = "deleted-rows"


@dataclass(frozen=True)
class PartitionPlan:
    values: dict[str, str | None]  # partition column (as in the log) -> serialized value
    why: Why
    files: int  # files the job rewrites: the small ones, or the ones with many deleted rows
    bytes: int
    expected_files: int  # files after: the rewritten bytes in target-sized files
    oldest_ms: int | None  # modification time of the oldest small file

    @property
    def purge_only(self) -> bool:
        return self.why is Why.DELETED_ROWS

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.values,
            "why": str(self.why),
            "files": self.files,
            "bytes": self.bytes,
            "expectedFiles": self.expected_files,
            "oldestSmallFileMs": self.oldest_ms,
        }


@dataclass(frozen=True)
class CompactionPlan:
    settings: CompactionSettings
    partitions: tuple[PartitionPlan, ...]
    small_files: int  # in the whole table, due or not
    partitions_scanned: int

    @property
    def due(self) -> bool:
        return bool(self.partitions)

    @property
    def files(self) -> int:
        return sum(p.files for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def expected_files(self) -> int:
        return sum(p.expected_files for p in self.partitions)

    def reason(self) -> str:
        if not self.partitions:
            return (
                f"no partition is due ({self.small_files} small files in "
                f"{self.partitions_scanned} partitions)"
            )
        purge = sum(p.purge_only for p in self.partitions)
        return (
            f"{len(self.partitions) - purge} partitions to compact, {purge} to purge: "
            f"{self.files} files, {self.bytes} bytes -> about {self.expected_files} files"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason(),
            "files": self.files,
            "bytes": self.bytes,
            "expectedFiles": self.expected_files,
            "smallFiles": self.small_files,
            "partitionsScanned": self.partitions_scanned,
            "partitions": [p.to_json() for p in self.partitions],
        }


def plan(
    files: pa.Table,
    partition_columns: tuple[str, ...],
    settings: CompactionSettings,
    now_ms: int,
    timestamps: frozenset[str] = frozenset(),
) -> CompactionPlan:
    """`files` is a snapshot's file table (path, partitionValues, size, modificationTime,
    deletionVector, and `stats` when deleted-row ratios should be exact); `timestamps` names
    the partition columns of type timestamp (see `timestamp_partitions`)."""
    grouped = _per_partition(files, partition_columns, settings, timestamps)
    found = [
        p for row in grouped.to_pylist() if (p := _decide(row, partition_columns, settings, now_ms))
    ]
    found.sort(key=lambda p: (p.purge_only, -p.files))
    small = int(pc.sum(grouped["small"]).as_py() or 0) if grouped.num_rows else 0
    return CompactionPlan(settings, tuple(found), small, grouped.num_rows)


def _per_partition(
    files: pa.Table,
    partition_columns: tuple[str, ...],
    settings: CompactionSettings,
    timestamps: frozenset[str],
) -> pa.Table:
    size = files["size"]
    is_small = pc.less(size, settings.small_below)
    heavy = _many_deleted_rows(files, settings.max_deleted_rows_ratio)
    columns: dict[str, Any] = {}
    for i, name in enumerate(partition_columns):
        value = _partition_value(files, name)
        columns[f"p{i}"] = _one_spelling(value) if name in timestamps else value
    columns.update(
        small=pc.cast(is_small, pa.int64()),
        small_bytes=pc.if_else(is_small, size, 0),
        small_mtime=pc.if_else(is_small, files["modificationTime"], None),
        heavy=pc.cast(heavy, pa.int64()),
        heavy_bytes=pc.if_else(heavy, size, 0),
    )
    table = pa.table(columns)
    keys = [f"p{i}" for i in range(len(partition_columns))]
    return (
        table.group_by(keys)
        .aggregate(
            [
                ("small", "sum"),
                ("small_bytes", "sum"),
                ("small_mtime", "min"),
                ("heavy", "sum"),
                ("heavy_bytes", "sum"),
            ]
        )
        .rename_columns([*keys, "small", "small_bytes", "oldest", "heavy", "heavy_bytes"])
    )


def _partition_value(files: pa.Table, name: str) -> pa.Array:
    """The serialized value of one partition column; the protocol reads "" as null."""
    value = map_values(files["partitionValues"], name)
    return pc.if_else(pc.equal(value, ""), pa.scalar(None, pa.string()), value)


def _one_spelling(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Timestamp partition values in one spelling, so one partition is one group: delta-rs
    writes `2024-02-29 12:30:01.123456`, Delta Spark `2024-02-29T12:30:01.123456Z` (both UTC).
    Values that are neither are left as written."""
    try:
        instants = pc.cast(pc.replace_substring_regex(values, "Z$", ""), pa.timestamp("us"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return values
    return pc.strftime(instants, format="%Y-%m-%d %H:%M:%S")


def _many_deleted_rows(files: pa.Table, ratio: float) -> pa.Array:
    """Files whose deletion vector hides more than `ratio` of their rows. A file with a deletion
    vector but no record count in its stats counts too, as in Delta's OPTIMIZE. Stats are parsed
    for the files with a deletion vector only."""
    if "deletionVector" not in files.column_names or not files.num_rows:
        return pa.array([False] * files.num_rows, pa.bool_())
    deleted = pc.struct_field(files["deletionVector"], "cardinality").combine_chunks()
    has_dv = pc.fill_null(pc.greater(deleted, 0), False)
    if "stats" not in files.column_names or not pc.any(has_dv).as_py():
        return has_dv
    records = pc.cast(schema.records_from_stats(pc.filter(files["stats"], has_dv)), pa.float64())
    records = pc.if_else(pc.greater(records, 0), records, None)  # 0 rows: no count either
    ratios = pc.divide(pc.cast(pc.filter(deleted, has_dv), pa.float64()), records)
    over = pc.fill_null(pc.greater(ratios, ratio), True)
    return pc.replace_with_mask(has_dv, has_dv, over)


def _decide(
    row: dict[str, Any],
    partition_columns: tuple[str, ...],
    settings: CompactionSettings,
    now_ms: int,
) -> PartitionPlan | None:
    values = {name: row[f"p{i}"] for i, name in enumerate(partition_columns)}
    small, oldest = int(row["small"] or 0), row["oldest"]
    why = None
    if small >= settings.min_files_per_partition:
        why = Why.MANY_SMALL_FILES
    elif small > 1 and oldest is not None and now_ms - oldest >= settings.max_age_ms:
        why = Why.SMALL_FILES_AGED
    if why is not None:
        files, size = small, int(row["small_bytes"] or 0)
    elif row["heavy"]:
        why, files, size = Why.DELETED_ROWS, int(row["heavy"]), int(row["heavy_bytes"] or 0)
    else:
        return None
    expected = max(1, math.ceil(size / settings.target_file_size))
    return PartitionPlan(values, why, files, size, expected, oldest)


def job_spec(
    found: CompactionPlan,
    logical_names: dict[str, str],
    job_id: str,
    planned_version: int,
    partition_types: dict[str, str] | None = None,
    snapshot_actions: int | None = None,
) -> dict[str, Any]:
    """The compaction job's input for a plan. Spark's predicates name logical columns while
    the log keys partition values by physical name under column mapping: `logical_names`
    maps one to the other (identity without column mapping). `partition_types` (logical
    column -> Spark SQL type, from `spark_partition_types`) spares the job asking Spark;
    `snapshot_actions` (the snapshot's files and tombstones) sizes its log replay."""

    def logical(values: dict[str, str | None]) -> dict[str, str | None]:
        return {logical_names.get(k, k): v for k, v in values.items()}

    settings = found.settings
    spec: dict[str, Any] = {
        "jobId": job_id,
        "plannedVersion": planned_version,
        "compact": [logical(p.values) for p in found.partitions if not p.purge_only],
        "purge": [logical(p.values) for p in found.partitions if p.purge_only],
        "minFileSize": settings.small_below,
        "maxFileSize": settings.target_file_size,
        "maxDeletedRowsRatio": settings.max_deleted_rows_ratio,
    }
    if partition_types is not None:
        spec["partitionTypes"] = dict(partition_types)
    if snapshot_actions is not None:
        spec["snapshotPartitions"] = snapshot_partitions(snapshot_actions)
    if settings.z_order_by:
        spec["zOrderBy"] = list(settings.z_order_by)
    if settings.max_threads is not None:
        spec["maxThreads"] = settings.max_threads
    return spec


def snapshot_partitions(actions: int) -> int:
    """Spark's partitions for replaying a log of this many file actions."""
    wanted = math.ceil(actions / COMPACTION_SNAPSHOT_ACTIONS_PER_PARTITION)
    return min(max(1, wanted), COMPACTION_SNAPSHOT_PARTITIONS_MAX)


def partition_names(
    schema_string: str, partition_columns: tuple[str, ...], mapping_mode: str | None
) -> dict[str, str]:
    """Physical name (the key in partitionValues) -> logical name, for each partition column."""
    physical = mapping_on(mapping_mode)
    fields = {str(f["name"]): field_name(f, physical) for f in schema_fields(schema_string)}
    return {fields.get(c, c): c for c in partition_columns}


# Delta schema type -> the name Spark SQL gives it (DataType.simpleString), for CAST.
SPARK_SQL_TYPES = {
    "string": "string",
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}


def spark_partition_types(meta: Metadata) -> dict[str, str] | None:
    """Each partition column (as the metadata names it) -> its Spark SQL type, or None when
    one of them has a type this table cannot say for sure (the job then asks Spark)."""
    fields = {str(f["name"]): f for f in schema_fields(meta.schema_string)}
    lower = {name.lower(): f for name, f in fields.items()}
    out = {}
    for column in meta.partition_columns:
        found = fields.get(column) or lower.get(column.lower())
        kind = found.get("type") if found else None
        sql = _spark_sql_type(kind) if isinstance(kind, str) else None
        if sql is None:
            return None
        out[column] = sql
    return out


def _spark_sql_type(delta_type: str) -> str | None:
    if delta_type.startswith("decimal"):
        try:
            arrow = arrow_type(delta_type)
        except UnsupportedProtocolError:
            return None
        return f"decimal({arrow.precision},{arrow.scale})"
    return SPARK_SQL_TYPES.get(delta_type)


def refusal(snap: Snapshot) -> str | None:
    """Why this table must not be compacted, or None. Spark would write the commit, but a
    feature this build does not know may change what a correct plan is."""
    return features.refusal(snap.protocol, "compaction")


def timestamp_partitions(meta: Metadata) -> frozenset[str]:
    """The partition columns (as keyed in the log) of type timestamp."""
    physical = mapping_on(meta.properties.column_mapping_mode)
    return frozenset(
        field_name(f, physical)
        for f in schema_fields(meta.schema_string)
        if f.get("type") == "timestamp" and f.get("name") in meta.partition_columns
    )


def logical_partition_names(meta: Metadata) -> dict[str, str]:
    return partition_names(
        meta.schema_string, meta.partition_columns, meta.properties.column_mapping_mode
    )


def only_where(
    files: pa.Table, values: dict[str, str], timestamps: frozenset[str] = frozenset()
) -> pa.Table:
    """The files of the partitions whose serialized values equal `values` (physical names).
    A timestamp column (`timestamps`) also matches the same instant spelled the other way,
    as the planner groups them."""
    for name, value in values.items():
        column = _partition_value(files, name)
        match = pc.equal(column, value)
        if name in timestamps:
            wanted = _one_spelling(pa.chunked_array([[value]], pa.string()))[0]
            match = pc.or_(match, pc.equal(_one_spelling(column), wanted))
        files = files.filter(pc.fill_null(match, False))
    return files


def job_id(table_id: str, now_ms: int) -> str:
    return f"deltakeeper-{table_id[:8]}-{now_ms}"


@dataclass(frozen=True)
class Compacted:
    """What a job's commits did, read from the table's own log."""

    job_id: str
    versions: tuple[int, ...]
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    rows_deleted: int = 0  # a DELETE's: its commitInfo's numDeletedRows

    def to_json(self) -> dict[str, Any]:
        return {
            "jobId": self.job_id,
            "versions": list(self.versions),
            "filesRemoved": self.files_removed,
            "filesAdded": self.files_added,
            "bytesRemoved": self.bytes_removed,
            "bytesAdded": self.bytes_added,
        }


def commits_after(table: Table, version: int) -> list[int]:
    """The versions committed after `version`, as the log lists them now."""
    return sorted(v for v in table.list_log(version + 1).commits if v > version)


def job_commits(table: Table, tag: str, line: Mapping[str, Any]) -> tuple[Compacted, list[int]]:
    """A finished job's commits read back from the log, and the versions it reported: those
    its JSON line names, or, from a launcher that cannot see its output (SparkApplication),
    every commit after the version it started at (the log tells which are its)."""
    if "commits" in line:
        reported = [int(c["version"]) for c in line["commits"] or []]
        return read_back(table, tag, reported), reported
    since = int(line.get("startVersion") or 0)
    back = read_back(table, tag, commits_after(table, since))
    return back, list(back.versions)


def not_in_log(back: Compacted, reported: list[int]) -> str | None:
    """Why a job's line is not believed: it reported commits the log has none of its own at
    (None: every one is there)."""
    if len(back.versions) == len(reported):
        return None
    missing = sorted(set(reported) - set(back.versions))
    return f"the job reported commits at {missing}, but the log has none of {back.job_id} there"


def read_back(table: Table, tag: str, versions: list[int]) -> Compacted:
    """Count the adds and removes of the commits at `versions` (as the job reported them)
    whose commitInfo.userMetadata is the job id `tag`; a version without the tag (or gone) is
    not the job's and counts nothing."""
    counts = [0, 0, 0, 0]
    ours, deleted = [], 0
    for version in versions:
        try:
            actions = [a for _, a in read_actions(table.storage, f"{LOG_DIR}/{commit(version)}")]
        except MissingLogFileError:
            continue
        info: Any = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if not isinstance(info, dict) or info.get("userMetadata") != tag:
            continue
        ours.append(version)
        metrics = info.get("operationMetrics")
        if isinstance(metrics, dict):
            deleted += int(metrics.get("numDeletedRows") or 0)
        for a in actions:
            for index, kind in ((0, "remove"), (1, "add")):
                if isinstance(a.get(kind), dict):
                    counts[index] += 1
                    counts[index + 2] += int(a[kind].get("size") or 0)
    removed, added, bytes_removed, bytes_added = counts
    return Compacted(tag, tuple(ours), removed, added, bytes_removed, bytes_added, deleted)


def planned_from_spec(snap: Snapshot, spec: Mapping[str, Any]) -> Planned:
    """The files and bytes a job's input asks it to rewrite, counted again from the table at
    the job's planned version: the small files of the partitions it compacts and the files with
    many deleted rows of those it purges. For a job that did not record them (one started by
    an older deltakeeper, adopted after a restart)."""
    meta = snap.metadata
    physical = {v: k for k, v in logical_partition_names(meta).items()}
    timestamps = timestamp_partitions(meta)
    settings = CompactionSettings(
        min_file_size=int(spec.get("minFileSize") or 1),
        max_deleted_rows_ratio=float(spec.get("maxDeletedRowsRatio") or 0.0),
    )
    files = bytes_ = 0
    for key, small in (("compact", True), ("purge", False)):
        for values in spec.get(key) or []:
            named = {physical.get(k, k): v for k, v in values.items() if v is not None}
            part = only_where(snap.files, named, timestamps)
            if small:
                chosen = pc.less(part["size"], settings.small_below)
            else:
                chosen = _many_deleted_rows(part, settings.max_deleted_rows_ratio)
            files += int(pc.sum(pc.cast(chosen, pa.int64())).as_py() or 0)
            bytes_ += int(pc.sum(pc.if_else(chosen, part["size"], 0)).as_py() or 0)
    return Planned(files, bytes_)
