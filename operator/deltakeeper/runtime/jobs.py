"""One table's Spark job between polls, in the daemon: a compaction, or a checkpoint or vacuum
that runs on Spark (spec.checkpoint.engine, spec.vacuum.engine). A table has one at a time.

The executor launches a job and hands it back running (the daemon never waits for one: other
tables keep polling). Each later poll of the table looks at it once, without blocking; when it
has ended, its result is read from its JSON line and from the table's own log (the commits
tagged with its id) into an Outcome like any other step's. A failure is retried after a
backoff that doubles per failure; a success waits the table's minimum interval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltakeeper.compaction.launcher import Adopting, Job, JobState, Planned
from deltakeeper.delta import schema
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.table import Table
from deltakeeper.maintenance import compaction_plan, executor
from deltakeeper.maintenance.compaction_plan import CompactionPlan
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations import compaction as compaction_op
from deltakeeper.maintenance.operations.outcome import Compactor, Outcome, Result
from deltakeeper.maintenance.policy import (
    COMPACTION_RETRY_CAP_MS,
    COMPACTION_RETRY_MS,
    CompactionSettings,
)
from deltakeeper.units import rfc3339

log = logging.getLogger("deltakeeper.jobs")


@dataclass(frozen=True)
class Running:
    job: Job
    job_id: str
    started_ms: int
    planned_version: int
    partitions: int
    files: int
    bytes: int
    operation: Operation = Operation.COMPACTION
    reason: str = ""  # a checkpoint or vacuum: why it runs on Spark

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": str(self.operation),
            "jobId": self.job_id,
            "started": rfc3339(self.started_ms),
            "plannedVersion": self.planned_version,
            "partitions": self.partitions,
            "files": self.files,
            "bytes": self.bytes,
        }


class JobTracker:
    """Not thread-safe: called from the table's one poll at a time."""

    def __init__(self, compactor: Compactor | None, last: Mapping[str, Any] | None = None):
        self.compactor = compactor  # None: this daemon does not compact (no launcher)
        self.running: Running | None = None
        self.failures = 0
        self.next_attempt_ms: int | None = None
        self.last: dict[str, Any] | None = None
        self.last_started_ms = _ms_of(last)  # from the stored lastMaintenance, after a restart
        self.planned_version: int | None = None  # the version last planned at
        self.planned_ms: int | None = None
        self.adopted = False  # looked for a job an earlier process left running
        # Looking again after a refused start: for a running job only. One that ended may be
        # this process's own, recorded already.
        self._running_only = False
        self.had_job = False  # a Spark job ran here: the status block stays (running: null)

    def due(self, now_ms: int, settings: CompactionSettings, version: int) -> bool:
        """Whether to plan compaction on this poll: enabled, no job running, past the backoff
        and the minimum interval, and the table moved since the last plan."""
        if self.compactor is None or not settings.enabled or self.running is not None:
            return False
        if self.next_attempt_ms is not None and now_ms < self.next_attempt_ms:
            return False
        # The minimum interval follows a success; after a failure the backoff alone decides.
        started = self.last_started_ms
        if (
            not self.failures
            and started is not None
            and now_ms - started < settings.min_interval_ms
        ):
            return False
        # Small files age into being due without a commit: a quiet table is planned again
        # every maxAge (or minInterval, if shorter).
        every = min(settings.max_age_ms, settings.min_interval_ms)
        aged = self.planned_ms is None or now_ms - self.planned_ms >= every
        return self.planned_version != version or aged

    def planned(
        self, version: int, outcome: Outcome, detail: CompactionPlan | None, now_ms: int
    ) -> None:
        """What maintain's compaction step did: nothing due, or a job started."""
        if self.found_running(outcome):
            return  # a job ran elsewhere or the limit was reached: look again next poll
        self.planned_version, self.planned_ms = version, now_ms
        if outcome.result is Result.DONE or outcome.result is Result.FAILED:
            self.last_started_ms = now_ms
            self._ended(outcome, now_ms)  # waited for (`run --once`)
        if outcome.result is Result.STARTED and outcome.job is not None and detail is not None:
            self.running = Running(
                outcome.job,
                str(outcome.job_id),
                now_ms,
                version,
                len(detail.partitions),
                detail.files,
                detail.bytes,
            )
            self.last_started_ms = now_ms

    def found_running(self, outcome: Outcome) -> bool:
        """Whether `outcome` is a start refused (a job of the table runs, or the daemon's
        limit is reached); then the next poll looks for a job to follow: one another replica
        started after this one looked. A look within ADOPT_LISTING_S of another table's costs
        no request."""
        refused = outcome.result is Result.SKIPPED and outcome.job_id is not None
        if refused:
            self.adopted, self._running_only = False, True
        return refused

    def free(self, now_ms: int) -> bool:
        """Whether a Spark checkpoint or vacuum may start: no job runs, past any backoff."""
        if self.compactor is None or self.running is not None:
            return False
        return self.next_attempt_ms is None or now_ms >= self.next_attempt_ms

    def started(self, outcome: Outcome, version: int, reason: str, now_ms: int) -> None:
        """A Spark checkpoint or vacuum handed back running (Result.STARTED)."""
        if outcome.result is not Result.STARTED or outcome.job is None:
            return
        job_id = str(outcome.job_id)
        op = outcome.operation
        self.had_job = True
        self.running = Running(outcome.job, job_id, now_ms, version, 0, 0, 0, op, reason)

    def adopt(self, owner: tuple[str, str], deadline_s: float, table: Table | None = None) -> None:
        """Once: follow the owner's job that an earlier process (a restarted or replaced
        operator) started and left running, instead of ever starting a second; or read back
        one that ended while no process watched it."""
        launcher = self.compactor.launcher if self.compactor is not None else None
        if self.adopted or self.running is not None or not isinstance(launcher, Adopting):
            self.adopted = True
            return
        # An error: looked for again next poll.
        since = int(time.time() * 1000) if self._running_only else self.last_started_ms
        found = launcher.adopt(owner, deadline_s, since)
        self.adopted, self._running_only = True, False
        if found is None:
            return
        spec = found.spec
        operation = Operation(spec.get("operation") or Operation.COMPACTION)
        compacting = operation is Operation.COMPACTION
        planned = (found.planned or _planned_again(table, spec)) if compacting else Planned(0, 0)
        self.running = Running(
            found.job,
            found.job.job_id,
            found.started_ms,
            int(spec.get("plannedVersion") or 0),
            len(spec.get("compact") or []) + len(spec.get("purge") or []),
            planned.files,
            planned.bytes,
            operation,
        )
        self.had_job = True
        self.last_started_ms = found.started_ms

    def check(self, table: Table, now_ms: int) -> Outcome | None:
        """The running job's Outcome once it has ended; None while it runs (or none does)."""
        running = self.running
        if running is None:
            return None
        result = running.job.poll()
        if result is None:
            return None
        self.running = None
        op = running.operation
        try:
            if op is Operation.COMPACTION:
                outcome = compaction_op.job_outcome(table, running.job_id, result)
            else:
                planned = running.planned_version
                outcome = executor.spark_outcome(table, op, running.job_id, result, planned)
                outcome.message += f"; {running.reason}" if running.reason else ""
        except Exception as e:  # the job ended; reading its commits back did not work
            message = f"job {running.job_id} ended, but its result could not be read: {e}"
            outcome = Outcome(op, Result.FAILED, message, job_id=running.job_id)
        outcome.seconds = max(0.0, (now_ms - running.started_ms) / 1000)
        self._ended(outcome, now_ms)
        return outcome

    def _ended(self, outcome: Outcome, now_ms: int) -> None:
        """Backoff after a failure, none after a success; the last result for the status."""
        if outcome.result is Result.FAILED:
            self.failures += 1
            first = self.compactor.retry_ms if self.compactor else COMPACTION_RETRY_MS
            backoff = first * 2 ** min(self.failures - 1, 20)
            self.next_attempt_ms = now_ms + min(backoff, COMPACTION_RETRY_CAP_MS)
            self.planned_version = None  # retried even if the table did not move
        else:
            self.failures, self.next_attempt_ms = 0, None
        if outcome.operation is not Operation.COMPACTION:
            return  # its own step's status says how it ended
        state = JobState.COMPLETED if outcome.result is Result.DONE else JobState.FAILED
        self.last = {
            "jobId": outcome.job_id,
            "result": state,
            "time": rfc3339(now_ms),
            "message": outcome.message,
        }

    def stop(self) -> None:
        """Stop the running job (the daemon stops); a half-run OPTIMIZE commits nothing."""
        if self.running is not None:
            self.running.job.stop()
            self.running = None

    def status(self) -> dict[str, Any] | None:
        """The status block: None for a table that never had a job here."""
        if self.running is None and self.last is None and not self.had_job:
            return None
        return {
            "running": self.running.to_json() if self.running else None,
            "last": self.last,
            "failures": self.failures,
            "nextAttempt": rfc3339(self.next_attempt_ms) if self.next_attempt_ms else None,
        }

    def jobs(self, enabled: bool) -> dict[str, int]:
        """deltakeeper_compaction_jobs by state: the running job, and how the last one ended;
        every state at 0 before the first job where compaction is `enabled` (the series exist
        from the start); none for a table that has had no job here and cannot have one."""
        can = enabled and self.compactor is not None
        compacting = self.running is not None and self.running.operation is Operation.COMPACTION
        if not compacting and self.last is None and not can:
            return {}
        last = self.last["result"] if self.last else None
        out = {str(state): int(state == last) for state in (JobState.COMPLETED, JobState.FAILED)}
        out[str(JobState.RUNNING)] = int(compacting)
        return out


def _ms_of(entry: Mapping[str, Any] | None) -> int | None:
    value = (entry or {}).get("timeMs")
    return value if isinstance(value, int) else None


def _planned_again(table: Table | None, spec: Mapping[str, Any]) -> Planned:
    """What a job that did not record its plan rewrites, counted from the table at its planned
    version; unknown (0) when that version cannot be read."""
    version = spec.get("plannedVersion")
    if table is None or not isinstance(version, int):
        return Planned(0, 0)
    try:
        snap = table.snapshot(version=version, add_cols=(*schema.LEAN_ADD, "stats"))
        return compaction_plan.planned_from_spec(snap, spec)
    except DeltaError as e:
        log.warning("%s: the adopted job's planned files are unknown: %s", table.uri, e)
        return Planned(0, 0)
