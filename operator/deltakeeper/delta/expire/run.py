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

import orjson

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
# The add columns an expiry reads: every field a remove carries over, and the record count.
ADD_COLUMNS = (*schema.FULL_ADD, schema.NUM_RECORDS.name)
# What a remove carries over from its add when the add has it (removeWithTimestamp).
_CARRIED = ("tags", "deletionVector", "baseRowId", "defaultRowCommitVersion")


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
            "files": [a["path"] for a in p.remove],
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
    if not dry_run and plan.remove:
        written = write_ms if write_ms is not None else int(time.time() * 1000)
        done = commit(table, plan.base, change(plan, written, started), written)
        run.version, run.attempts = done.version, done.attempts
    run.seconds = time.monotonic() - started
    return run


def change(plan: ExpiryPlan, deleted_ms: int, started: float) -> Change:
    """The DELETE commit of `plan`, as Delta Spark writes a metadata-only one."""
    removes = tuple({"remove": remove_action(a, deleted_ms)} for a in plan.remove)
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
        reads=frozenset(a["path"] for a in plan.remove),
        reads_added=plan.may_expire,
    )


def remove_action(add: dict[str, Any], deleted_ms: int) -> dict[str, Any]:
    """The remove of a live file as Delta Spark's removeWithTimestamp writes it."""
    out: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": deleted_ms,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": _values(add.get("partitionValues")),
        "size": int(add["size"]),
    }
    records = add.get(schema.NUM_RECORDS.name)
    if isinstance(records, int):  # a metadata-only DELETE keeps the record count only
        out["stats"] = orjson.dumps({"numRecords": records}).decode()
    for name in _CARRIED:
        value = add.get(name)
        if value is None:
            continue
        if name == "tags":
            value = _values(value)
        elif name == "deletionVector":
            value = {k: v for k, v in value.items() if v is not None and k != "maxRowIndex"}
        out[name] = value
    return out


def rfc3339_us(us: int) -> str:
    """A time in microseconds as RFC 3339, UTC, to the microsecond where it has them."""
    t = times.at(us)
    return f"{t:%Y-%m-%dT%H:%M:%S}{f'.{t:%f}' if t.microsecond else ''}Z"


def _values(value: Any) -> dict[str, Any]:
    if isinstance(value, list):  # Arrow's map as (key, value) pairs
        return dict(value)
    return dict(value or {})


def _full(snap: Snapshot) -> bool:
    return all(c in snap.files.column_names for c in ADD_COLUMNS)


def _version(snap: Snapshot | None) -> int | None:
    return None if snap is None else snap.version
