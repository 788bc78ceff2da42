"""Data retention by age (expire): where the policy sets dataRetention, the files whose rows
are all older than now minus `keep` are removed from the table in one DELETE commit
(delta/expire/); vacuum deletes them once the deleted-file retention has passed. Never on a
catalog-managed table: it commits, and its catalog owns data cleanup."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deltakeeper.compaction.launcher import JobFailed
from deltakeeper.delta.errors import InvalidInputError, UnsupportedProtocolError
from deltakeeper.delta.expire import plan as expiry
from deltakeeper.delta.expire.run import ExpiryRun, commit_plan, read_snapshot, rfc3339_us
from deltakeeper.delta.expire.times import cutoff_us
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.memory import per_action
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.spec import (
    COUNT_SCHEMA,
    OperationSpec,
    OwnCounter,
    Planning,
    Running,
)
from deltakeeper.maintenance.operations.steps import Step
from deltakeeper.maintenance.policy import (
    EXPIRE_EVERY_MS,
    DataRetention,
    Engine,
    Policy,
    Rewrite,
)
from deltakeeper.units import format_bytes

EXPIRE = Operation.EXPIRE


def settings(policy: Policy) -> DataRetention:
    if policy.data_retention is None:
        raise InvalidInputError(
            "expire needs dataRetention (its column and keep), or `deltakeeper expire`"
        )
    return policy.data_retention


def plan(p: Planning) -> Step:
    snap = p.snap if isinstance(p.snap, Snapshot) and _full(p.snap) else None
    try:
        retention = settings(p.policy)
        snap = snap or read_snapshot(p.table, p.snap.version)
        found = expiry.expiry_plan(snap, retention.column, cutoff_us(p.now_ms, retention.keep_ms))
        expiry.check_fraction(found, retention.max_fraction)
    except (InvalidInputError, UnsupportedProtocolError) as e:
        return Step(EXPIRE, False, str(e), refused=True, error=e)
    cutoff = rfc3339_us(found.cutoff_us)
    if not found.files:
        reason = f"nothing older than the cutoff {cutoff} ({found.predicate})"
        return Step(EXPIRE, False, reason + _kept(found), found)
    reason = (
        f"{found.files} files ({found.rows} rows, {format_bytes(found.bytes)}) older than the "
        f"cutoff {cutoff}, by {found.by}"
    )
    return Step(EXPIRE, True, reason + _kept(found), found)


def _full(snap: Snapshot) -> bool:
    return "numRecords" in snap.files.column_names and "stats" in snap.files.column_names


def _kept(found: expiry.ExpiryPlan) -> str:
    kept = []
    if found.straddling:
        kept.append(f"{len(found.straddling)} straddling the cutoff")
    if found.without_stats:
        kept.append(f"{len(found.without_stats)} without statistics for {found.column.name}")
    return f"; kept: {', '.join(kept)}" if kept else ""


def run(r: Running) -> Outcome:
    found = r.step.detail
    assert isinstance(found, expiry.ExpiryPlan)
    done = commit_plan(r.table, found, r.dry_run)
    what = f"{found.files} files, {found.rows} rows ({format_bytes(found.bytes)})"
    cutoff = rfc3339_us(found.cutoff_us)
    if r.dry_run:
        message = f"would remove {what} older than {cutoff}"
        files = found.paths()
        return Outcome(EXPIRE, Result.DRY_RUN, message + _kept(found), files=files, detail=done)
    message = f"removed {what} older than {cutoff} in version {done.version}"
    return Outcome(EXPIRE, Result.DONE, message + _kept(found), version=done.version, detail=done)


def rewrite_spec(found: expiry.ExpiryPlan, planned_version: int, now_ms: int) -> dict[str, Any]:
    """The Spark job (compaction/job.py, operation expire) that deletes the expired rows the
    straddling files hold: Delta Spark's `DELETE WHERE predicate`, limited to their partitions
    (the whole table when it is not partitioned), on the version after the expiry's commit."""
    meta = found.base.metadata
    names = compaction_plan.logical_partition_names(meta)
    spec: dict[str, Any] = {
        "jobId": f"{compaction_plan.job_id(meta.id, now_ms)}-{EXPIRE}",
        "operation": str(EXPIRE),
        "plannedVersion": planned_version,
        "condition": found.predicate,
        "partitions": [
            {names.get(k, k): (v or None) for k, v in values.items()}
            for values in found.straddling_partitions
        ],
    }
    types = compaction_plan.spark_partition_types(meta)
    if types is not None:
        spec["partitionTypes"] = types
    return spec


def finish(p: Planning, first: Step, why: str) -> Step | None:
    """Delta Spark's DELETE of the expired rows the straddling files hold (dataRetention.rewrite
    is spark): after the expiry's commit, on the version it wrote; alone when there was
    nothing to remove whole."""
    found = first.detail
    if not isinstance(found, expiry.ExpiryPlan) or not found.straddling:
        return None
    reason = (
        f"Delta Spark's DELETE WHERE {found.predicate} on the {len(found.straddling)} files "
        f"straddling the cutoff"
    )
    if not first.due:
        spec = rewrite_spec(found, p.snap.version, p.now_ms)
        return Step(EXPIRE, True, reason, spark=why, job_spec=spec)

    def after_commit() -> Step:
        spec = rewrite_spec(found, p.table.latest_version(), p.now_ms)
        return Step(EXPIRE, True, reason, spark=why, job_spec=spec)

    return Step(EXPIRE, True, reason, after=EXPIRE, plan_later=after_commit, spark=why)


def spark_done(table: Table, out: Outcome, planned_version: int) -> None:
    """The DELETE job's commits, read back from the log by its id: the rows they deleted, the
    files they rewrote."""
    back, reported = compaction_plan.job_commits(table, str(out.job_id), out.job_result or {})
    out.detail = back
    unproven = compaction_plan.not_in_log(back, reported)
    if unproven is not None:
        out.result, out.message, out.error = Result.FAILED, unproven, JobFailed(unproven)
        return
    if not back.versions:
        out.message = "Delta Spark's DELETE found no row to delete"
        return
    out.version = back.versions[-1]
    out.message = (
        f"Delta Spark's DELETE deleted {back.rows_deleted} rows, rewriting {back.files_removed} "
        f"files as {back.files_added}, in version {out.version}"
    )


def skip(step: Step) -> Outcome:
    """An expiry with nothing to remove still reports its cutoff and what it kept."""
    found = step.detail if isinstance(step.detail, expiry.ExpiryPlan) else None
    detail = ExpiryRun(found, dry_run=False) if found is not None else None
    return Outcome(EXPIRE, Result.SKIPPED, step.reason, detail=detail)


def _done(o: Outcome) -> str:
    if o.detail_as(compaction_plan.Compacted) is not None:
        return o.message  # its DELETE job's
    return f"expired {o.message.removeprefix('removed ')}"


def _dry_run(o: Outcome) -> tuple[str, str]:
    return "ExpireDryRun", f"expire {o.message}"


def counts(o: Outcome) -> dict[str, int]:
    """What a run removed (a dry run: nothing), and what it kept."""
    done = o.detail_as(ExpiryRun)
    if done is None:
        return {}
    p = done.plan
    removed = o.result is Result.DONE
    return {
        "removedFiles": p.files if removed else 0,
        "removedRows": p.rows if removed else 0,
        "removedBytes": p.bytes if removed else 0,
        "straddlingFiles": len(p.straddling),
        "filesWithoutStats": len(p.without_stats),
    }


def _files(o: Outcome) -> int:
    return _removed(o)["files"]


def _rows(o: Outcome) -> int:
    return _removed(o)["rows"]


def _bytes(o: Outcome) -> int:
    return _removed(o)["bytes"]


def _retention(policy: Policy) -> DataRetention:
    """The policy's dataRetention; where it has none, one that schedules and dry-runs nothing."""
    return policy.data_retention or DataRetention("", 0)


def _engine(policy: Policy) -> Engine:
    """Spark where straddling files go to Delta Spark's DELETE; the expiry itself is ours."""
    return Engine.SPARK if _retention(policy).rewrite is Rewrite.SPARK else Engine.LOCAL


def _removed(o: Outcome) -> dict[str, int]:
    """What a done expiry removed (files, rows, bytes: its counters), whole files; of a
    DELETE job, the rows it deleted (the files it rewrote are not expired); else 0 of each."""
    out = dict.fromkeys(("files", "rows", "bytes"), 0)
    if o.result is not Result.DONE:
        return out
    done, job = o.detail_as(ExpiryRun), o.detail_as(compaction_plan.Compacted)
    if done is not None:
        out |= {"files": done.plan.files, "rows": done.plan.rows, "bytes": done.plan.bytes}
    elif job is not None:
        out["rows"] = job.rows_deleted
    return out


_OWN = (
    "cutoff",
    "removedFiles",
    "removedRows",
    "removedBytes",
    "straddlingFiles",
    "filesWithoutStats",
)


def _record(o: Outcome, previous: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """The expiry's cutoff and counts; a DELETE job's run keeps those of the expiry it
    finishes and adds its own (`rewrite`)."""
    done, job = o.detail_as(ExpiryRun), o.detail_as(compaction_plan.Compacted)
    if done is not None:
        return {"cutoff": rfc3339_us(done.plan.cutoff_us), **counts(o)}
    if job is not None:
        kept = {k: previous[k] for k in _OWN if k in previous}
        return {**kept, "rewrite": _rewrite_json(job)}
    return {}


def _rewrite_json(job: compaction_plan.Compacted) -> dict[str, Any]:
    return {
        "jobId": job.job_id,
        "rowsDeleted": job.rows_deleted,
        "filesRemoved": job.files_removed,
        "filesAdded": job.files_added,
    }


def _history(o: Outcome) -> dict[str, int]:
    job = o.detail_as(compaction_plan.Compacted)
    if job is None:
        return counts(o)
    return {"removedRows": job.rows_deleted, "rewrittenFiles": job.files_removed}


def _report(o: Outcome) -> dict[str, Any]:
    done, job = o.detail_as(ExpiryRun), o.detail_as(compaction_plan.Compacted)
    if job is not None:
        return {"rewrite": _rewrite_json(job)}
    return {"expire": done.to_json()} if done is not None else {}


SPEC = OperationSpec(
    EXPIRE,
    "removes the rows older than dataRetention.keep from the table, whole files at a time, "
    "in one DELETE commit",
    Cadence.SCHEDULED,
    plan,
    run,
    per_action(1024),
    "Expired",
    _done,
    every_ms=EXPIRE_EVERY_MS,
    asked=lambda policy: policy.data_retention is not None,
    skip=skip,
    dry_run_event=_dry_run,
    catalog=OnCatalogManaged.NEVER,
    # removed from the table, not deleted: vacuum deletes them after its retention
    brief=lambda entry: f"{entry.get('removedFiles', 0)} files removed",
    schedule=lambda policy: _retention(policy).schedule,
    dry_run=lambda policy: _retention(policy).dry_run,
    counters=(
        OwnCounter(
            "deltakeeper_expired_files_total", "Files expiry removed from the table", _files
        ),
        OwnCounter("deltakeeper_expired_rows_total", "Rows those files held", _rows),
        OwnCounter("deltakeeper_expired_bytes_total", "Bytes of those files", _bytes),
    ),
    record=_record,
    record_schema={
        "cutoff": {"type": "string", "format": "date-time", "description": "Now minus keep."},
        "removedFiles": {**COUNT_SCHEMA, "description": "Files removed from the table."},
        "removedRows": {**COUNT_SCHEMA, "description": "Rows those files held."},
        "removedBytes": {**COUNT_SCHEMA, "description": "Bytes of those files."},
        "straddlingFiles": {
            **COUNT_SCHEMA,
            "description": "Files with rows on both sides of the cutoff, kept.",
        },
        "filesWithoutStats": {
            **COUNT_SCHEMA,
            "description": "Files without statistics for the column, kept (compute-stats).",
        },
        "rewrite": {
            "type": "object",
            "description": "Delta Spark's DELETE of the straddling files' expired rows "
            "(rewrite: spark), once its job ended.",
            "properties": {
                "jobId": {"type": "string"},
                "rowsDeleted": COUNT_SCHEMA,
                "filesRemoved": COUNT_SCHEMA,
                "filesAdded": COUNT_SCHEMA,
            },
        },
    },
    history=_history,
    report=_report,
    engine=_engine,
    engine_key="dataRetention.rewrite",
    then=finish,
    spark_done=spark_done,
)
