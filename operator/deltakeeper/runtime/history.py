"""The operation history: one row per maintenance operation, appended to a Delta table.

Rows are kept in memory as the daemon publishes its observations and written every few
seconds as one Parquet file and one commit (delta/commit.py), so a busy fleet commits at most
once a flush. A failed flush keeps its rows for the next one (up to MAX_ROWS, the oldest
dropped and counted beyond that). The history table is maintained here like any other table:
a checkpoint when due after each commit (with the log cleanup that follows it), a vacuum once
a day. Messages were scrubbed by the watcher and URIs are written without credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from deltakeeper.delta import append, commit
from deltakeeper.delta.errors import DeltaError, NotADeltaTableError
from deltakeeper.delta.features import Protocol
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.storage.retries import safe_uri
from deltakeeper.delta.table import Table, open_table
from deltakeeper.maintenance import executor, planner
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations import checkpoint as checkpoint_op
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.outcome import RunField as R
from deltakeeper.maintenance.operations.registry import spec_of
from deltakeeper.maintenance.policy import VACUUM_EVERY_MS, effective
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.runtime.fleet import now_ms
from deltakeeper.runtime.model import Observation, Target

log = logging.getLogger("deltakeeper.history")

FLUSH_EVERY_S = 5.0
MAX_ROWS = 100_000  # kept while the history table cannot be written

COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("namespace", "string", pa.string()),
    ("table", "string", pa.string()),
    ("uri", "string", pa.string()),
    ("operation", "string", pa.string()),
    ("status", "string", pa.string()),
    ("reason", "string", pa.string()),
    ("start_time", "timestamp", pa.timestamp("us", tz="UTC")),
    ("end_time", "timestamp", pa.timestamp("us", tz="UTC")),
    ("table_version", "long", pa.int64()),
    ("job_id", "string", pa.string()),
)
METRICS_TYPE = pa.map_(pa.string(), pa.int64())
ARROW_SCHEMA = pa.schema([pa.field(n, t) for n, _, t in COLUMNS] + [("metrics", METRICS_TYPE)])
DELTA_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t, _ in COLUMNS]
    + [
        {
            "name": "metrics",
            "type": {
                "type": "map",
                "keyType": "string",
                "valueType": "long",
                "valueContainsNull": True,
            },
            "nullable": True,
            "metadata": {},
        }
    ],
}
# The counts of a table kept before and after each operation, by their metric's name.
COUNTED = {"files": F.FILES, "bytes": F.BYTES, "logFiles": F.LOG_FILES}
STATUS = {
    Result.DONE: "succeeded",
    Result.FAILED: "failed",
    Result.REFUSED: "failed",
    Result.SKIPPED: "skipped",
    Result.SKIPPED_AFTER_FAILURE: "skipped",
    Result.DRY_RUN: "skipped",
}


def rows(target: Target, obs: Observation, before: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The history rows of one observation's outcomes; `before`: the counts the table had
    before them (its previous observation's)."""
    out = []
    start = obs.polled_ms
    for o in obs.outcomes:
        if o.result not in STATUS or _waits(o):
            continue  # a started job: its row comes when it ends
        took = int(o.seconds * 1000)
        if o.operation is Operation.COMPACTION and o.job_id:  # ended now, started `took` ago
            begin, end = obs.polled_ms - took, obs.polled_ms
        else:
            begin, end = start, start + took
            start = end
        out.append(_row(target, obs, o, begin, end, _metrics(o, before, obs.counts)))
        checksum = checkpoint_op.detail(o).checksum
        if checksum is not None and checksum.written:
            crc = {"bytes": checksum.size_bytes}
            out.append(_row(target, obs, o, end, end, crc, operation="crc"))
    return out


def _waits(o: Outcome) -> bool:
    """A compaction that waits for the job budget, or for a job running elsewhere: asked
    again at the next poll, so not an operation of its own."""
    return o.operation is Operation.COMPACTION and o.result is Result.SKIPPED and bool(o.job_id)


def _row(
    target: Target,
    obs: Observation,
    o: Outcome,
    begin: int,
    end: int,
    metrics: dict[str, int],
    operation: str | None = None,
) -> dict[str, Any]:
    version = o.version if o.version is not None else obs.counts.get(F.VERSION)
    status = STATUS[o.result]
    return {
        "namespace": target.namespace,
        "table": target.name,
        "uri": safe_uri(target.uri),
        "operation": operation or str(o.operation),
        "status": status,
        "reason": (o.message or None) if status != "succeeded" else None,
        "start_time": begin * 1000,
        "end_time": end * 1000,
        "table_version": version,
        "job_id": o.job_id,
        "metrics": sorted(metrics.items()),
    }


def _metrics(o: Outcome, before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, field in COUNTED.items():
        if isinstance(before.get(field), int):
            out[f"{name}Before"] = before[field]
        if isinstance(after.get(field), int) and o.result is Result.DONE:
            out[f"{name}After"] = after[field]
    spec = spec_of(o.operation)
    if o.deleted_files or spec.deletes:
        out |= {R.DELETED_FILES: o.deleted_files, R.DELETED_BYTES: o.deleted_bytes}
    if spec.writes:
        out[R.WRITTEN_FILES] = o.written_files
    out |= spec.history(o)
    return out


class History:
    """Collects rows from published observations; `flush` writes them (one thread at a time)."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        clock: Callable[[], int] = now_ms,
        max_rows: int = MAX_ROWS,
    ) -> None:
        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.clock = clock
        self.max_rows = max_rows
        self.dropped = 0  # rows lost because the history could not be written for too long
        self.written = 0
        self.commits = 0
        self._rows: list[dict[str, Any]] = []
        self._before: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._table: Table | None = None
        self._snap: Snapshot | None = None
        self._vacuumed_ms = 0

    def add(self, target: Target, obs: Observation) -> None:
        new = rows(target, obs, self._before.get(target.key, {}))
        if obs.counts:
            self._before[target.key] = {k: obs.counts.get(k) for k in COUNTED.values()}
        if not new:
            return
        with self._lock:
            self._rows.extend(new)
            over = len(self._rows) - self.max_rows
            if over > 0:
                del self._rows[:over]
                self.dropped += over

    async def keep(self, stop: asyncio.Event, every_s: float = FLUSH_EVERY_S) -> None:
        """Flush every `every_s` (off the event loop) until `stop`, then once more."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
            await asyncio.to_thread(self.flush)

    def forget(self, key: tuple[str, str]) -> None:
        self._before.pop(key, None)

    def flush(self) -> int:
        """Write the rows collected so far as one commit; the number written. A failure is
        logged and the rows are kept for the next flush."""
        with self._flushing:
            with self._lock:
                batch, self._rows = self._rows, []
            if not batch:
                return 0
            try:
                self._append(batch)
            except Exception as e:  # a store or a table in the way: retried at the next flush
                log.warning(
                    "operation history %s not written (%d rows kept): %s",
                    safe_uri(self.uri),
                    len(batch),
                    e,
                )
                with self._lock:
                    self._rows[:0] = batch
                self._snap = None
                return 0
            self.written += len(batch)
            self.commits += 1
            self._maintain()
            return len(batch)

    def _append(self, batch: list[dict[str, Any]]) -> None:
        table, snap = self._open()
        now = self.clock()
        data = pa.Table.from_pylist(batch, schema=ARROW_SCHEMA)
        add = append.write_file(table.storage, data, now)
        change = commit.Change(
            "WRITE",
            (add,),
            parameters={"mode": "Append", "partitionBy": []},
            metrics={
                "numFiles": 1,
                "numOutputRows": len(batch),
                "numOutputBytes": add["add"]["size"],
            },
        )
        commit.commit(table, snap, change, now_ms=now)
        self._snap = table.update(snap)  # to the version written (and any before it)

    def _open(self) -> tuple[Table, Snapshot]:
        if self._table is None:
            self._table = open_table(self.uri, self.storage_options)
        table = self._table
        if self._snap is None:
            try:
                self._snap = table.snapshot()
            except NotADeltaTableError:
                now = self.clock()
                with contextlib.suppress(FileExistsError):  # another writer created it first
                    commit.create(table, Protocol(1, 2), _metadata(now), now)
                self._snap = table.snapshot()
            _check_schema(self._snap)
        elif table.moved_on(self._snap):
            self._snap = table.update(self._snap)
        return table, self._snap

    def _maintain(self) -> None:
        """Checkpoint (and clean the log after it) when due; vacuum once a day."""
        table, snap = self._table, self._snap
        if table is None or snap is None:
            return
        now = self.clock()
        ops: tuple[Operation, ...] = (Operation.CHECKPOINT,)
        if now - self._vacuumed_ms >= VACUUM_EVERY_MS:  # as any table without a schedule
            ops, self._vacuumed_ms = (*ops, Operation.VACUUM), now
        try:
            policy = effective(snap.metadata.configuration)
            plan = planner.plan(table, snap, policy, now, ops, cleanup_after_checkpoint=True)
            report = executor.execute(table, plan)
        except DeltaError as e:
            log.warning("operation history %s not maintained: %s", safe_uri(self.uri), e)
            return
        if report.failed is not None:
            log.warning("operation history %s: %s", safe_uri(self.uri), report.failed.message)


def _metadata(now_ms: int) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "name": "deltakeeper_operation_history",
        "description": "one row per maintenance operation deltakeeper ran",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(DELTA_SCHEMA),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": now_ms,
    }


def _check_schema(snap: Snapshot) -> None:
    theirs = [f.get("name") for f in json.loads(snap.metadata.schema_string).get("fields", [])]
    ours = [name for name, _, _ in COLUMNS] + ["metrics"]
    if theirs != ours:
        raise DeltaError(
            f"{snap.uri} is a Delta table with other columns ({', '.join(map(str, theirs))}): "
            "give --history-uri a new location or an earlier history table"
        )
