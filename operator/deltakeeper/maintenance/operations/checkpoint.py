"""Checkpoint: due when the commits since the newest checkpoint reach the interval, when
`_last_checkpoint` is behind or names nothing complete, or when a checkpoint is damaged (it
is rewritten first). Writes the checkpoint, moves `_last_checkpoint`, and the version checksum
where the policy asks for one."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from deltakeeper.compaction.launcher import JobFailed
from deltakeeper.delta import crc
from deltakeeper.delta.checkpoint import (
    CheckpointResult,
    CheckpointSource,
    checkpoint_source,
    load_for_checkpoint,
    write_source,
)
from deltakeeper.delta.log.last_checkpoint import HintStatus, LastCheckpoint
from deltakeeper.delta.log.segment import Checkpoint
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.snapshot import SnapshotHeader
from deltakeeper.delta.table import Table, checked_hint
from deltakeeper.maintenance.memory import streamed_checkpoint
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.spec import OperationSpec, Planning, Running
from deltakeeper.maintenance.operations.steps import Plan, Step, spark_job
from deltakeeper.maintenance.policy import CLASSIC_V2_EVERY_INTERVALS, Policy

CHECKPOINT = Operation.CHECKPOINT


@dataclass(slots=True)
class CheckpointRun:
    """A checkpoint step's own facts (its Outcome's detail): what it wrote, for a front-end
    that reports more than the counts (the CLI, history's checksum row)."""

    written: CheckpointResult | None = None  # the regular checkpoint
    checksum: crc.CrcResult | None = None
    repaired: list[int] = field(default_factory=list)  # damaged versions rewritten


def detail(o: Outcome) -> CheckpointRun:
    """`o`'s CheckpointRun, empty for one that has none (a Spark job's, a failure)."""
    return o.detail_as(CheckpointRun) or CheckpointRun()


def plan(p: Planning) -> Step:
    step = _regular(p.table, p.snap, p.policy)
    damaged = sorted({d.version for d in p.snap.damaged_checkpoints})
    if not damaged:
        return step
    names = ", ".join(d.keys[0] for d in p.snap.damaged_checkpoints)
    reason = f"damaged checkpoint {names} is rewritten first"
    if step.due:
        reason += f"; then {step.reason}"
    return replace(step, due=True, reason=reason, repair=tuple(damaged), regular=step.due)


def on_spark(p: Planning, why: str) -> Step:
    """Delta Spark's checkpoint(), where one is due."""
    step = plan(p)
    if not step.due:
        return step
    return replace(step, spark=why, job_spec=spark_job(p.snap, CHECKPOINT, p.now_ms))


def force(p: Planning) -> Step:
    return Step(CHECKPOINT, True, "asked for", classic_v2=p.classic, source=p.source)


def due(table: Table, snap: SnapshotHeader, policy: Policy) -> bool:
    """Whether a plan would write a checkpoint (or repair one): the interval is reached, the
    hint is behind, or a checkpoint is damaged."""
    return bool(snap.damaged_checkpoints) or _regular(table, snap, policy).due


def _regular(table: Table, snap: SnapshotHeader, policy: Policy) -> Step:
    lag, every = snap.commits_since_checkpoint, policy.checkpoint_interval
    cp = snap.segment.checkpoint
    since = f"since the checkpoint at version {cp.version}" if cp else "and no checkpoint yet"
    reason = f"{lag} commits {since}; the interval is {every}"
    if lag < every:
        behind = _hint_behind(table, cp)
        if behind:
            return Step(CHECKPOINT, True, f"{reason}, but {behind}")
    if lag < every or not snap.protocol.has("v2Checkpoint"):
        return Step(CHECKPOINT, lag >= every, reason)
    classic = not _recent_classic(table, snap.version, every * CLASSIC_V2_EVERY_INTERVALS)
    if classic:
        reason += "; classic-named, as none of the last few checkpoints is (older readers)"
    return Step(CHECKPOINT, True, reason, classic_v2=classic)


def _hint_behind(table: Table, cp: Checkpoint | None) -> str | None:
    """Why `_last_checkpoint` needs moving to the newest checkpoint `cp` (a run killed between
    the two writes leaves it behind; or it names no complete checkpoint, which delta-rs and
    DuckDB cannot read past), or None. Writing the checkpoint again moves it. Costs one read,
    and a listing only when the hint names something other than `cp`."""
    hint = table.read_hint()
    named = hint.checkpoint
    if named is not None and not _names(named, cp):
        hint = checked_hint(hint, table.list_log(named.version))
    if hint.status is HintStatus.MISSING and cp is None:
        return None  # no checkpoint yet, and nothing claims one
    if hint.checkpoint is None or hint.status is HintStatus.STALE:
        why = f" ({hint.detail})" if hint.detail else ""
        return f"_last_checkpoint is {hint.status}{why}; writing the checkpoint again repairs it"
    if cp is not None and hint.checkpoint.version < cp.version:
        return (
            f"_last_checkpoint names version {hint.checkpoint.version}, behind the checkpoint "
            f"at {cp.version}; writing the checkpoint again moves it"
        )
    return None


def _names(hint: LastCheckpoint, cp: Checkpoint | None) -> bool:
    """Whether the hint describes `cp` (same version and, for multi-part, as many parts)."""
    if cp is None or hint.version != cp.version:
        return False
    return hint.parts is None or hint.parts <= 1 or len(cp.files) == hint.parts


def _recent_classic(table: Table, version: int, window: int) -> bool:
    """Whether a classic-named checkpoint exists within `window` versions before `version`."""
    listing = table.list_log(max(0, version - window))
    return any(c.kind is Kind.CHECKPOINT for found in listing.checkpoints.values() for c in found)


def spark_done(table: Table, out: Outcome, planned_version: int) -> None:
    """Delta Spark's checkpoint is believed once `_last_checkpoint` names its version or a
    later one (the version planned, when the launcher cannot see the job's output)."""
    tag = out.job_id
    reported = (out.job_result or {}).get("checkpointVersion")
    version = int(reported) if reported is not None else planned_version
    hint = table.read_hint().checkpoint
    if hint is None or hint.version < version:
        found = "none" if hint is None else hint.version
        out.result = Result.FAILED
        out.message = (
            f"Spark job {tag} ended, but _last_checkpoint names {found}, "
            f"not version {version} or later"
        )
        out.error = JobFailed(out.message)
        return
    # A SparkApplication's output is not seen: the version is the one the log names.
    out.version = version = version if reported is not None else hint.version
    out.message = f"Delta Spark wrote the checkpoint at version {version} (Spark job {tag})"


def run(r: Running) -> Outcome:
    step, dry_run = r.step, r.dry_run
    repaired = [_repair(r.table, r.plan, version, dry_run) for version in step.repair]
    if not step.regular:
        outcome = repaired[-1]
    else:
        outcome = _write(r.table, r.plan, step, dry_run)
        outcome.files = [f for x in repaired for f in x.files] + outcome.files
    if repaired:
        verb = "would rewrite" if dry_run else "rewrote"
        keys = ", ".join(x.message for x in repaired)  # a repair's message is its file
        outcome.message = f"{verb} damaged checkpoint {keys}" + (
            f"; {outcome.message}" if step.regular else ""
        )
        outcome.detail = replace(detail(outcome), repaired=list(step.repair))
    return outcome


def _repair(table: Table, plan: Plan, version: int, dry_run: bool) -> Outcome:
    """Rewrite a damaged checkpoint at its own version, as one classic-named file: readers
    prefer that name, so none reads the damaged one again."""
    pol = plan.policy
    result = write_source(
        table,
        checkpoint_source(table, version),
        plan.now_ms,
        pol.deleted_file_retention_ms,
        pol.txn_retention_ms,
        dry_run,
        classic=True,
    )
    return Outcome(
        CHECKPOINT,
        Result.DRY_RUN if dry_run else Result.DONE,
        result.key,
        version=result.version,
        files=list(result.keys) if dry_run else [],
    )


def _write(table: Table, plan: Plan, step: Step, dry_run: bool) -> Outcome:
    pol = plan.policy
    source = _source(table, plan, step)
    result = write_source(
        table,
        source,
        plan.now_ms,
        pol.deleted_file_retention_ms,
        pol.txn_retention_ms,
        dry_run,
        part_size=pol.checkpoint_part_size,
        classic=step.classic_v2,
    )
    message = (
        f"{result.key} ({result.layout}, {len(result.keys)} files): {result.adds} files, "
        f"{result.tombstones} tombstones ({result.expired_tombstones} expired)"
    )
    if not dry_run and not result.last_checkpoint_moved:
        message += "; _last_checkpoint already pointed at a newer checkpoint"
    written = list(result.keys)
    checksum = None
    if pol.write_checksum:  # needs every file: loaded when the source did not
        snap = source.snapshot if source.full else load_for_checkpoint(table, plan.version)
        checksum = crc.write_crc(table, snap, dry_run)
        if checksum.written or (dry_run and not checksum.existed):
            written.append(checksum.key)
        state = "written" if checksum.written else "would be written" if dry_run else ""
        message += f"; {checksum.key} {'already there' if checksum.existed else state}"
    return Outcome(
        CHECKPOINT,
        Result.DRY_RUN if dry_run else Result.DONE,
        message,
        version=result.version,
        files=written if dry_run else [],
        detail=CheckpointRun(result, checksum),
    )


def _source(table: Table, plan: Plan, step: Step) -> CheckpointSource:
    """The step's own source, else: every file when the checksum needs them all, otherwise
    the newest checkpoint streamed when it can be."""
    if step.source is not None:
        return step.source
    if plan.policy.write_checksum:
        return CheckpointSource(table, load_for_checkpoint(table, plan.version))
    return checkpoint_source(table, plan.version)


def _done(o: Outcome) -> str:
    return f"wrote the checkpoint at version {o.version}"


def _history(o: Outcome) -> dict[str, int]:
    written = detail(o).written
    if written is None:
        return {}
    return {"checkpointBytes": written.size_bytes, "checkpointActions": written.rows}


def _repaired(o: Outcome) -> tuple[str, str] | None:
    """A Warning: a checkpoint was damaged (readers may have failed on it until now)."""
    return ("CheckpointRepaired", o.message) if detail(o).repaired else None


def _report(o: Outcome) -> dict[str, Any]:
    return {"checkpointVersion": o.version, "repairedCheckpoints": detail(o).repaired}


SPEC = OperationSpec(
    CHECKPOINT,
    "writes a checkpoint and moves _last_checkpoint; rewrites damaged checkpoints first",
    Cadence.NEW_VERSION,
    plan,
    run,
    # Every file loaded (no checkpoint to stream, or N.crc): 2 KiB an action.
    streamed_checkpoint(2048),
    "Checkpointed",
    _done,
    force=force,
    spark=on_spark,
    spark_done=spark_done,
    engine=lambda policy: policy.checkpoint_engine,
    history=_history,
    report=_report,
    warning=_repaired,
    brief=lambda entry: f"v{entry.get('version')}",
    catalog=OnCatalogManaged.RUNS,
)
