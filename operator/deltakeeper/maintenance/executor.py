"""Carry out a Plan through delta/ and say what changed.

The only place in maintenance/ that writes or deletes. A dry run walks the same steps and stops
before each write. After a step fails the remaining steps are skipped: a failure means the store
or the log is not what the plan saw, and deleting on that basis is the one thing not to risk.
A step the plan marks optional (`compact`'s checkpoint before its job) is the one exception.
"""

from __future__ import annotations

import enum
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.compaction.launcher import (
    Job,
    JobFailed,
    JobRequest,
    JobResult,
    JobRunning,
    Launcher,
    Planned,
)
from deltakeeper.delta import cleanup, compute_stats, crc, log_compaction, manifest, vacuum
from deltakeeper.delta.checkpoint import (
    CheckpointResult,
    CheckpointSource,
    checkpoint_source,
    load_for_checkpoint,
    write_source,
)
from deltakeeper.delta.crc import CrcResult
from deltakeeper.delta.errors import DeltaError, InvalidInputError
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum_info import InfoStatus, LastVacuumInfo
from deltakeeper.delta.vacuum_modes import Mode
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.planner import Plan, Step
from deltakeeper.maintenance.policy import COMPACTION_RETRY_MS
from deltakeeper.units import format_bytes

Progress = Callable[[str, int, int], None]  # operation, done, total
AFTER_FAILURE = "an earlier step failed"  # the message of a step skipped because of one


class Result(enum.StrEnum):
    """What became of one step. SKIPPED_AFTER_FAILURE reads "skipped", as JSON, status and
    metrics have always shown it, but is its own member: tell the two apart with `is`."""

    def __new__(cls, text: str, name: str | None = None) -> Result:
        member = str.__new__(cls, text)
        member._value_ = name or text
        return member

    DONE = "done"
    DRY_RUN = "dry-run"
    SKIPPED = "skipped"
    SKIPPED_AFTER_FAILURE = "skipped", "skipped-after-failure"
    REFUSED = "refused"
    FAILED = "failed"
    STARTED = "started"  # compaction in the background: its end is reported later


@dataclass(frozen=True)
class Compactor:
    """How a caller runs compaction jobs: its launcher, the table's storage options (Spark
    reads the table itself), and whether the step waits for the job's end."""

    launcher: Launcher
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    wait: bool = True
    owner: tuple[str, str] | None = None  # the table's resource, where jobs belong to one
    retry_ms: int = COMPACTION_RETRY_MS  # the wait after a failed job, doubled per failure


CHECKPOINT, COMPACTION, CLEANUP, VACUUM, STATS, LOG_COMPACTION, MANIFEST = tuple(Operation)


@dataclass(slots=True)
class VacuumRun:
    """What a vacuum step did besides deleting: how it found its candidates, at what cost."""

    mode: Mode
    reason: str  # why this mode ran
    candidates: int  # files considered: listed, named by the log or inventoried
    listed: int  # objects a listing or an inventory returned (LITE: 0)
    requests: dict[str, int]  # storage requests by operation, planning included
    commits: tuple[int, int] | None  # LITE: the commits read
    info: LastVacuumInfo  # _last_vacuum_info as the run found it
    records: int | None  # the N it writes there (a dry run: would write); None: left alone

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


@dataclass(slots=True)
class Outcome:
    operation: Operation
    result: Result
    message: str = ""
    seconds: float = 0.0
    deleted_files: int = 0
    deleted_bytes: int = 0
    written_files: int = 0  # writers: files given statistics, manifests or compaction files
    checkpoint_version: int | None = None
    files: list[str] = field(default_factory=list)  # what a dry run would write or delete
    repaired: list[int] = field(default_factory=list)  # checkpoint: damaged versions rewritten
    # In full, for a front-end that reports more than the counts (the CLI); not in to_json.
    error: DeltaError | None = field(default=None, repr=False)  # why it failed or was refused
    written: CheckpointResult | None = field(default=None, repr=False)  # checkpoint
    checksum: CrcResult | None = field(default=None, repr=False)  # checkpoint
    deleted_folders: int = 0  # vacuum
    vacuum: VacuumRun | None = None  # vacuum: its mode, candidates and requests
    stats: compute_stats.StatsRun | None = field(default=None, repr=False)  # stats: its run
    job: Job | None = field(default=None, repr=False)  # compaction started, not waited for
    job_id: str | None = None  # compaction
    job_result: dict[str, Any] | None = None  # compaction: the job's own JSON line
    compacted: compaction_plan.Compacted | None = None  # compaction: its commits, read from the log

    def to_json(self) -> dict[str, Any]:
        out = self._json()
        if self.vacuum is not None:
            out["vacuum"] = self.vacuum.to_json()
        if self.operation is COMPACTION:
            out["jobId"] = self.job_id
            out["job"] = self.job_result
            out["compacted"] = self.compacted.to_json() if self.compacted else None
        elif self.job_id is not None:  # a checkpoint or vacuum Delta Spark ran
            out.update(engine="spark", jobId=self.job_id, job=self.job_result)
        return out

    def _json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "result": self.result,
            "message": self.message,
            "seconds": round(self.seconds, 3),
            "checkpointVersion": self.checkpoint_version,
            "deletedFiles": self.deleted_files,
            "deletedBytes": self.deleted_bytes,
            "writtenFiles": self.written_files,
            "files": self.files,
            "repairedCheckpoints": self.repaired,
        }


@dataclass
class Report:
    uri: str
    version: int
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> Outcome | None:
        return next((o for o in self.outcomes if o.result is Result.FAILED), None)

    def total(self, attr: str) -> int:
        return sum(int(getattr(o, attr)) for o in self.outcomes)

    def lines(self) -> list[str]:
        return [f"  {o.operation}: {o.result}: {o.message}" for o in self.outcomes]


def execute(
    table: Table,
    plan: Plan,
    dry_run: bool = False,
    progress: Progress | None = None,
    compactor: Compactor | None = None,
    dry_operations: Collection[Operation] = (),
) -> Report:
    """Run every due step of `plan` in order; the first failure of a step that is not
    `optional` skips the rest. Steps of `dry_operations` are shown, as a dry run would, and
    the others run (a DeltaTable's `vacuum.dryRun`)."""
    report = Report(plan.uri, plan.version, dry_run)
    started = time.monotonic()
    blocked = False
    done: set[Operation] = set()
    for step in plan.steps:
        if step.after is not None:
            if step.after not in done:
                continue  # what it follows did not happen: neither does it
            assert step.plan_later is not None
            try:
                step = step.plan_later()
            except Exception as e:  # planned only now: failing to plan is the step failing
                message = f"{type(e).__name__}: {e}"
                report.outcomes.append(Outcome(step.operation, Result.FAILED, message))
                blocked = True
                continue
        elif blocked:
            report.outcomes.append(
                Outcome(step.operation, Result.SKIPPED_AFTER_FAILURE, AFTER_FAILURE)
            )
            continue
        dry = dry_run or step.operation in dry_operations
        outcome = _run_step(table, plan, step, dry, progress, compactor)
        report.outcomes.append(outcome)
        blocked = blocked or (outcome.result is Result.FAILED and not step.optional)
        if outcome.result is Result.DONE:
            done.add(step.operation)
    report.seconds = time.monotonic() - started
    return report


def _run_step(
    table: Table,
    plan: Plan,
    step: Step,
    dry_run: bool,
    progress: Progress | None,
    compactor: Compactor | None,
) -> Outcome:
    if step.refused:
        return Outcome(step.operation, Result.REFUSED, step.reason, error=step.error)
    if not step.due:
        skipped = Outcome(step.operation, Result.SKIPPED, step.reason)
        if isinstance(step.detail, vacuum.VacuumPlan):  # its mode and what looking cost
            skipped.vacuum = vacuum_run(step.detail, Counter())
        return skipped
    started = time.monotonic()
    if step.spark is not None:
        outcome = _on_spark(table, plan, step, dry_run, compactor)
        outcome.seconds = time.monotonic() - started
        return outcome
    runners = {
        CHECKPOINT: _checkpoint,
        CLEANUP: _cleanup,
        VACUUM: _vacuum,
        STATS: _stats,
        LOG_COMPACTION: _log_compaction,
        MANIFEST: _manifest,
    }
    try:
        if step.operation is COMPACTION:
            outcome = _compaction(table, plan, step, dry_run, compactor)
        else:
            outcome = runners[step.operation](table, plan, step, dry_run, progress)
    except DeltaError as e:
        outcome = Outcome(step.operation, Result.FAILED, str(e), error=e)
    outcome.seconds = time.monotonic() - started
    return outcome


def _stats(table: Table, plan: Plan, step: Step, dry_run: bool, _: Progress | None) -> Outcome:
    run = compute_stats.compute_stats(
        table, dry_run, now_ms=plan.now_ms, base=step.base, since=step.stats_since
    )
    if run.unreadable:
        path, why = run.unreadable[0]
        more = f" (and {len(run.unreadable) - 1} more)" if len(run.unreadable) > 1 else ""
        return Outcome(STATS, Result.FAILED, f"{path}: not read: {why}{more}", stats=run)
    looked = f"{run.files} files"
    if run.since is not None:
        looked = f"the {looked} added since {run.since}"
    if not run.given:
        return Outcome(STATS, Result.SKIPPED, f"every file of {looked} has statistics", stats=run)
    verb = "would give" if dry_run else "gave"
    message = f"{verb} {run.given} of {looked} statistics"
    if run.commits:
        message += f" in versions {run.commits[0]}..{run.commits[-1]}"
    if run.deferred:
        message += f"; {run.deferred} wait for the next run (read budget)"
    result = Result.DRY_RUN if dry_run else Result.DONE
    return Outcome(STATS, result, message, written_files=run.given, stats=run)


def _log_compaction(
    table: Table, plan: Plan, step: Step, dry_run: bool, _: Progress | None
) -> Outcome:
    assert step.log_range is not None
    done = log_compaction.compact_log(table, *step.log_range, dry_run)
    if done.existed:
        return Outcome(LOG_COMPACTION, Result.SKIPPED, f"{done.key} exists already")
    verb = "would write" if dry_run else "wrote"
    message = f"{verb} {done.key}: {done.actions} actions, {done.size_bytes} bytes"
    files = [done.key] if dry_run else []
    result = Result.DRY_RUN if dry_run else Result.DONE
    return Outcome(LOG_COMPACTION, result, message, written_files=1, files=files)


def _manifest(table: Table, plan: Plan, step: Step, dry_run: bool, _: Progress | None) -> Outcome:
    run = manifest.generate(table, dry_run)
    if not run.written and not run.deleted:
        return Outcome(MANIFEST, Result.SKIPPED, f"{run.unchanged} manifests already current")
    verb = ("would write", "would delete") if dry_run else ("wrote", "deleted")
    message = f"{verb[0]} {len(run.written)} manifests, {verb[1]} {len(run.deleted)} stale"
    files = [*run.written, *run.deleted] if dry_run else []
    result = Result.DRY_RUN if dry_run else Result.DONE
    return Outcome(MANIFEST, result, message, written_files=len(run.written), files=files)


def _checkpoint(
    table: Table, plan: Plan, step: Step, dry_run: bool, progress: Progress | None
) -> Outcome:
    repaired = [_repair(table, plan, version, dry_run) for version in step.repair]
    if not step.regular:
        outcome = repaired[-1]
    else:
        outcome = _regular_checkpoint(table, plan, step, dry_run)
        outcome.files = [f for r in repaired for f in r.files] + outcome.files
    if repaired:
        verb = "would rewrite" if dry_run else "rewrote"
        keys = ", ".join(r.message for r in repaired)  # a repair's message is its file
        outcome.message = f"{verb} damaged checkpoint {keys}" + (
            f"; {outcome.message}" if step.regular else ""
        )
        outcome.repaired = list(step.repair)
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
        checkpoint_version=result.version,
        files=list(result.keys) if dry_run else [],
    )


def _regular_checkpoint(table: Table, plan: Plan, step: Step, dry_run: bool) -> Outcome:
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
        checkpoint_version=result.version,
        files=written if dry_run else [],
        written=result,
        checksum=checksum,
    )


def _source(table: Table, plan: Plan, step: Step) -> CheckpointSource:
    """The step's own source, else: every file when the checksum needs them all, otherwise
    the newest checkpoint streamed when it can be."""
    if step.source is not None:
        return step.source
    if plan.policy.write_checksum:
        return CheckpointSource(table, load_for_checkpoint(table, plan.version))
    return checkpoint_source(table, plan.version)


def _compaction(
    table: Table, plan: Plan, step: Step, dry_run: bool, compactor: Compactor | None
) -> Outcome:
    """Launch the planned job; wait for it when the caller does (the CLI), else hand the
    running job back in the Outcome (the daemon tracks it)."""
    spec = step.job_spec
    assert isinstance(step.detail, compaction_plan.CompactionPlan) and spec is not None
    tag = str(spec["jobId"])
    if dry_run:
        message = f"would run job {tag}: {step.reason}"
        return Outcome(COMPACTION, Result.DRY_RUN, message, job_id=tag)
    if compactor is None:
        raise InvalidInputError("compaction needs a job launcher (spark-submit) here")
    deadline_s = plan.policy.compaction.deadline_ms / 1000
    request = JobRequest(
        table.uri,
        spec,
        compactor.storage_options,
        deadline_s,
        compactor.owner,
        plan.policy.compaction.spark_application,
        Planned(step.detail.files, step.detail.bytes),
    )
    try:
        job = compactor.launcher.start(request)
    except JobRunning as e:
        return Outcome(COMPACTION, Result.SKIPPED, str(e), job_id=tag)
    if not compactor.wait:
        message = f"started job {tag}: {step.reason}"
        return Outcome(COMPACTION, Result.STARTED, message, job=job, job_id=tag)
    return job_outcome(table, tag, job.wait())


def job_outcome(table: Table, tag: str, result: JobResult) -> Outcome:
    """A finished job as an Outcome, its commits read back from the table's own log: the
    job's line says what it did, the commits tagged with its id prove it."""
    out = Outcome(COMPACTION, Result.FAILED, "", job_id=tag, job_result=result.result)
    if not result.ok:
        out.message, out.error = result.error, JobFailed(result.error)
        return out
    if "commits" in result.result:
        reported = [int(c["version"]) for c in result.result["commits"] or []]
        back = compaction_plan.read_back(table, tag, reported)
    else:  # a launcher that cannot see the job's output (SparkApplication): the log tells
        since = int(result.result.get("startVersion") or 0)
        back = compaction_plan.read_back(table, tag, compaction_plan.commits_after(table, since))
        reported = list(back.versions)
    out.compacted = back
    if len(back.versions) != len(reported):
        missing = sorted(set(reported) - set(back.versions))
        out.message = f"the job reported commits at {missing}, but the log has none of {tag} there"
        out.error = JobFailed(out.message)
        return out
    out.result = Result.DONE
    if not back.versions:
        out.message = "the job found nothing to do"
        return out
    out.message = (
        f"rewrote {back.files_removed} files ({format_bytes(back.bytes_removed)}) as "
        f"{back.files_added} ({format_bytes(back.bytes_added)}) at version {back.versions[-1]}"
    )
    return out


def _on_spark(
    table: Table, plan: Plan, step: Step, dry_run: bool, compactor: Compactor | None
) -> Outcome:
    """A checkpoint or vacuum as a Spark job (Delta Spark's own) through the compaction
    launcher: waited for when the caller waits (the CLI, `run --once`), else handed back
    running for the daemon to follow."""
    operation, reason, spec = step.operation, str(step.spark), step.job_spec
    assert spec is not None
    tag, policy = str(spec["jobId"]), plan.policy
    if dry_run:
        return Outcome(
            operation, Result.DRY_RUN, f"would run Spark job {tag}: {reason}", job_id=tag
        )
    if compactor is None:
        raise InvalidInputError(f"{reason}, but no Spark launcher is configured here")
    settings = policy.compaction
    request = JobRequest(
        table.uri,
        spec,
        compactor.storage_options,
        settings.deadline_ms / 1000,
        compactor.owner,
        settings.spark_application,
    )
    try:
        started = compactor.launcher.start(request)
    except JobRunning as e:
        return Outcome(operation, Result.SKIPPED, str(e), job_id=tag)
    except InvalidInputError as e:  # no Spark here: no spark-submit, no Java
        message = f"{reason}, and Spark cannot run it here: {e}"
        return Outcome(operation, Result.REFUSED, message, error=e)
    if not compactor.wait:
        message = f"started Spark job {tag}: {reason}"
        return Outcome(operation, Result.STARTED, message, job=started, job_id=tag)
    outcome = spark_outcome(table, operation, tag, started.wait(), plan.version)
    outcome.message += f"; {reason}"
    return outcome


def spark_outcome(
    table: Table, operation: Operation, tag: str, result: JobResult, planned_version: int
) -> Outcome:
    """A finished Spark checkpoint or vacuum (spec.checkpoint.engine, spec.vacuum.engine) as an
    Outcome: a checkpoint is believed once `_last_checkpoint` names its version or a later one
    (the version it was decided at, when the launcher cannot see the job's output)."""
    out = Outcome(operation, Result.FAILED, "", job_id=tag, job_result=result.result)
    if not result.ok:
        out.message, out.error = f"Spark job {tag}: {result.error}", JobFailed(result.error)
        return out
    out.result = Result.DONE
    if operation is CHECKPOINT:
        reported = result.result.get("checkpointVersion")
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
            return out
        # A SparkApplication's output is not seen: the version is the one the log names.
        out.checkpoint_version = version = version if reported is not None else hint.version
        out.message = f"Delta Spark wrote the checkpoint at version {version} (Spark job {tag})"
        return out
    deleted = result.result.get("filesDeleted")
    out.deleted_files = int(deleted or 0)
    counted = f"deleted {deleted} files" if deleted is not None else "ran (no counts logged)"
    out.message = f"Delta Spark's VACUUM {counted} (Spark job {tag})"
    return out


def _cleanup(
    table: Table, plan: Plan, step: Step, dry_run: bool, progress: Progress | None
) -> Outcome:
    detail = step.detail
    if step.replan is not None and not dry_run:
        detail = step.replan()  # the checkpoint step has written its file: plan with it there
    assert isinstance(detail, cleanup.CleanupPlan)
    deleted = 0 if dry_run else cleanup.execute_cleanup(table, detail)
    return _deleting(CLEANUP, detail.files, detail.bytes, deleted, detail.delete, dry_run)


def _vacuum(
    table: Table, plan: Plan, step: Step, dry_run: bool, progress: Progress | None
) -> Outcome:
    detail = step.detail
    assert isinstance(detail, vacuum.VacuumPlan)
    report = None if progress is None else (lambda done, total: progress(VACUUM, done, total))
    before = Counter(table.storage.requests)
    deleted = 0 if dry_run else vacuum.execute_vacuum(table, detail, report)
    folders = 0 if dry_run else vacuum.remove_empty_folders(table, detail)
    if not dry_run:
        vacuum.record_vacuum(table, detail)
    outcome = _deleting(VACUUM, detail.files, detail.bytes, deleted, detail.delete, dry_run)
    outcome.deleted_folders = folders
    outcome.vacuum = vacuum_run(detail, Counter(table.storage.requests) - before)
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


def vacuum_run(detail: vacuum.VacuumPlan, spent: Counter[str]) -> VacuumRun:
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
    )


def _deleting(
    operation: Operation, files: int, size: int, deleted: int, planned: list[Any], dry_run: bool
) -> Outcome:
    if dry_run:
        message = f"would delete {files} files ({format_bytes(size)})"
        return Outcome(operation, Result.DRY_RUN, message, files=[f.key for f in planned])
    # Bytes are the plan's: a planned file someone else removed first is gone all the same.
    message = f"deleted {deleted} files ({format_bytes(size)})"
    return Outcome(operation, Result.DONE, message, deleted_files=deleted, deleted_bytes=size)
