"""COMPUTE STATS: give every live file the statistics the table asks for, as Delta Spark's
`StatisticsCollection.recompute` does, without Spark.

A file needs statistics when its `stats` are missing, lack `numRecords`, or lack a `nullCount`
for a column the table now indexes (`dataSkippingNumIndexedCols` or `dataSkippingStatsColumns`
changed since it was written). Each such file's footer is read with ranged reads (footer only);
a column the footer cannot describe is read from its column chunks, up to `max_data_bytes` a
run (the files past it wait for the next run). Files with deletion vectors are left alone:
their statistics describe rows the vector hides, and Delta Spark does not recompute them.

The files are re-added with `dataChange=false` and their new `stats`, every other field kept,
through the one commit writer, `batch` files a commit, operation `COMPUTE STATS`. A file a
concurrent commit removed is dropped from the batch, never resurrected.

A watcher that knows every live file had its statistics at some version passes it (`since`)
with the snapshot header it holds: then only the adds of the commits after it are looked at,
so a busy big table does not load every file's statistics at each new version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow.parquet as pq

from deltakeeper.delta import schema
from deltakeeper.delta.commit import Change, commit
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.features import require_writable
from deltakeeper.delta.log import json_files
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.stats import file
from deltakeeper.delta.stats.file import FileStats, StatsSpec
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum.plan import candidate_key, table_root

OPERATION = "COMPUTE STATS"
# Files re-added per commit: a few MiB of JSON each, so a big table gets a few versions, not
# hundreds (each new version moves the checkpoint interval on); Delta Spark makes one commit.
BATCH = 10_000
MAX_DATA_BYTES = 256 * 2**20  # column chunk bytes read a run where footers cannot say
READERS = 16  # footers read at once (object-store latency, not CPU, bounds them)


@dataclass
class StatsRun:
    """What a run found and did."""

    version: int
    files: int = 0  # live files (with `since`: the live files the later commits added)
    since: int | None = None  # only the commits after this version were looked at
    missing: int = 0  # without the statistics the table asks for
    given: int = 0  # re-added with statistics (or would be, on a dry run)
    deletion_vectors: int = 0  # left alone: they carry a deletion vector
    deferred: int = 0  # left for a later run: their data read would pass the budget
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    data_bytes: int = 0  # column chunk bytes read
    commits: list[int] = field(default_factory=list)
    dropped: int = 0  # removed by a concurrent commit before ours landed

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "since": self.since,
            "files": self.files,
            "missingStats": self.missing,
            "givenStats": self.given,
            "deletionVectors": self.deletion_vectors,
            "deferred": self.deferred,
            "unreadable": [{"path": p, "error": e} for p, e in self.unreadable],
            "dataBytesRead": self.data_bytes,
            "commits": self.commits,
            "dropped": self.dropped,
        }


def _require_json_stats(snap: Snapshot) -> None:
    if snap.segment.checkpoint is not None and not snap.metadata.properties.write_stats_as_json:
        raise InvalidInputError(
            f"{snap.uri}: its checkpoints keep statistics only as stats_parsed "
            "(delta.checkpoint.writeStatsAsJson=false), which this build does not read back; "
            "compute-stats would take every file in the checkpoint for one without statistics"
        )


def _added_since(table: Table, base: SnapshotHeader, since: int) -> list[dict[str, Any]] | None:
    """The adds of the commits after `since` up to `base` that are still live at `base`, in
    the log's order; None when every live file must be looked at: a commit in between is
    gone, or one changed the metadata or protocol (the columns to index, tight bounds)."""
    if since > base.version:
        return None
    listing = table.list_log(since + 1)
    live: dict[str, dict[str, Any]] = {}
    for version in range(since + 1, base.version + 1):
        entry = listing.commits.get(version)
        if entry is None:
            return None
        for _, action in json_files.read_actions(table.storage, entry.key):
            if "metaData" in action or "protocol" in action:
                return None
            if "add" in action:
                live.pop(action["add"]["path"], None)  # re-added: the newest add counts
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def spec_of(snap: SnapshotHeader, columns: str | None = None) -> StatsSpec:
    meta = snap.metadata
    return file.spec_for(
        meta.schema_string,
        meta.configuration,
        meta.partition_columns,
        meta.properties.column_mapping_mode,
        tight_bounds="deletionVectors" in snap.protocol.writer_feature_set(),
        columns=columns,
    )


def compute_stats(
    table: Table,
    dry_run: bool = False,
    columns: str | None = None,
    max_data_bytes: int = MAX_DATA_BYTES,
    batch: int = BATCH,
    progress: Callable[[int, int], None] | None = None,
    now_ms: int | None = None,
    base: SnapshotHeader | None = None,
    since: int | None = None,
) -> StatsRun:
    """Compute and commit the missing statistics of `table`'s live files; with `base` and
    `since`, of the live files that the commits after `since`, up to `base`, added."""
    recent = _added_since(table, base, since) if base is not None and since is not None else None
    if base is not None and recent is not None:
        require_writable(base, "commit")
        snap: SnapshotHeader = base
        run = StatsRun(base.version, files=len(recent), since=since)
    else:
        full = table.snapshot(add_cols=schema.FULL_ADD)
        require_writable(full, "commit")
        _require_json_stats(full)
        snap, run, recent = full, StatsRun(full.version, files=full.num_files), None
    spec = spec_of(snap, columns)
    todo = []
    for add in recent if recent is not None else full.files.to_pylist():
        if add.get("deletionVector"):
            run.deletion_vectors += 1
        elif not spec.complete(add.get("stats")):
            todo.append(add)
    run.missing = len(todo)
    adds = _computed(table, spec, todo, max_data_bytes, run, progress)
    run.given = len(adds)
    if dry_run:
        return run
    at: SnapshotHeader = snap
    for start in range(0, len(adds), batch):
        chunk = adds[start : start + batch]
        change = Change(
            OPERATION,
            tuple({"add": a} for a in chunk),
            parameters={"predicate": '["true"]'},
            metrics={"numFiles": len(chunk)},
            reads=frozenset(a["path"] for a in chunk),
            droppable=True,
        )
        done = commit(table, at, change, now_ms)
        run.dropped += len(done.dropped)
        run.given -= len(done.dropped)
        if done.version is not None:  # the next batch starts from ours: no race with itself
            run.commits.append(done.version)
            at = replace(
                at, version=done.version, timestamp_ms=done.timestamp_ms or at.timestamp_ms
            )
    return run


def _computed(
    table: Table,
    spec: StatsSpec,
    todo: list[dict[str, Any]],
    max_data_bytes: int,
    run: StatsRun,
    progress: Callable[[int, int], None] | None,
) -> list[dict[str, Any]]:
    """The re-adds, in the log's order; files whose data read would pass the budget wait."""
    root = table_root(table.storage)
    lock = threading.Lock()
    budget = [max_data_bytes]
    finished = [0]

    def one(add: dict[str, Any]) -> dict[str, Any] | None:
        try:
            key = candidate_key(add["path"], root)
            if key is None:
                raise ValueError("the file lies outside the table's root")
            pf = pq.ParquetFile(table.storage.open_input(key, add.get("size")))
            got = file.from_footer(spec, pf)
            stats = got.stats if got.stats is not None else _with_data(spec, pf, got)
        # pyarrow's ArrowInvalid is a ValueError; a column of another type, UnreadableFile.
        except (OSError, ValueError, file.UnreadableFileError) as e:
            with lock:
                run.unreadable.append((add["path"], str(e)))
            return None
        finally:
            with lock:
                finished[0] += 1
                if progress is not None:
                    progress(finished[0], len(todo))
        return None if stats is None else _readd(add, file.dumps(stats))

    def _with_data(spec: StatsSpec, pf: pq.ParquetFile, got: FileStats) -> dict[str, Any] | None:
        with lock:
            if got.data_bytes > budget[0]:
                run.deferred += 1
                return None
            budget[0] -= got.data_bytes
            run.data_bytes += got.data_bytes
        return file.from_data(spec, pf, got)

    with ThreadPoolExecutor(READERS) as pool:
        results = list(pool.map(one, todo))
    return [r for r in results if r is not None]


def _readd(add: dict[str, Any], stats: str) -> dict[str, Any]:
    """The add again, every field kept, with its new statistics and no data change."""
    out: dict[str, Any] = {}
    for name, value in add.items():
        if value is None or name == schema.NUM_RECORDS.name:
            continue
        out[name] = dict(value) if name in ("partitionValues", "tags") else value
    out["dataChange"] = False
    out["stats"] = stats
    out.setdefault("partitionValues", {})
    return out
