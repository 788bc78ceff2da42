"""runtime/jobs.py: a table's compaction job between polls: interval, backoff, adoption.

The per-table tracker over a real log (its status block and job-state gauges), and the watcher
starting a job and reporting its end on a later poll. Jobs here are stand-ins that end when told;
a real spark-submit runs the same code in tests/integration/test_compaction_daemon.py."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.compaction.launcher import AtLimit, Found, Limited, Planned
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance.compaction_plan import Compacted, CompactionPlan
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Compactor, Outcome, Result
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
    back = outcome.detail_as(Compacted)
    assert outcome.seconds == 30 and back is not None
    assert (back.files_removed, back.files_added) == (3, 1)
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

    def forget(self) -> None:
        pass


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
    back = outcome.detail_as(Compacted)
    assert back is not None and back.versions == (v,)
    assert (back.files_removed, back.files_added) == (3, 1)
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


def test_a_start_refused_for_a_job_running_unfollowed_adopts_it_at_the_next_poll() -> None:
    """Another replica started it after this one looked (adopt's listing is shared for a
    while): the refused start makes the next poll look again, and follow it."""
    late = StandIn(request("job-late"))
    launcher = AdoptingLauncher({})
    tracker = JobTracker(Compactor(Limited(launcher, 1)))
    tracker.adopt(("ns", "t"), 60.0)
    assert tracker.adopted and tracker.status() is None
    launcher.left[("ns", "t")] = late
    busy = Outcome("compaction", Result.SKIPPED, "SparkApplication ns/x still runs", job_id="x")
    tracker.planned(3, busy, None, T0)
    tracker.adopt(("ns", "t"), 60.0)
    status = tracker.status()
    assert status is not None and status["running"]["jobId"] == "job-late"
    # A running job only: an ended one after the last start may be this process's own,
    # recorded already (its creation time is after the poll that started it).
    [first, again] = launcher.asked
    assert first[2] is None and again[2] is not None
    assert abs(again[2] - time.time() * 1000) < 60_000  # since now: nothing ended counts


def checkpoint_due(tmp_path: Path) -> LogBuilder:
    """A table with 12 commits and no checkpoint: a checkpoint is due."""
    log = LogBuilder(tmp_path)
    log.commit(protocol(), metadata(), add("0.parquet"))
    for i in range(1, 12):
        log.commit(add(f"{i}.parquet"))
    return log


def test_a_checkpoint_whose_engine_is_spark_runs_as_a_spark_job(tmp_path: Path) -> None:
    from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint

    log = checkpoint_due(tmp_path)
    launcher = StandInLauncher()
    watcher = TableWatcher(T0, compactor=Compactor(launcher, wait=False))
    settings = {"checkpoint_engine": "spark", "vacuum_enabled": False}
    target = Target("lake", "t", str(tmp_path), settings=settings)
    obs = watcher.observe(target, T0)
    assert "checkpoint" in obs.due

    started = watcher.maintain(target, obs, T0)
    [job] = launcher.jobs
    assert job.request.spec["operation"] == "checkpoint"
    assert job.request.spec["plannedVersion"] == 11
    assert not list((tmp_path / "_delta_log").glob("*.checkpoint.parquet"))  # not written here
    [event] = [e for e in started.events if e.reason == "SparkJobStarted"]
    assert "checkpoint.engine is spark" in event.message
    running = status_of(started)["compaction"]["running"]
    assert (running["operation"], running["jobId"]) == ("checkpoint", job.job_id)
    assert started.compaction_jobs.get("RUNNING", 0) == 0  # not a compaction job
    again = watcher.observe(target, T0 + 1000)
    waiting = watcher.maintain(target, again, T0 + 1000)
    assert len(launcher.jobs) == 1  # one Spark job per table at a time
    assert "checkpoint" not in status_of(waiting)["lastMaintenance"]
    assert "checkpoint" not in watcher.last_run_ms  # it waits: looked at again next poll

    table = open_table(str(tmp_path))  # Delta Spark's part, played by our own writer
    write_checkpoint(table, load_for_checkpoint(table), T0, 7 * 86_400_000)
    job.end(0, {"result": "done", "checkpointVersion": 11})
    done = watcher.observe(target, T0 + 30_000)
    [outcome] = done.outcomes
    assert outcome.result is Result.DONE and outcome.version == 11
    entry = status_of(done)["lastMaintenance"]["checkpoint"]
    assert (entry["engine"], entry["jobId"], entry["version"]) == ("spark", job.job_id, 11)
    assert "Delta Spark wrote the checkpoint at version 11" in entry["message"]
    assert "checkpoint.engine is spark" in entry["message"]
    [event] = [e for e in done.events if e.reason == "Checkpointed"]
    assert "Delta Spark" in event.message
    # A commit after it: looked at, but 1 commit is not the interval: no second job.
    log.commit(add("12.parquet"))
    later = watcher.observe(target, T0 + 40_000)
    watcher.maintain(target, later, T0 + 40_000)
    assert len(launcher.jobs) == 1


def test_a_spark_checkpoint_that_last_checkpoint_does_not_name_failed(tmp_path: Path) -> None:
    checkpoint_due(tmp_path)
    launcher = StandInLauncher()
    watcher = TableWatcher(T0, compactor=Compactor(launcher, wait=False))
    target = Target("lake", "t", str(tmp_path), settings={"checkpoint_engine": "spark"})
    watcher.maintain(target, watcher.observe(target, T0), T0)
    [job] = launcher.jobs
    job.end(0, {"result": "done", "checkpointVersion": 11})  # but nothing was written
    done = watcher.observe(target, T0 + 30_000)
    entry = status_of(done)["lastMaintenance"]["checkpoint"]
    assert entry["result"] == "failed" and "_last_checkpoint names none" in entry["message"]
    # Backed off: no second job at the next poll.
    watcher.maintain(target, watcher.observe(target, T0 + 31_000), T0 + 31_000)
    assert len(launcher.jobs) == 1


@pytest.mark.parametrize(
    ("engine", "launcher", "expected"),
    [
        ("auto", True, "started"),  # too big: Spark
        ("local", True, "refused"),  # too big, and Spark not allowed
        ("auto", False, "refused"),  # too big, no launcher here
    ],
)
def test_a_step_over_the_memory_budget_goes_to_spark_where_its_engine_allows(
    tmp_path: Path, engine: str, launcher: bool, expected: str
) -> None:
    checkpoint_due(tmp_path)
    stand_in = StandInLauncher()
    compactor = Compactor(stand_in, wait=False) if launcher else None
    watcher = TableWatcher(T0, compactor=compactor)
    target = Target("lake", "t", str(tmp_path), settings={"checkpoint_engine": engine})
    obs = watcher.observe(target, T0)
    too_big = {Operation.CHECKPOINT: "checkpoint needs about 2 GiB and the memory budget is 1 GiB"}
    obs = replace(obs, due=tuple(op for op in obs.due if op != "checkpoint"))
    after = watcher.maintain(target, obs, T0, refused=too_big)
    if expected == "started":
        [job] = stand_in.jobs
        assert job.request.spec["operation"] == "checkpoint"
        [event] = [e for e in after.events if e.reason == "SparkJobStarted"]
        assert "too big for the memory budget here: checkpoint needs about 2 GiB" in event.message
        assert "checkpoint" not in status_of(after)["lastMaintenance"]
        return
    assert not stand_in.jobs
    entry = status_of(after)["lastMaintenance"]["checkpoint"]
    assert entry["result"] == "refused"
    assert entry["message"].startswith("checkpoint needs about 2 GiB and the memory budget is")
    assert "--memory-budget" in entry["message"] and "Spark" in entry["message"]


def test_a_vacuum_on_spark_carries_the_policys_retention(tmp_path: Path) -> None:
    LogBuilder(tmp_path).commit(protocol(), metadata(), add("a.parquet"))
    launcher = StandInLauncher()
    watcher = TableWatcher(T0, compactor=Compactor(launcher, wait=False))
    # 10 days and a minute: Delta takes whole hours, so 241 (never less than the policy)
    settings = {"vacuum_engine": "spark", "deleted_file_retention_ms": 10 * 86_400_000 + 60_000}
    target = Target("lake", "t", str(tmp_path), settings=settings)
    obs = watcher.observe(target, T0)
    assert "vacuum" in obs.due
    watcher.maintain(target, obs, T0)
    [job] = launcher.jobs
    spec = job.request.spec
    assert (spec["operation"], spec["retentionHours"], spec["allowShortRetention"]) == (
        "vacuum",
        241,
        False,
    )
    assert spec["jobId"].endswith("-vacuum")  # a checkpoint planned with it: "-checkpoint"
    job.end(0, {"result": "done", "filesDeleted": 3, "commits": []})
    done = watcher.observe(target, T0 + 5000)
    entry = status_of(done)["lastMaintenance"]["vacuum"]
    assert (entry["result"], entry["deletedFiles"], entry["engine"]) == ("done", 3, "spark")
    assert "Delta Spark's VACUUM deleted 3 files" in entry["message"]


def test_an_adopted_spark_checkpoint_is_read_back_as_a_checkpoint(tmp_path: Path) -> None:
    from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint

    checkpoint_due(tmp_path)
    table = open_table(str(tmp_path))
    left = StandIn(request("job-cp"))

    class Left(AdoptingLauncher):
        def adopt(self, owner: tuple[str, str], deadline_s: float, since_ms: int | None) -> Found:
            spec = {"jobId": "job-cp", "operation": "checkpoint", "plannedVersion": 11}
            return Found(left, spec, T0, None)

    tracker = JobTracker(Compactor(Left({})))
    tracker.adopt(("ns", "t"), 60.0, table)
    status = tracker.status()
    assert status is not None and status["running"]["operation"] == "checkpoint"
    write_checkpoint(table, load_for_checkpoint(table), T0, 7 * 86_400_000)
    left.end(0, {"result": "done"})  # a SparkApplication: its output line is not seen
    outcome = tracker.check(table, T0 + 1000)
    assert outcome is not None and outcome.operation is Operation.CHECKPOINT
    assert outcome.result is Result.DONE and outcome.version == 11
    block = tracker.status()
    assert block is not None and block["running"] is None and block["last"] is None


def test_a_step_for_spark_where_spark_cannot_run_is_refused_naming_the_budget(
    tmp_path: Path,
) -> None:
    from deltakeeper.delta.errors import InvalidInputError

    class NoSpark(StandInLauncher):
        def start(self, request: Any) -> StandIn:
            raise InvalidInputError("spark-submit not found: pip install 'deltakeeper[spark]'")

    checkpoint_due(tmp_path)
    watcher = TableWatcher(T0, compactor=Compactor(NoSpark(), wait=False))
    target = Target("lake", "t", str(tmp_path))
    obs = watcher.observe(target, T0)
    obs = replace(obs, due=tuple(op for op in obs.due if op != "checkpoint"))
    too_big = {Operation.CHECKPOINT: "checkpoint needs about 2 GiB and the memory budget is 1 GiB"}
    after = watcher.maintain(target, obs, T0, refused=too_big)
    entry = status_of(after)["lastMaintenance"]["checkpoint"]
    assert entry["result"] == "refused", entry
    assert "checkpoint needs about 2 GiB and the memory budget is 1 GiB" in entry["message"]
    assert "Spark cannot run it here: spark-submit not found" in entry["message"]
