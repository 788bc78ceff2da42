"""Log cleanup: deletes the commits and checkpoints past the log retention that no version
inside it needs (delta/cleanup.py plans and deletes), never the checkpoint and commit at the
cut-off, and never the commits the next LITE vacuum will read."""

from __future__ import annotations

from deltakeeper.delta import cleanup
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum import lite
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance.memory import per_log_file
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result, deleting
from deltakeeper.maintenance.operations.spec import OperationSpec, Planning, Running
from deltakeeper.maintenance.operations.steps import Step
from deltakeeper.maintenance.policy import CLEANUP_EVERY_MS, Policy
from deltakeeper.units import format_bytes, format_ms

CLEANUP, CHECKPOINT = Operation.CLEANUP, Operation.CHECKPOINT


def plan(p: Planning) -> Step:
    """Cleanup as it will be once a checkpoint due in this plan is written."""
    return step(p.table, p.snap, p.policy, p.now_ms, p.due(CHECKPOINT), p.keep)


def force(p: Planning) -> Step:
    if not isinstance(p.snap, Snapshot):
        raise TypeError("cleanup is planned from a snapshot with its file actions")
    disabled = _disabled(p.policy)
    if disabled is not None:
        return disabled
    keep = lite_floor(p.table, p.policy)
    retention = p.policy.log_retention_ms
    allows = CLEANUP in p.policy.catalog_allowed
    detail = cleanup.plan_table_cleanup(
        p.table, p.snap, retention, p.now_ms, None, keep, catalog_allows=allows
    )
    return Step(CLEANUP, True, "asked for", detail)


def step(
    table: Table,
    snap: SnapshotHeader,
    policy: Policy,
    now_ms: int,
    after_checkpoint: bool,
    keep: int | None,
    vacuum_first: int | None = None,
) -> Step:
    """Cleanup as it will be once the due checkpoint (if any) is written: a checkpoint written
    in this run lets this run's cleanup drop the commits before it. `keep`: the commits from
    this version on stay for the next LITE vacuum; `vacuum_first`: the N a vacuum run before
    it records, which it keeps instead (a real run reads it back from the table)."""
    disabled = _disabled(policy)
    if disabled is not None:
        return disabled
    retention = policy.log_retention_ms
    allows = CLEANUP in policy.catalog_allowed  # a catalog-managed table's catalog permits it

    def planned() -> cleanup.CleanupPlan:
        floor = lite_floor(table, policy)
        return cleanup.plan_table_cleanup(
            table, snap, retention, now_ms, None, floor, catalog_allows=allows
        )

    pending = snap.version if after_checkpoint else None
    floor = keep if vacuum_first is None else vacuum_first
    detail = cleanup.plan_table_cleanup(
        table, snap, retention, now_ms, pending, floor, catalog_allows=allows
    )
    replan = planned if after_checkpoint or vacuum_first is not None else None
    using = f", using the checkpoint at version {pending} written first" if pending else ""
    if vacuum_first is not None:
        using += f"; after the vacuum, which records N = {vacuum_first} first"
    if not detail.delete:
        return Step(CLEANUP, False, _why_nothing(detail) + using, detail, replan=replan)
    reason = f"{detail.files} log files ({format_bytes(detail.bytes)}) past the log retention"
    if detail.kept_for_lite is not None:
        reason += f"; commits from {detail.kept_for_lite} kept for the next LITE vacuum"
    return Step(CLEANUP, True, reason + using, detail, replan=replan)


def after_checkpoint(p: Planning) -> Step:
    """A cleanup planned only once the plan's due checkpoint is written (a watch loop's)."""

    def later() -> Step:
        return step(p.table, p.snap, p.policy, p.now_ms, after_checkpoint=False, keep=p.keep)

    reason = "planned once the due checkpoint is written"
    return Step(CLEANUP, True, reason, after=CHECKPOINT, plan_later=later)


def lite_floor(table: Table, policy: Policy) -> int | None:
    """The oldest commit cleanup keeps so that LITE vacuums stay possible; None where this
    table's vacuums never run LITE."""
    if not policy.vacuum_enabled or policy.vacuum_mode not in (Mode.AUTO, Mode.LITE):
        return None
    return lite.cleanup_floor(table)


def _disabled(policy: Policy) -> Step | None:
    if policy.expired_log_cleanup:
        return None
    return Step(CLEANUP, False, "disabled by the table property delta.enableExpiredLogCleanup")


def _why_nothing(detail: cleanup.CleanupPlan) -> str:
    if detail.cutoff_commit is None:
        return f"no commit is older than the log retention (cut-off {format_ms(detail.cutoff_ms)})"
    if detail.cutoff_checkpoint is None:
        why = f" ({'; '.join(detail.notes)})" if detail.notes else ""
        return (
            f"no usable checkpoint at or before version {detail.cutoff_commit} (the newest "
            f"commit past the log retention){why}; log cleanup needs one to cut at"
        )
    if detail.notes:
        return detail.notes[-1]
    return f"nothing older than the checkpoint at version {detail.cutoff_checkpoint}"


def run(r: Running) -> Outcome:
    detail = r.step.detail
    if r.step.replan is not None and not r.dry_run:
        detail = r.step.replan()  # the checkpoint step has written its file: plan with it there
    assert isinstance(detail, cleanup.CleanupPlan)
    deleted = 0 if r.dry_run else cleanup.execute_cleanup(r.table, detail)
    outcome = deleting(CLEANUP, detail.files, detail.bytes, deleted, detail.delete, r.dry_run)
    outcome.detail = detail
    return outcome


def skip(step: Step) -> Outcome:
    return Outcome(CLEANUP, Result.SKIPPED, step.reason, detail=step.detail)


def look_again(o: Outcome) -> int | None:
    """When a cleanup of the log as it was can find more: its cut-off's next move."""
    detail = o.detail_as(cleanup.CleanupPlan)
    return detail.until_ms if detail is not None and detail.until_ms else None


SPEC = OperationSpec(
    CLEANUP,
    "deletes the log files past the log retention that no version inside it needs",
    Cadence.PERIODIC,
    plan,
    run,
    per_log_file(512),  # a log file of the listing
    "LogCleaned",
    lambda o: f"deleted {o.deleted_files} expired log files ({format_bytes(o.deleted_bytes)})",
    every_ms=CLEANUP_EVERY_MS,
    look_again=look_again,
    force=force,
    deletes="log",
    catalog=OnCatalogManaged.IF_PERMITTED,
    skip=skip,
)
