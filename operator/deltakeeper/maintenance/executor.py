"""Carry out a Plan and say what changed.

The only place in maintenance/ that writes or deletes: each operation's runner
(maintenance/operations/) does its writing, called from here. A dry run walks the same steps
and stops before each write. After a step fails the remaining steps are skipped: a failure
means the store or the log is not what the plan saw, and deleting on that basis is the one
thing not to risk. A step the plan marks optional (`compact`'s checkpoint before its job) is
one exception; a step that could not even be planned (an input only it reads cannot be read,
so nothing was done) is the other: it fails alone, under its own name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from deltakeeper.compaction.launcher import JobFailed, JobRequest, JobResult, JobRunning
from deltakeeper.delta.errors import DeltaError, InvalidInputError, Stopped
from deltakeeper.delta.table import Table
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import (
    AFTER_FAILURE,
    Compactor,
    Outcome,
    Progress,
    Report,
    Result,
)
from deltakeeper.maintenance.operations.registry import REGISTRY
from deltakeeper.maintenance.operations.spec import Running
from deltakeeper.maintenance.operations.steps import Plan, Step, unplanned


def execute(
    table: Table,
    plan: Plan,
    dry_run: bool = False,
    progress: Progress | None = None,
    compactor: Compactor | None = None,
    dry_operations: Collection[Operation] = (),
    stop: Callable[[], bool] | None = None,
) -> Report:
    """Run every due step of `plan` in order; the first failure of a step that is not
    `optional`, and was planned, skips the rest. Steps of `dry_operations` are shown, as a dry
    run would, and the others run (a DeltaTable's `vacuum.dryRun`). Once `stop()` is true
    (the daemon is stopping) no step starts, and a long one ends at its next safe point
    (Stopped): the report has the steps done before, and says why in `stopped`."""
    report = Report(plan.uri, plan.version, dry_run)
    started = time.monotonic()
    blocked = False
    done: set[Operation] = set()
    for step in plan.steps:
        if stop is not None and stop():
            report.stopped = f"stopped before {step.operation}"
            break
        if step.after is not None:
            if step.after not in done:
                continue  # what it follows did not happen: neither does it
            assert step.plan_later is not None
            try:
                step = step.plan_later()
            except Exception as e:  # planned only now: failing to plan is the step failing
                step = unplanned(step.operation, e)
        elif blocked:
            report.outcomes.append(
                Outcome(step.operation, Result.SKIPPED_AFTER_FAILURE, AFTER_FAILURE)
            )
            continue
        dry = dry_run or step.operation in dry_operations
        try:
            outcome = _run_step(table, plan, step, dry, progress, compactor, stop)
        except Stopped as e:
            report.stopped = str(e)
            break
        report.outcomes.append(outcome)
        alone = step.optional or step.failed  # nothing was done that the others would trust
        blocked = blocked or (outcome.result is Result.FAILED and not alone)
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
    stop: Callable[[], bool] | None = None,
) -> Outcome:
    spec = REGISTRY[step.operation]
    if step.refused:
        return Outcome(step.operation, Result.REFUSED, step.reason, error=step.error)
    if step.failed:
        return Outcome(step.operation, Result.FAILED, step.reason, error=step.error)
    if not step.due:
        if spec.skip is not None:
            return spec.skip(step)
        return Outcome(step.operation, Result.SKIPPED, step.reason)
    started = time.monotonic()
    if step.spark is not None:
        outcome = _on_spark(table, plan, step, dry_run, compactor)
        outcome.seconds = time.monotonic() - started
        return outcome
    try:
        outcome = spec.run(Running(table, plan, step, dry_run, progress, compactor, stop))
    except DeltaError as e:
        outcome = Outcome(step.operation, Result.FAILED, str(e), error=e)
    outcome.seconds = time.monotonic() - started
    return outcome


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
    """A finished Spark job of `operation` (its spec.<op>.engine) as an Outcome: failed as the
    job says, else as its operation reads the job's result (`spark_done`)."""
    out = Outcome(operation, Result.FAILED, "", job_id=tag, job_result=result.result)
    if not result.ok:
        out.message, out.error = f"Spark job {tag}: {result.error}", JobFailed(result.error)
        return out
    done = REGISTRY[operation].spark_done
    assert done is not None, f"{operation} has no Spark job"
    out.result = Result.DONE
    done(table, out, planned_version)
    return out
