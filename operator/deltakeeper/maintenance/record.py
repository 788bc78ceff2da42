"""One operation's run as the status keeps it: its lastMaintenance entry, of the fields
RunField names (operations/outcome.py; the CLI's --json, `as_json` here, history and the
status report use the same names). Every entry has COMMON; each operation adds its own (its
spec's `record`, with their schema), a writer its written files, a run on Spark its engine
and job. The watcher builds entries with `entry`; the CRD's schema comes from `fields`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deltakeeper.delta.errors import CatalogOwnedError
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result, RunField
from deltakeeper.maintenance.operations.registry import REGISTRY
from deltakeeper.maintenance.operations.spec import COUNT_SCHEMA
from deltakeeper.units import rfc3339

# Kept in memory only, for the schedules: the time in ms (runtime/status.py drops it).
TIME_MS = "timeMs"

SCHEMA: Mapping[RunField, Mapping[str, Any]] = {
    RunField.TIME: {"type": "string", "format": "date-time"},
    RunField.RESULT: {"type": "string"},
    RunField.VERSION: COUNT_SCHEMA,
    RunField.DELETED_FILES: COUNT_SCHEMA,
    RunField.DELETED_BYTES: COUNT_SCHEMA,
    RunField.SECONDS: {"type": "number"},
    RunField.MESSAGE: {"type": "string"},
    RunField.REASON: {
        "type": "string",
        "description": "Why a run was refused, when it has a reason of its own: CatalogOwned, "
        "OverMemoryBudget.",
    },
    RunField.WRITTEN_FILES: {**COUNT_SCHEMA, "description": "Files given statistics or written."},
    RunField.ENGINE: {
        "type": "string",
        "description": "spark: Delta Spark ran it, as a Spark job.",
    },
    RunField.JOB_ID: {"type": "string"},
}
COMMON = (
    RunField.TIME,
    RunField.RESULT,
    RunField.VERSION,
    RunField.DELETED_FILES,
    RunField.DELETED_BYTES,
    RunField.SECONDS,
    RunField.MESSAGE,
)


def fields(operation: Operation) -> dict[str, Mapping[str, Any]]:
    """The fields `operation`'s entry may have, each with its schema."""
    spec = REGISTRY[operation]
    named = [*COMMON, RunField.REASON]  # a reason only where a refusal has its own
    if spec.spark_done is not None:  # it runs Spark jobs
        named += [RunField.ENGINE, RunField.JOB_ID]
    if spec.writes:
        named.append(RunField.WRITTEN_FILES)
    return {str(f): SCHEMA[f] for f in named} | dict(spec.record_schema)


def entry(
    o: Outcome, version: int, now_ms: int, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The lastMaintenance entry of `o`, run at `version` and recorded at `now_ms`;
    `previous`: the operation's entry before (what a run carries over, a vacuum's lastFull)."""
    spec = REGISTRY[o.operation]
    out: dict[str, Any] = {
        RunField.TIME: rfc3339(now_ms),
        TIME_MS: now_ms,
        RunField.RESULT: o.result,
        RunField.VERSION: o.version if o.version is not None else version,
        RunField.DELETED_FILES: o.deleted_files,
        RunField.DELETED_BYTES: o.deleted_bytes,
        RunField.SECONDS: round(o.seconds, 3),
        RunField.MESSAGE: o.message,
    }
    if o.result is Result.REFUSED and isinstance(o.error, CatalogOwnedError):
        out[RunField.REASON] = CatalogOwnedError.reason
    out |= spec.record(o, previous or {}, now_ms)
    if on_spark(o):
        out |= {RunField.ENGINE: "spark", RunField.JOB_ID: o.job_id}
    if spec.writes:
        out[RunField.WRITTEN_FILES] = o.written_files
    return {str(k): v for k, v in out.items()}


def as_json(o: Outcome) -> dict[str, Any]:
    """`o` as the CLI's --json shows a step: every step's keys, then its operation's own.
    checkpointVersion and repairedCheckpoints are in every step's (docs/cli.md); only a
    checkpoint's report fills them."""
    out: dict[str, Any] = {
        RunField.OPERATION: o.operation,
        RunField.RESULT: o.result,
        RunField.MESSAGE: o.message,
        RunField.SECONDS: round(o.seconds, 3),
        RunField.CHECKPOINT_VERSION: None,
        RunField.DELETED_FILES: o.deleted_files,
        RunField.DELETED_BYTES: o.deleted_bytes,
        RunField.WRITTEN_FILES: o.written_files,
        RunField.FILES: o.files,
        RunField.REPAIRED: [],
    }
    if on_spark(o):
        out |= {RunField.ENGINE: "spark", RunField.JOB_ID: o.job_id, RunField.JOB: o.job_result}
    out |= REGISTRY[o.operation].report(o)
    return {str(k): v for k, v in out.items()}


def on_spark(o: Outcome) -> bool:
    """Whether Delta Spark ran `o` (a job of an operation that is not a job by itself)."""
    return o.job_id is not None and REGISTRY[o.operation].spark_done is not None
