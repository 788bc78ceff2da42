"""An expiry, planned and committed: one commit through the one commit writer, with the
`remove` actions and the `commitInfo` Delta Spark writes for a metadata-only DELETE
(DeleteCommand's "delete by partition values" path, AddFile.removeWithTimestamp):

- `remove`: `path`, `deletionTimestamp`, `dataChange: true`, `extendedFileMetadata: true`,
  `partitionValues`, `size`, `stats` with the file's `numRecords`, and, where the file has
  them, `tags`, `deletionVector`, `baseRowId` and `defaultRowCommitVersion`;
- `commitInfo`: operation `DELETE`, `operationParameters.predicate` (a JSON list of the
  condition), and Delta Spark's DELETE metrics: `numRemovedFiles`, `numRemovedBytes`,
  `numDeletedRows` and the rest at their metadata-only values.

Delta's conflict rules hold (delta/commit.py): a file added after the plan is never removed
(only the planned files are), a concurrent commit that added a file which may hold expiring
rows, or removed a planned file, makes the commit give up with nothing written
(CommitConflictError); the next run plans again from the table as it then is. A crash leaves
the table before or after the one commit, and a rerun finds what is left to do.

Readers still reach the removed rows by time travel to an earlier version until vacuum deletes
the files, once the table's deleted-file retention has passed (docs/retention.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from deltakeeper.delta import schema
from deltakeeper.delta.bulk import collector_paused
from deltakeeper.delta.commit import Change, commit
from deltakeeper.delta.expire import times
from deltakeeper.delta.expire.plan import (
    DEFAULT_MAX_FRACTION,
    ExpiryPlan,
    check_fraction,
    expiry_plan,
)
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table

OPERATION = "DELETE"  # as Delta Spark names the commit: an expiry is a DELETE by age
# What a remove carries over from its add when the add has it (removeWithTimestamp).
_CARRIED = ("tags", "deletionVector", "baseRowId", "defaultRowCommitVersion")
# The add columns an expiry reads: what it judges and counts a file by, and every field a
# remove carries over (each column more costs every file's conversion).
ADD_COLUMNS = ("path", "partitionValues", "size", "stats", *_CARRIED, schema.NUM_RECORDS.name)
EMPTY: dict[str, Any] = {}


@dataclass(frozen=True)
class Expiry:
    """What to expire: the column, how much to keep, and the largest share of the table's
    rows one run may remove."""

    column: str
    keep_ms: int
    max_fraction: float = DEFAULT_MAX_FRACTION


@dataclass
class ExpiryRun:
    """What a run found and did."""

    plan: ExpiryPlan
    dry_run: bool
    version: int | None = None  # the commit written (None: nothing, or a dry run)
    attempts: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        p = self.plan
        share, of = p.share()
        return {
            "uri": p.uri,
            "readVersion": p.version,
            "column": p.column.name,
            "columnType": p.column.type,
            "by": p.by,
            "cutoff": rfc3339_us(p.cutoff_us),
            "predicate": p.predicate,
            "dryRun": self.dry_run,
            "version": self.version,
            "removedFiles": p.files,
            "removedRows": p.rows,
            "removedBytes": p.bytes,
            "filesWithoutRowCount": p.uncounted,
            "straddlingFiles": len(p.straddling),
            "filesWithoutStats": len(p.without_stats),
            "straddling": p.straddling,
            "withoutStats": p.without_stats,
            "share": round(share, 6),
            "shareOf": of,
            "tableFiles": p.table_files,
            "tableRows": p.table_rows,
            "tableBytes": p.table_bytes,
            "files": p.paths(),
        }


def read_snapshot(table: Table, version: int | None = None) -> Snapshot:
    """The snapshot an expiry plans from: every add field, and record counts."""
    return table.snapshot(version=version, add_cols=ADD_COLUMNS)


def plan_expiry(
    table: Table, expiry: Expiry, now_ms: int, snap: Snapshot | None = None
) -> ExpiryPlan:
    """The expiry of `table` as of `now_ms`, refused (ExpiryLimitError) past maxFraction."""
    snap = snap if snap is not None and _full(snap) else read_snapshot(table, _version(snap))
    plan = expiry_plan(snap, expiry.column, times.cutoff_us(now_ms, expiry.keep_ms))
    check_fraction(plan, expiry.max_fraction)
    return plan


@collector_paused()  # the snapshot, the plan and the commit: thousands of acyclic dicts
def expire(
    table: Table,
    expiry: Expiry,
    now_ms: int,
    dry_run: bool = False,
    snap: Snapshot | None = None,
    write_ms: int | None = None,
) -> ExpiryRun:
    """Plan the expiry as of `now_ms` and, unless a dry run, commit it. `write_ms` is the
    time the commit and its removes carry (the clock by default: vacuum's retention runs from
    it, so a cutoff computed for another `now` does not shorten it)."""
    started = time.monotonic()
    plan = plan_expiry(table, expiry, now_ms, snap)
    return commit_plan(table, plan, dry_run, write_ms, started)


@collector_paused()  # a remove action per file
def commit_plan(
    table: Table,
    plan: ExpiryPlan,
    dry_run: bool = False,
    write_ms: int | None = None,
    started: float | None = None,
) -> ExpiryRun:
    """Commit the removes of `plan` (unless a dry run, or nothing goes) on the snapshot it
    was planned from (a concurrent commit is judged by delta/commit.py's rules)."""
    started = time.monotonic() if started is None else started
    run = ExpiryRun(plan, dry_run)
    if not dry_run and plan.files:
        written = write_ms if write_ms is not None else int(time.time() * 1000)
        done = commit(table, plan.base, change(plan, written, started), written)
        run.version, run.attempts = done.version, done.attempts
    run.seconds = time.monotonic() - started
    return run


def change(plan: ExpiryPlan, deleted_ms: int, started: float) -> Change:
    """The DELETE commit of `plan`, as Delta Spark writes a metadata-only one."""
    removes = tuple({"remove": r} for r in remove_actions(plan.removed, deleted_ms))
    elapsed = int((time.monotonic() - started) * 1000)
    return Change(
        OPERATION,
        removes,
        parameters={"predicate": [plan.predicate]},
        metrics={
            "numRemovedFiles": plan.files,
            "numRemovedBytes": plan.bytes,
            "numCopiedRows": 0,
            "numDeletionVectorsAdded": 0,
            "executionTimeMs": elapsed,
            "numDeletionVectorsUpdated": 0,
            "numAddedFiles": 0,
            "numDeletionVectorsRemoved": 0,
            "numAddedChangeFiles": 0,
            "numDeletedRows": plan.rows,
            "scanTimeMs": elapsed,
            "numAddedBytes": 0,
            "rewriteTimeMs": 0,
        },
        reads=frozenset(plan.paths()),
        reads_added=plan.may_expire,
    )


def remove_actions(files: pa.Table, deleted_ms: int) -> list[dict[str, Any]]:
    """The removes of live files (their add rows) as Delta Spark's removeWithTimestamp writes
    them, built column by column: an expiry removes thousands of files at once."""
    n = files.num_rows
    paths, sizes = files["path"].to_pylist(), files["size"].to_pylist()
    values = _maps(files["partitionValues"])
    records = files[schema.NUM_RECORDS.name].to_pylist()
    carried = [
        (name, _carried(name, files[name]))
        for name in _CARRIED
        if name in files.column_names and files[name].null_count < n
    ]
    out = [
        {
            "path": path,
            "deletionTimestamp": deleted_ms,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": value,
            "size": size,
        }
        for path, value, size in zip(paths, values, sizes, strict=True)
    ]
    for remove, count in zip(out, records, strict=True):
        if count is not None:  # a metadata-only DELETE keeps the record count only
            remove["stats"] = f'{{"numRecords":{count}}}'
    for name, column in carried:
        for remove, value in zip(out, column, strict=True):
            if value is not None:
                remove[name] = value
    return out


def _carried(name: str, column: pa.ChunkedArray) -> list[Any]:
    if name == "tags":
        return _maps(column, absent=None)
    if name == "deletionVector":
        return [
            None
            if dv is None
            else {k: v for k, v in dv.items() if v is not None and k != "maxRowIndex"}
            for dv in column.to_pylist()
        ]
    return column.to_pylist()


def _maps(column: pa.ChunkedArray, absent: dict[str, Any] | None = EMPTY) -> list[Any]:
    """A map<string, string> column as a dict a row (`absent` for a null map)."""
    out: list[Any] = []
    for chunk in column.chunks:
        offsets = chunk.offsets.to_pylist()
        keys, items = chunk.keys.to_pylist(), chunk.items.to_pylist()
        if chunk.null_count == 0 and _one_key(offsets, keys):  # a table partitioned by one column
            name = keys[offsets[0]] if keys else None
            out.extend({name: v} for v in items[offsets[0] : offsets[-1]])
            continue
        for i, ok in enumerate(chunk.is_valid().to_pylist()):
            a, b = offsets[i], offsets[i + 1]
            out.append(dict(zip(keys[a:b], items[a:b], strict=True)) if ok else _copy(absent))
    return out


def _one_key(offsets: list[int], keys: list[str]) -> bool:
    """Whether every row of a map holds one entry, under the same key."""
    first, last = offsets[0], offsets[-1]
    return last - first == len(offsets) - 1 and len(set(keys[first:last])) == 1


def _copy(value: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


def rfc3339_us(us: int) -> str:
    """A time in microseconds as RFC 3339, UTC, to the microsecond where it has them."""
    t = times.at(us)
    return f"{t:%Y-%m-%dT%H:%M:%S}{f'.{t:%f}' if t.microsecond else ''}Z"


def _full(snap: Snapshot) -> bool:
    return all(c in snap.files.column_names for c in ADD_COLUMNS)


def _version(snap: Snapshot | None) -> int | None:
    return None if snap is None else snap.version
