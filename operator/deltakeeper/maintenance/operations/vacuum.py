"""Vacuum: deletes the data files no version inside the deleted-file retention references,
found in the policy's mode (FULL lists the table, LITE reads the commits since the last
vacuum, INVENTORY reads a storage inventory; AUTO runs LITE, and FULL every fullInterval),
and moves `_last_vacuum_info` last (delta/vacuum/plan.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltakeeper.delta.errors import (
    InvalidInputError,
    LiteVacuumImpossible,
    UnsupportedProtocolError,
)
from deltakeeper.delta.held import HeldSnapshot
from deltakeeper.delta.properties import duration_text
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum import inventory
from deltakeeper.delta.vacuum import plan as vacuum
from deltakeeper.delta.vacuum.info import InfoStatus, LastVacuumInfo
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance.memory import per_action
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result, deleting
from deltakeeper.maintenance.operations.spec import (
    COUNT_SCHEMA,
    OperationSpec,
    Planning,
    Running,
)
from deltakeeper.maintenance.operations.steps import Step, spark_job
from deltakeeper.maintenance.policy import VACUUM_EVERY_MS, Policy
from deltakeeper.units import format_bytes, format_ms, rfc3339

VACUUM = Operation.VACUUM


@dataclass(slots=True)
class VacuumRun:
    """A vacuum step's own facts (its Outcome's detail): how it found its candidates, at what
    cost, and what it did besides deleting files."""

    mode: Mode
    reason: str  # why this mode ran
    candidates: int  # files considered: listed, named by the log or inventoried
    listed: int  # objects a listing or an inventory returned (LITE: 0)
    requests: dict[str, int]  # storage requests by operation, planning included
    commits: tuple[int, int] | None  # LITE: the commits read
    info: LastVacuumInfo  # _last_vacuum_info as the run found it
    records: int | None  # the N it writes there (a dry run: would write); None: left alone
    folders: int = 0  # empty folders removed

    def to_json(self) -> dict[str, Any]:
        found = self.info.version if self.info.status is InfoStatus.RECORDED else None
        return {
            "mode": self.mode,
            "modeReason": self.reason,
            "candidates": self.candidates,
            "listedObjects": self.listed,
            "requests": dict(sorted(self.requests.items())),
            "commitsRead": list(self.commits) if self.commits else None,
            "lastVacuumInfo": {"status": self.info.status, "before": found, "after": self.records},
        }


def vacuum_run(detail: vacuum.VacuumPlan, spent: Counter[str], folders: int = 0) -> VacuumRun:
    """The facts of a vacuum step: its plan's, and the requests planning and running sent."""
    window = detail.window
    return VacuumRun(
        detail.mode,
        detail.why,
        detail.scanned,
        detail.listed,
        dict(detail.requests + spent),
        None if window is None or window.empty else (window.start, window.end),
        detail.last_info,
        detail.record,
        folders,
    )


def run_of(o: Outcome) -> VacuumRun | None:
    return o.detail_as(VacuumRun)


def plan(p: Planning) -> Step:
    if not p.policy.vacuum_enabled:
        return Step(VACUUM, False, "disabled by the policy (vacuum.enabled: false)")
    snap = p.snap if isinstance(p.snap, (Snapshot, HeldSnapshot)) else p.with_files()
    try:
        detail = _plan(p, snap)
    except (InvalidInputError, UnsupportedProtocolError) as e:
        return Step(VACUUM, False, str(e), refused=True, error=e)
    mode = f"{detail.mode.upper()} ({detail.why})"
    if not detail.delete:
        reason = f"{mode}: no unreferenced data files past the retention"
        if detail.record is None:
            return Step(VACUUM, False, reason, detail)
        return Step(VACUUM, True, f"{reason}; records N = {detail.record}", detail)
    reason = f"{mode}: {detail.files} unreferenced data files ({format_bytes(detail.bytes)})"
    return Step(VACUUM, True, reason, detail)


def on_spark(p: Planning, why: str) -> Step:
    """Delta Spark's VACUUM lists and decides: nothing is planned here."""
    if not p.policy.vacuum_enabled:
        return plan(p)
    spec = spark_job(p.snap, VACUUM, p.now_ms)
    # Delta rounds RETAIN to whole hours: rounded up here, so it never keeps less.
    spec["retentionHours"] = -(-p.policy.deleted_file_retention_ms // 3_600_000)
    spec["allowShortRetention"] = p.policy.allow_short_retention
    return Step(VACUUM, True, f"Delta Spark's VACUUM: {why}", spark=why, job_spec=spec)


def force(p: Planning) -> Step:
    if not isinstance(p.snap, Snapshot):
        raise TypeError("vacuum is planned from a snapshot with its file actions")
    return Step(VACUUM, True, "asked for", _plan(p, p.snap))


def full_due(policy: Policy, last_full_ms: int | None, now_ms: int) -> str | None:
    """Why an AUTO vacuum is FULL this time, or None: none on record, or vacuum.fullInterval
    has passed since the last one (for the files no commit names: those of failed writes)."""
    if policy.vacuum_mode is not Mode.AUTO:
        return None
    if last_full_ms is None:
        return "no FULL vacuum on record"
    if now_ms - last_full_ms < policy.vacuum_full_interval_ms:
        return None
    every = duration_text(policy.vacuum_full_interval_ms)
    return f"the last FULL vacuum ran at {format_ms(last_full_ms)}, over {every} ago"


def _plan(p: Planning, snap: Snapshot | HeldSnapshot) -> vacuum.VacuumPlan:
    """The vacuum in the policy's mode; AUTO runs LITE unless a FULL one is due
    (`p.full_vacuum`) or Delta refuses LITE. The plan says why its mode."""
    policy = p.policy
    mode = policy.vacuum_mode
    found = None
    if mode is Mode.INVENTORY:
        found = _inventory(policy, p.storage_options)

    def planned(chosen: Mode) -> vacuum.VacuumPlan:
        return vacuum.plan_table_vacuum(
            p.table,
            snap,
            policy.deleted_file_retention_ms,
            p.now_ms,
            policy.allow_short_retention,
            chosen,
            found,
            p.known,
            catalog_allows=VACUUM in policy.catalog_allowed,
        )

    if mode is not Mode.AUTO:
        detail = planned(mode)
        detail.why = f"vacuum mode {mode}"
        return detail
    if p.full_vacuum:
        detail = planned(Mode.FULL)
        detail.why = f"auto: {p.full_vacuum}"
        return detail
    try:
        detail = planned(Mode.LITE)
    except LiteVacuumImpossible as e:
        detail = planned(Mode.FULL)
        detail.why = f"auto: LITE refused, FULL instead: {e}"
        return detail
    every = duration_text(policy.vacuum_full_interval_ms)
    detail.why = f"auto: LITE while Delta allows it, FULL every {every}"
    return detail


def _inventory(policy: Policy, options: Mapping[str, Any] | None) -> inventory.Inventory:
    settings = policy.vacuum_inventory
    if settings is None:
        raise InvalidInputError("vacuum mode inventory needs vacuum.inventory (--inventory URI)")
    return inventory.open_inventory(settings.uri, settings.format, dict(options or {}))


def run(r: Running) -> Outcome:
    table, dry_run, progress = r.table, r.dry_run, r.progress
    detail = r.step.detail
    assert isinstance(detail, vacuum.VacuumPlan)
    report = None if progress is None else (lambda done, total: progress(VACUUM, done, total))
    before = Counter(table.storage.requests)
    deleted = 0 if dry_run else vacuum.execute_vacuum(table, detail, report, r.stop)
    folders = 0 if dry_run else vacuum.remove_empty_folders(table, detail)
    if not dry_run:
        vacuum.record_vacuum(table, detail)
    outcome = deleting(VACUUM, detail.files, detail.bytes, deleted, detail.delete, dry_run)
    outcome.detail = vacuum_run(detail, Counter(table.storage.requests) - before, folders)
    outcome.message = f"{detail.mode.upper()} ({detail.why}): {outcome.message}"
    if detail.folders:
        outcome.message += (
            f"; {'would remove' if dry_run else 'removed'} "
            f"{len(detail.folders) if dry_run else folders} empty folders"
        )
        if dry_run:
            outcome.files += detail.folders
    if detail.nested:
        outcome.message += f"; skipped nested Delta tables: {', '.join(detail.nested)}"
    return outcome


def spark_done(table: Table, out: Outcome, planned_version: int) -> None:
    """Delta Spark's VACUUM: the files its line says it deleted."""
    deleted = (out.job_result or {}).get("filesDeleted")
    out.deleted_files = int(deleted or 0)
    counted = f"deleted {deleted} files" if deleted is not None else "ran (no counts logged)"
    out.message = f"Delta Spark's VACUUM {counted} (Spark job {out.job_id})"


def skip(step: Step) -> Outcome:
    """A vacuum not due still says its mode and what looking cost."""
    skipped = Outcome(VACUUM, Result.SKIPPED, step.reason)
    if isinstance(step.detail, vacuum.VacuumPlan):
        skipped.detail = vacuum_run(step.detail, Counter())
    return skipped


def _mode(o: Outcome) -> str:
    """Which mode a vacuum ran in and why, to begin its event's message."""
    run = run_of(o)
    return f"{run.mode.upper()} ({run.reason}) " if run else ""


def _done(o: Outcome) -> str:
    size = format_bytes(o.deleted_bytes)
    return f"{_mode(o)}vacuum deleted {o.deleted_files} unreferenced data files ({size})"


def _dry_run(o: Outcome) -> tuple[str, str]:
    return "VacuumDryRun", f"{_mode(o)}vacuum would delete {len(o.files)} files"


def _record(o: Outcome, previous: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """Its mode and cost, and when the last FULL one ran (carried over from the run before
    when this one was not FULL)."""
    run = run_of(o)
    if run is None:
        return {}
    full = run.mode is Mode.FULL and o.result in (Result.DONE, Result.DRY_RUN)
    last_full = rfc3339(now_ms) if full else previous.get("lastFull")
    return {
        "mode": str(run.mode),
        "modeReason": run.reason,
        "candidates": run.candidates,
        "listedObjects": run.listed,
        "requests": dict(sorted(run.requests.items())),
        **({"lastFull": last_full} if last_full else {}),
    }


def _history(o: Outcome) -> dict[str, int]:
    run = run_of(o)
    if run is None:
        return {}
    out = {"candidates": run.candidates, "listedObjects": run.listed}
    return out | {f"requests.{k}": v for k, v in run.requests.items()}


def _report(o: Outcome) -> dict[str, Any]:
    run = run_of(o)
    return {} if run is None else {"vacuum": run.to_json()}


SPEC = OperationSpec(
    VACUUM,
    "deletes the data files no version inside the deleted-file retention references",
    Cadence.SCHEDULED,
    plan,
    run,
    per_action(640),
    "Vacuumed",
    _done,
    every_ms=VACUUM_EVERY_MS,
    force=force,
    skip=skip,
    dry_run_event=_dry_run,
    deletes="data",
    spark=on_spark,
    spark_done=spark_done,
    schedule=lambda policy: policy.vacuum_schedule,
    dry_run=lambda policy: policy.vacuum_dry_run,
    engine=lambda policy: policy.vacuum_engine,
    record=_record,
    report=_report,
    record_schema={
        "mode": {"type": "string", "enum": [str(m) for m in Mode if m is not Mode.AUTO]},
        "modeReason": {"type": "string"},
        "candidates": {**COUNT_SCHEMA, "description": "Files considered."},
        "listedObjects": {
            **COUNT_SCHEMA,
            "description": "Objects a listing or inventory returned.",
        },
        "requests": {
            "type": "object",
            "additionalProperties": COUNT_SCHEMA,
            "description": "Storage requests the vacuum sent, by operation.",
        },
        "lastFull": {"type": "string", "format": "date-time"},
    },
    history=_history,
    catalog=OnCatalogManaged.IF_PERMITTED,
)
