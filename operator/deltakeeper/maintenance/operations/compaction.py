"""Compaction: which partitions a Spark job rewrites and why (compaction_plan.py decides from
the file actions), where the policy enables it; the job runs through the caller's launcher,
and its commits are read back from the log before anything is believed."""

from __future__ import annotations

from deltakeeper.compaction.launcher import JobFailed, JobRequest, JobResult, JobRunning, Planned
from deltakeeper.delta.errors import InvalidInputError, UnsupportedProtocolError
from deltakeeper.delta.schema import LEAN_ADD
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.memory import per_action
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.spec import (
    COUNT_SCHEMA,
    OperationSpec,
    Planning,
    Running,
)
from deltakeeper.maintenance.operations.steps import Step
from deltakeeper.units import format_bytes

COMPACTION = Operation.COMPACTION


def plan(p: Planning) -> Step:
    return planned(p.table, p.with_files(), p)


def planned(table: Table, snap: Snapshot, p: Planning) -> Step:
    """Which partitions a job would rewrite, from the file actions; refused on tables whose
    features could change what a correct plan is (catalog-managed ones included)."""
    refused = compaction_plan.refusal(snap)
    if refused:
        error = UnsupportedProtocolError(refused)
        return Step(COMPACTION, False, refused, refused=True, error=error)
    files = snap.files
    if "stats" not in files.column_names and snap.protocol.has("deletionVectors"):
        # Deleted-row ratios need the record counts; only DV tables pay for the stats.
        files = table.snapshot(version=snap.version, add_cols=(*LEAN_ADD, "stats")).files
    names = compaction_plan.logical_partition_names(snap.metadata)
    timestamps = compaction_plan.timestamp_partitions(snap.metadata)
    found = compaction_plan.plan(files, tuple(names), p.policy.compaction, p.now_ms, timestamps)
    return step(snap, found, p.now_ms)


def step(snap: Snapshot, found: compaction_plan.CompactionPlan, now_ms: int) -> Step:
    """The step for the partitions `found` names (planned here, or by `compact`'s flags)."""
    if not found.due:
        return Step(COMPACTION, False, found.reason(), found)
    tag = compaction_plan.job_id(snap.metadata.id, now_ms)
    names = compaction_plan.logical_partition_names(snap.metadata)
    types = compaction_plan.spark_partition_types(snap.metadata)
    actions = snap.num_files + snap.num_tombstones
    spec = compaction_plan.job_spec(found, names, tag, snap.version, types, actions)
    return Step(COMPACTION, True, found.reason(), found, job_spec=spec)


def run(r: Running) -> Outcome:
    """Launch the planned job; wait for it when the caller does (the CLI), else hand the
    running job back in the Outcome (the daemon tracks it)."""
    step, plan, compactor = r.step, r.plan, r.compactor
    spec = step.job_spec
    assert isinstance(step.detail, compaction_plan.CompactionPlan) and spec is not None
    tag = str(spec["jobId"])
    if r.dry_run:
        message = f"would run job {tag}: {step.reason}"
        return Outcome(COMPACTION, Result.DRY_RUN, message, job_id=tag)
    if compactor is None:
        raise InvalidInputError("compaction needs a job launcher (spark-submit) here")
    deadline_s = plan.policy.compaction.deadline_ms / 1000
    request = JobRequest(
        r.table.uri,
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
    return job_outcome(r.table, tag, job.wait())


def job_outcome(table: Table, tag: str, result: JobResult) -> Outcome:
    """A finished job as an Outcome, its commits read back from the table's own log: the
    job's line says what it did, the commits tagged with its id prove it."""
    out = Outcome(COMPACTION, Result.FAILED, "", job_id=tag, job_result=result.result)
    if not result.ok:
        out.message, out.error = result.error, JobFailed(result.error)
        return out
    back, reported = compaction_plan.job_commits(table, tag, result.result)
    out.detail = back
    unproven = compaction_plan.not_in_log(back, reported)
    if unproven is not None:
        out.message, out.error = unproven, JobFailed(unproven)
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


_REWRITTEN = ("filesRemoved", "filesAdded", "bytesRemoved", "bytesAdded")


def _record(o: Outcome, previous: object, now_ms: int) -> dict[str, object]:
    """Its files and bytes removed and added, as its commits in the log show."""
    back = o.detail_as(compaction_plan.Compacted)
    if back is None:
        return {}
    c = back.to_json()
    return {k: c[k] for k in ("jobId", *_REWRITTEN)}


def _history(o: Outcome) -> dict[str, int]:
    c = o.detail_as(compaction_plan.Compacted)
    if c is None:
        return {}
    return {
        "filesRemoved": c.files_removed,
        "filesAdded": c.files_added,
        "bytesRemoved": c.bytes_removed,
        "bytesAdded": c.bytes_added,
    }


def _report(o: Outcome) -> dict[str, object]:
    """Its job's id and line, and what the job's commits did (null until it ended)."""
    back = o.detail_as(compaction_plan.Compacted)
    return {"jobId": o.job_id, "job": o.job_result, "compacted": back and back.to_json()}


SPEC = OperationSpec(
    COMPACTION,
    "rewrites small files (and files with many deleted rows) as a Spark job, where enabled",
    Cadence.JOBS,
    plan,
    run,
    per_action(1536),
    "Compacted",
    lambda o: f"job {o.job_id}: {o.message}",
    asked=lambda policy: policy.compaction.enabled,
    record=_record,
    record_schema={**{k: COUNT_SCHEMA for k in _REWRITTEN}, "jobId": {"type": "string"}},
    history=_history,
    report=_report,
    started_reason="CompactionStarted",
    brief=lambda entry: f"{entry.get('filesRemoved', 0)}->{entry.get('filesAdded', 0)} files",
    catalog=OnCatalogManaged.NEVER,
)
