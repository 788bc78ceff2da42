"""runtime/jobs.py: a table's compaction job between polls: interval, backoff, adoption.

The per-table tracker over a real log (its status block and job-state gauges), and the watcher
starting a job and reporting its end on a later poll. Jobs here are stand-ins that end when told;
a real spark-submit runs the same code in tests/integration/test_compaction_daemon.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from deltakeeper.compaction.launcher import AtLimit, Found, Limited, Planned
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance.compaction_plan import CompactionPlan
from deltakeeper.maintenance.executor import Compactor, Outcome, Result
from deltakeeper.maintenance.policy import COMPACTION_RETRY_MS, CompactionSettings
from deltakeeper.runtime.jobs import JobTracker
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Target
from deltakeeper.runtime.registry import record
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.jobs import StandIn, StandInLauncher, request
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove
from tests.support.observed import status_of

T0 = 1_700_000_000_000


ON = CompactionSettings(enabled=True, min_interval_ms=60_000)


def started(tracker: JobTracker, launcher: StandInLauncher, tag: str, now: int) -> StandIn:
    job = launcher.start(request(tag))
    outcome = Outcome("compaction", Result.STARTED, "started", job=job, job_id=tag)
    plan = CompactionPlan(ON, (), 10, 1)
    tracker.planned(3, outcome, plan, now)
    return job


def test_a_tracker_follows_its_job_to_the_tagged_commit(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path)
    log.commit(protocol(), metadata(), *(add(f"{i}.parquet") for i in range(3)))
    table = open_table(str(tmp_path))
    launcher = StandInLauncher()
    tracker = JobTracker(Compactor(launcher))
    assert tracker.due(T0, ON, 0) and not tracker.due(T0, CompactionSettings(), 0)
    assert tracker.status() is None and tracker.jobs(False) == {}
    # Enabled, the gauge's states exist at 0 before the first job; without a launcher, none.
    assert tracker.jobs(True) == {"RUNNING": 0, "COMPLETED": 0, "FAILED": 0}
    assert JobTracker(None).jobs(True) == {}

    job = started(tracker, launcher, "job-1", T0)
    assert not tracker.due(T0 + 1, ON, 5)  # one job per table at a time
    assert tracker.check(table, T0 + 1) is None
    running = tracker.status()
    assert running is not None and running["running"]["jobId"] == "job-1"
    assert tracker.jobs(True) == {"RUNNING": 1, "COMPLETED": 0, "FAILED": 0}

    tag = {"commitInfo": {"operation": "OPTIMIZE", "userMetadata": "job-1"}}
    v = log.commit(tag, *(remove(f"{i}.parquet") for i in range(3)), add("big.parquet"))
    job.end(0, {"result": "done", "commits": [{"version": v}]})
    outcome = tracker.check(table, T0 + 30_000)
    assert outcome is not None and outcome.result is Result.DONE
    assert outcome.seconds == 30 and outcome.compacted is not None
    assert (outcome.compacted.files_removed, outcome.compacted.files_added) == (3, 1)
    assert tracker.jobs(True) == {"RUNNING": 0, "COMPLETED": 1, "FAILED": 0}
    assert tracker.jobs(False) == tracker.jobs(True)  # disabled since: the last job still shows
    done = tracker.status()
    assert done is not None and done["running"] is None and done["last"]["result"] == "COMPLETED"
    # The next job waits the minimum interval from this one's start.
    assert not tracker.due(T0 + 59_999, ON, v)
    assert tracker.due(T0 + 60_000, ON, v)


def test_a_failed_job_is_retried_after_a_backoff_that_doubles(tmp_path: Path) -> None:
    LogBuilder(tmp_path).commit(protocol(), metadata(), add("a.parquet"))
    table = open_table(str(tmp_path))
    launcher = StandInLauncher()
    tracker = JobTracker(Compactor(launcher))
    now = T0
    for failures in (1, 2):
        job = started(tracker, launcher, f"job-{failures}", now)
        job.end(1, {"result": "failed", "error": "DeadlineExceeded", "message": "too slow"})
        outcome = tracker.check(table, now)
        assert outcome is not None and outcome.result is Result.FAILED
        assert outcome.message == "DeadlineExceeded: too slow"
        backoff = COMPACTION_RETRY_MS * 2 ** (failures - 1)
        status = tracker.status()
        assert status is not None and status["failures"] == failures
        assert tracker.jobs(True)["FAILED"] == 1
        # Not before the backoff, though the minimum interval has passed; then even on the
        # same version (a failure is worth another try).
        assert not tracker.due(now + backoff - 1, ON, 3)
        assert tracker.due(now + backoff, ON, 3)
        now += backoff


def test_the_compactor_sets_the_first_backoff(tmp_path: Path) -> None:
    """--compaction-retry: the operator's or the daemon's first wait, doubled as the default."""
    LogBuilder(tmp_path).commit(protocol(), metadata(), add("a.parquet"))
    table = open_table(str(tmp_path))
    launcher = StandInLauncher()
    tracker = JobTracker(Compactor(launcher, retry_ms=5_000))
    often = CompactionSettings(enabled=True, min_interval_ms=1_000)
    now = T0
    for backoff in (5_000, 10_000):
        job = started(tracker, launcher, f"job-{backoff}", now)
        job.end(1, {"result": "failed", "error": "SparkApplicationFailed", "message": "x"})
        assert tracker.check(table, now) is not None
        assert not tracker.due(now + backoff - 1, often, 3)
        assert tracker.due(now + backoff, often, 3)
        now += backoff


def test_after_a_failure_the_backoff_decides_not_the_minimum_interval(tmp_path: Path) -> None:
    """A table's minInterval (1h by default) is longer than the first backoff (5m): the retry
    comes after the backoff, as documented, and the interval holds again after a success."""
    LogBuilder(tmp_path).commit(protocol(), metadata(), add("a.parquet"))
    table = open_table(str(tmp_path))
    launcher = StandInLauncher()
    tracker = JobTracker(Compactor(launcher))
    hourly = CompactionSettings(enabled=True, min_interval_ms=60 * 60_000)
    job = started(tracker, launcher, "job-1", T0)
    job.end(1, {"result": "failed", "error": "SparkApplicationFailed", "message": "x"})
    assert tracker.check(table, T0 + 1_000) is not None
    assert not tracker.due(T0 + 1_000 + COMPACTION_RETRY_MS - 1, hourly, 3)
    retried = T0 + 1_000 + COMPACTION_RETRY_MS
    assert tracker.due(retried, hourly, 3)
    job = started(tracker, launcher, "job-2", retried)
    job.end(0, {"result": "nothing-to-do"})
    assert tracker.check(table, retried + 1_000) is not None
    assert not tracker.due(retried + 60 * 60_000 - 1, hourly, 4)
    assert tracker.due(retried + 60 * 60_000, hourly, 4)


def test_a_job_running_elsewhere_is_looked_at_again_at_the_next_poll() -> None:
    tracker = JobTracker(Compactor(StandInLauncher()))
    busy = Outcome("compaction", Result.SKIPPED, "running already", job_id="x")
    tracker.planned(3, busy, None, T0)
    assert tracker.due(T0 + 1, ON, 3)
    not_due = Outcome("compaction", Result.SKIPPED, "no partition is due")
    tracker.planned(3, not_due, None, T0)
    assert not tracker.due(T0 + 1, ON, 3)  # nothing changed since it looked
    assert tracker.due(T0 + 1, ON, 4)


def test_the_watcher_starts_a_job_and_reports_its_end_on_a_later_poll(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path)
    log.commit(protocol(), metadata(("p",)), *(add(f"p=a/{i}.parquet", p="a") for i in range(3)))
    launcher = StandInLauncher()
    watcher = TableWatcher(T0, compactor=Compactor(launcher, wait=False))
    settings = {"compaction_enabled": True, "compaction_min_files_per_partition": 3}
    target = Target("lake", "t", str(tmp_path), settings=settings)
    assert "compaction" not in watcher.observe(replace(target, suspend=True), T0).due

    obs = watcher.observe(target, T0)
    assert obs.due == ("checkpoint", "compaction", "cleanup", "vacuum")
    started = watcher.maintain(target, obs, T0)
    [job] = launcher.jobs
    assert job.request.planned == Planned(3, 300)  # carried on the job, for adoption
    assert [e.reason for e in started.events if e.type == "Normal"] == ["CompactionStarted"]
    assert status_of(started)["compaction"]["running"]["files"] == 3
    assert "compaction" not in status_of(started)["lastMaintenance"]
    assert started.compaction_jobs["RUNNING"] == 1
    assert "compaction" not in watcher.observe(target, T0 + 1000).due  # running

    tag = {"commitInfo": {"operation": "OPTIMIZE", "userMetadata": job.job_id}}
    removes = [remove(f"p=a/{i}.parquet") for i in range(3)]
    v = log.commit(tag, *removes, add("p=a/big.parquet", size=300, p="a"))
    job.end(0, {"result": "done", "commits": [{"version": v}]})
    done = watcher.observe(target, T0 + 20_000)
    [outcome] = done.outcomes
    assert outcome.result is Result.DONE and outcome.seconds == 20
    [event] = [e for e in done.events if e.reason == "Compacted"]
    assert event.type == "Normal" and "rewrote 3 files" in event.message and "as 1" in event.message
    entry = status_of(done)["lastMaintenance"]["compaction"]
    assert entry["result"] == "done" and (entry["filesRemoved"], entry["filesAdded"]) == (3, 1)
    assert status_of(done)["files"] == 1 and status_of(done)["version"] == v
    assert status_of(done)["compaction"]["last"]["result"] == "COMPLETED"

    metrics = Metrics()
    record(metrics, target, done)
    text = "".join(metrics.exposition())
    assert 'deltakeeper_compaction_jobs{namespace="lake",table="t",state="COMPLETED"} 1.0' in text
    assert 'deltakeeper_compaction_jobs{namespace="lake",table="t",state="RUNNING"} 0.0' in text
    runs = '{namespace="lake",table="t",operation="compaction",result="done"} 1.0'
    assert f"deltakeeper_maintenance_runs_total{runs}" in text


def test_a_table_that_compacts_has_its_compaction_series_at_0_from_its_first_poll(
    tmp_path: Path,
) -> None:
    LogBuilder(tmp_path).commit(protocol(), metadata(), add("a.parquet"))
    watcher = TableWatcher(T0, compactor=Compactor(StandInLauncher(), wait=False))
    on = Target("lake", "t", str(tmp_path), settings={"compaction_enabled": True}, suspend=True)
    metrics = Metrics()
    record(metrics, on, watcher.observe(on, T0))
    text = "".join(metrics.exposition())
    for state in ("RUNNING", "COMPLETED", "FAILED"):
        gauge = f'deltakeeper_compaction_jobs{{namespace="lake",table="t",state="{state}"}} 0.0'
        assert gauge in text
    runs = '{namespace="lake",table="t",operation="compaction",result="failed"} 0.0'
    assert f"deltakeeper_maintenance_runs_total{runs}" in text
    # Compaction disabled before any job ran: its series go.
    off = replace(on, settings={})
    record(metrics, off, watcher.observe(off, T0 + 1000))
    text = "".join(metrics.exposition())
    assert "deltakeeper_compaction_jobs{" not in text and 'operation="compaction"' not in text
    assert f"deltakeeper_maintenance_runs_total{runs.replace('compaction', 'vacuum')}" in text


RECORDED = Planned(3, 300)  # what a job started by this deltakeeper says of its plan


class AdoptingLauncher(StandInLauncher):
    """Jobs outlive the process here: one left running is found again (as SparkApplications
    are by their labels)."""

    def __init__(
        self, left: dict[tuple[str, str], StandIn], planned: Planned | None = RECORDED
    ) -> None:
        super().__init__()
        self.left = left
        self.planned = planned
        self.asked: list[tuple[tuple[str, str], float, int | None]] = []

    def adopt(
        self, owner: tuple[str, str], deadline_s: float, since_ms: int | None
    ) -> Found | None:
        self.asked.append((owner, deadline_s, since_ms))
        job = self.left.get(owner)
        if job is None:
            return None
        spec = {"jobId": job.job_id, "plannedVersion": 0, "compact": [{}], "minFileSize": 1000}
        return Found(job, spec, T0, self.planned)


def test_a_restarted_tracker_adopts_the_running_job_and_reads_its_commits_from_the_log(
    tmp_path: Path,
) -> None:
    log = LogBuilder(tmp_path)
    log.commit(protocol(), metadata(), *(add(f"{i}.parquet") for i in range(3)))
    table = open_table(str(tmp_path))
    left = StandIn(request("job-left"))
    launcher = AdoptingLauncher({("ns", "t"): left})
    limited = Limited(launcher, 1)
    # The last result the stored status recorded: a job that ended after it is read back.
    tracker = JobTracker(Compactor(limited), {"timeMs": T0 - 1000})

    tracker.adopt(("ns", "t"), 60.0)
    tracker.adopt(("ns", "t"), 60.0)  # looked for once
    assert launcher.asked == [(("ns", "t"), 60.0, T0 - 1000)]
    status = tracker.status()
    assert status is not None and status["running"]["jobId"] == "job-left"
    assert status["running"]["partitions"] == 1
    # What the plan said, as the job carries it (a restarted process has not planned).
    assert (status["running"]["files"], status["running"]["bytes"]) == (3, 300)
    assert not tracker.due(T0 + 10**9, ON, 7)  # never a second job while it runs
    assert limited.running == 1  # the adopted job holds a slot of the global limit
    with pytest.raises(AtLimit):
        limited.start(request("another"))

    # No JSON line to read (a SparkApplication's driver log is not ours): the log tells.
    tag = {"commitInfo": {"operation": "OPTIMIZE", "userMetadata": "job-left"}}
    log.commit({"commitInfo": {"operation": "WRITE"}}, add("late.parquet"))
    v = log.commit(tag, *(remove(f"{i}.parquet") for i in range(3)), add("big.parquet"))
    left.end(0, {"result": "done", "startVersion": 0})
    outcome = tracker.check(table, T0 + 5_000)
    assert outcome is not None and outcome.result is Result.DONE, outcome
    assert outcome.compacted is not None and outcome.compacted.versions == (v,)
    assert (outcome.compacted.files_removed, outcome.compacted.files_added) == (3, 1)
    assert limited.running == 0


def test_a_job_that_did_not_record_its_plan_is_counted_from_the_table(tmp_path: Path) -> None:
    """An older deltakeeper's SparkApplication has no planned-files annotations: the files its
    input asks it to rewrite are counted at its planned version (small ones only)."""
    log = LogBuilder(tmp_path)
    log.commit(protocol(), metadata(), *(add(f"{i}.parquet") for i in range(3)), add("big", 5000))
    log.commit(add("later.parquet"))  # after the plan: not the job's
    table = open_table(str(tmp_path))
    left = StandIn(request("job-left"))
    tracker = JobTracker(Compactor(Limited(AdoptingLauncher({("ns", "t"): left}, None), 1)))
    tracker.adopt(("ns", "t"), 60.0, table)
    status = tracker.status()
    assert status is not None
    assert (status["running"]["files"], status["running"]["bytes"]) == (3, 300)


def test_nothing_left_running_means_nothing_adopted(tmp_path: Path) -> None:
    launcher = AdoptingLauncher({})
    tracker = JobTracker(Compactor(Limited(launcher, 1)))
    tracker.adopt(("ns", "t"), 60.0)
    assert tracker.status() is None and tracker.adopted
    assert tracker.due(T0, ON, 0)
    plain = JobTracker(Compactor(StandInLauncher()))  # spark-submit: nothing outlives us
    plain.adopt(("ns", "t"), 60.0)
    assert plain.adopted and plain.status() is None
