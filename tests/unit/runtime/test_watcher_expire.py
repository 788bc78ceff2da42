"""runtime/watcher.py with dataRetention: the daemon expires on its schedule (daily, or its
cron in UTC), reports it in status, events and history metrics, a dry-run policy changes
nothing, and a catalog-managed table is refused by design."""

from __future__ import annotations

from pathlib import Path

from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.maintenance.policy import DataRetention, Rewrite
from deltakeeper.runtime.jobs import Running
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Target
from deltakeeper.runtime.registry import record
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.expire_tables import (
    DAY_MS,
    KEEP_MS,
    NOW_MS,
    add,
    metadata,
    stats,
    table,
    ts,
)
from tests.support.jobs import StandIn, StandInLauncher, request
from tests.support.logbuilder import LogBuilder, protocol, remove
from tests.support.observed import status_of

HOUR_MS = 3_600_000


def days(root: Path, proto: dict | None = None) -> Path:
    adds = [add(f"day=2026-01-0{d}/0.parquet", day=f"2026-01-0{d}") for d in range(1, 10)]
    return table(root, metadata(("day",)), *adds, proto=proto)


def target(root: Path, **retention: object) -> Target:
    retained = DataRetention("day", KEEP_MS, **retention)  # type: ignore[arg-type]
    settings = {"data_retention": retained, "vacuum_dry_run": True}
    return Target("ns", "t", str(root), settings=settings)


def commits(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "_delta_log").glob("*.json"))


def test_expiry_runs_daily_and_is_reported(tmp_path: Path) -> None:
    root = days(tmp_path)
    t = target(root)
    w = TableWatcher(NOW_MS)
    obs = w.observe(t, NOW_MS)
    assert "expire" in obs.due
    obs = w.maintain(t, obs, NOW_MS)
    done = next(o for o in obs.outcomes if o.operation == "expire")
    assert done.result == "done" and done.version == 1, done.message
    assert done.message.startswith(
        "removed 4 files, 40 rows (400 B) older than 2026-01-05T12:00:00Z"
    )
    entry = status_of(obs)["lastMaintenance"]["expire"]
    assert {k: entry[k] for k in entry if k not in ("time", "seconds", "message")} == {
        "result": "done",
        "version": 1,
        "deletedFiles": 0,  # removed from the table; vacuum deletes them later
        "deletedBytes": 0,
        "cutoff": "2026-01-05T12:00:00Z",
        "removedFiles": 4,
        "removedRows": 40,
        "removedBytes": 400,
        "straddlingFiles": 0,
        "filesWithoutStats": 0,
    }
    events = [(e.type, e.reason) for e in obs.events if e.reason == "Expired"]
    assert events == [("Normal", "Expired")]
    assert commits(root)[-1] == f"{1:020d}.json"
    # Not again within the day; again a day later, with nothing more to remove until then.
    later = NOW_MS + 2 * HOUR_MS
    assert "expire" not in w.observe(t, later).due
    next_day = NOW_MS + DAY_MS
    obs = w.maintain(t, w.observe(t, next_day), next_day)
    again = next(o for o in obs.outcomes if o.operation == "expire")
    assert again.result == "done" and "removed 1 files" in again.message  # day 5 now too


def test_a_cron_schedule_waits_for_its_time(tmp_path: Path) -> None:
    root = days(tmp_path)
    t = target(root, schedule="0 3 * * *")
    w = TableWatcher(NOW_MS)  # 12:00 UTC: the first run waits for 03:00 the next day
    assert "expire" not in w.observe(t, NOW_MS).due
    assert "expire" in w.observe(t, NOW_MS + 15 * HOUR_MS).due


def test_a_dry_run_policy_changes_nothing(tmp_path: Path) -> None:
    root = days(tmp_path)
    t = target(root, dry_run=True)
    w = TableWatcher(NOW_MS)
    obs = w.maintain(t, w.observe(t, NOW_MS), NOW_MS)
    dry = next(o for o in obs.outcomes if o.operation == "expire")
    assert dry.result == "dry-run" and len(dry.files) == 4
    assert commits(root) == [f"{0:020d}.json"]
    assert [e.reason for e in obs.events if "Expire" in e.reason] == ["ExpireDryRun"]


def test_too_much_to_expire_is_refused_and_nothing_written(tmp_path: Path) -> None:
    root = days(tmp_path)
    t = target(root, max_fraction=0.3)
    w = TableWatcher(NOW_MS)
    obs = w.maintain(t, w.observe(t, NOW_MS), NOW_MS)
    refused = next(o for o in obs.outcomes if o.operation == "expire")
    assert refused.result == "refused" and "more than maxFraction 0.3" in refused.message
    assert commits(root) == [f"{0:020d}.json"]


def test_catalog_managed_tables_are_never_expired(tmp_path: Path) -> None:
    managed = protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"])
    root = days(tmp_path, managed)
    t = target(root)
    w = TableWatcher(NOW_MS)
    obs = w.maintain(t, w.observe(t, NOW_MS), NOW_MS)
    refused = next(o for o in obs.outcomes if o.operation == "expire")
    assert refused.result == "refused" and "catalog-managed" in refused.message
    assert status_of(obs)["lastMaintenance"]["expire"]["reason"] == "CatalogOwned"
    assert commits(root) == [f"{0:020d}.json"]


# ----------------------------------------------------------------- rewrite: spark, a daemon's


def straddling(root: Path) -> Path:
    """Two files wholly older than the cutoff, one straddling it, one newer (ts, unpartitioned)."""
    adds = [
        add("old-1.parquet", stat=stats(10, low=ts(1), high=ts(2))),
        add("old-2.parquet", stat=stats(10, low=ts(2), high=ts(3))),
        add("straddles.parquet", stat=stats(10, low=ts(4), high=ts(6))),
        add("new.parquet", stat=stats(10, low=ts(7), high=ts(8))),
    ]
    return table(root, metadata(), *adds)


def spark_target(root: Path, **retention: object) -> Target:
    retained = DataRetention("ts", KEEP_MS, rewrite=Rewrite.SPARK, **retention)  # type: ignore[arg-type]
    settings = {"data_retention": retained, "vacuum_dry_run": True}
    return Target("ns", "t", str(root), settings=settings)


def test_rewrite_spark_commits_then_follows_delta_sparks_delete_to_its_end(tmp_path: Path) -> None:
    """The expiry commits what goes whole; then the straddling file's rows go to Delta Spark's
    DELETE, a job the daemon follows as any other and reads back from the log by its id."""
    root = straddling(tmp_path)
    launcher = StandInLauncher()
    t = spark_target(root)
    w = TableWatcher(NOW_MS, compactor=Compactor(launcher, wait=False))
    obs = w.maintain(t, w.observe(t, NOW_MS), NOW_MS)
    [done, started] = [o for o in obs.outcomes if o.operation == "expire"]
    assert (done.result, done.version, started.result) == ("done", 1, "started"), done.message
    [job] = launcher.jobs
    spec = job.request.spec
    assert (spec["operation"], spec["plannedVersion"], spec["partitions"]) == ("expire", 1, [{}])
    assert spec["condition"] == done.detail.plan.predicate  # type: ignore[union-attr]
    assert "SparkJobStarted" in [e.reason for e in obs.events]
    entry = status_of(obs)["lastMaintenance"]["expire"]
    assert (entry["removedFiles"], entry["straddlingFiles"], entry["version"]) == (2, 1, 1)
    assert "rewrite" not in entry

    # The job's DELETE: the straddling file out, its newer rows in a new one.
    info = {
        "commitInfo": {
            "operation": "DELETE",
            "userMetadata": job.job_id,
            "operationMetrics": {"numDeletedRows": "4", "numRemovedFiles": "1"},
        }
    }
    log = LogBuilder(root)
    log.next_version = 2  # after the expiry's commit
    v = log.commit(info, remove("straddles.parquet"), add("rewritten.parquet", 6))
    job.end(0, {"result": "done", "commits": [{"version": v}], "rowsDeleted": 4})
    later = NOW_MS + 60_000
    ended = w.observe(t, later)
    [rewrite] = ended.outcomes
    assert (rewrite.result, rewrite.version) == ("done", 2), rewrite.message
    assert rewrite.message.startswith("Delta Spark's DELETE deleted 4 rows, rewriting 1 files as 1")
    entry = status_of(ended)["lastMaintenance"]["expire"]
    assert entry["rewrite"] == {
        "jobId": job.job_id,
        "rowsDeleted": 4,
        "filesRemoved": 1,
        "filesAdded": 1,
    }
    assert (entry["removedFiles"], entry["cutoff"]) == (2, "2026-01-05T12:00:00Z")  # kept
    assert (entry["engine"], entry["jobId"]) == ("spark", job.job_id)
    metrics = Metrics()
    record(metrics, t, obs)
    record(metrics, t, ended)
    text = "".join(metrics.exposition())
    assert 'deltakeeper_expired_rows_total{namespace="ns",table="t"} 24.0' in text  # 20 + 4
    assert 'deltakeeper_expired_files_total{namespace="ns",table="t"} 2.0' in text


def test_rewrite_spark_with_nothing_whole_to_remove_starts_the_job_alone(tmp_path: Path) -> None:
    adds = [
        add("straddles.parquet", stat=stats(10, low=ts(4), high=ts(6))),
        add("new.parquet", stat=stats(10, low=ts(7), high=ts(8))),
    ]
    root = table(tmp_path, metadata(), *adds)
    launcher = StandInLauncher()
    t = spark_target(root)
    w = TableWatcher(NOW_MS, compactor=Compactor(launcher, wait=False))
    obs = w.maintain(t, w.observe(t, NOW_MS), NOW_MS)
    assert [o.result for o in obs.outcomes if o.operation == "expire"] == ["skipped", "started"]
    [job] = launcher.jobs
    assert job.request.spec["plannedVersion"] == 0
    assert commits(root) == [f"{0:020d}.json"]


def test_rewrite_spark_under_a_dry_run_policy_starts_no_job(tmp_path: Path) -> None:
    root = straddling(tmp_path)
    launcher = StandInLauncher()
    t = spark_target(root, dry_run=True)
    w = TableWatcher(NOW_MS, compactor=Compactor(launcher, wait=False))
    obs = w.maintain(t, w.observe(t, NOW_MS), NOW_MS)
    assert [o.result for o in obs.outcomes if o.operation == "expire"] == ["dry-run"]
    assert launcher.jobs == [] and commits(root) == [f"{0:020d}.json"]


def test_rewrite_spark_waits_while_another_job_of_the_table_runs(tmp_path: Path) -> None:
    """One Spark job per table: the expiry and its DELETE wait for the running one."""
    root = straddling(tmp_path)
    launcher = StandInLauncher()
    t = spark_target(root)
    w = TableWatcher(NOW_MS, compactor=Compactor(launcher, wait=False))
    w.compactions.running = Running(StandIn(request("other")), "other", NOW_MS, 0, 0, 0, 0)
    obs = w.maintain(t, w.observe(t, NOW_MS), NOW_MS)
    assert [o for o in obs.outcomes if o.operation == "expire"] == []
    assert launcher.jobs == [] and commits(root) == [f"{0:020d}.json"]
