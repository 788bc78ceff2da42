"""maintenance/executor.py: what running a plan changes: dry runs, refusals, skipped steps."""

from deltakeeper.delta.vacuum import plan as vacuum_plan
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance import executor, record
from deltakeeper.maintenance.operations.outcome import Report, Result
from tests.support.planning import plan_for, steps
from tests.support.tables import DAY, START, daily_table, log_names, touch


def results(report: Report) -> dict[str, str]:
    """Each step's result by operation name."""
    return {o.operation: o.result for o in report.outcomes}


def test_vacuum_removes_the_expired_tombstones_file_and_strays_only(tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    touch(tmp_path / "stray-new.parquet", START + 59 * DAY)
    table, plan = plan_for(tmp_path, START + 60 * DAY, vacuum_mode=Mode.FULL)
    vac = steps(plan)["vacuum"]
    assert vac.due and vac.detail is not None
    assert sorted(f.key for f in vac.detail.delete) == ["f1.parquet", "stray-old.parquet"]
    report = executor.execute(table, plan)
    outcome = {o.operation: o for o in report.outcomes}["vacuum"]
    assert (outcome.result, outcome.deleted_files, outcome.deleted_bytes) == ("done", 2, 200)
    left = {p.name for p in tmp_path.iterdir() if p.is_file()}
    assert "f1.parquet" not in left and "stray-old.parquet" not in left
    assert {"stray-new.parquet", *(f"f{v}.parquet" for v in range(12) if v != 1)} <= left


def test_a_stop_starts_no_further_step_and_says_why(tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    table, plan = plan_for(tmp_path, START + 60 * DAY, vacuum_mode=Mode.FULL)
    asked: list[int] = []

    def stop() -> bool:  # false before the first step, true from the second on
        asked.append(1)
        return len(asked) > 1

    before = log_names(tmp_path)
    report = executor.execute(table, plan, stop=stop)
    assert results(report) == {"checkpoint": "done"}
    assert report.stopped == "stopped before cleanup"
    assert set(before) < set(log_names(tmp_path))  # a checkpoint added, no commit cleaned up
    assert (tmp_path / "stray-old.parquet").exists()


def test_a_vacuum_stopped_mid_way_has_no_outcome_and_moves_no_marker(tmp_path, monkeypatch):
    """The files it deleted were unreferenced; the rest are the next vacuum's, which starts
    where this one did (`_last_vacuum_info` not moved on)."""
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    monkeypatch.setattr(vacuum_plan, "DELETE_BATCH", 1)
    table, plan = plan_for(tmp_path, START + 60 * DAY, vacuum_mode=Mode.FULL)
    assert steps(plan)["vacuum"].detail.record is not None  # a finished one would write it
    report = executor.execute(table, plan, stop=lambda: not (tmp_path / "f1.parquet").exists())
    assert results(report) == {"checkpoint": "done", "cleanup": "done"}
    assert report.stopped == "vacuum stopped after deleting 1 of 2 files"
    assert (tmp_path / "stray-old.parquet").exists()
    assert not (tmp_path / "_delta_log" / "_last_vacuum_info").exists()


def test_dry_run_changes_nothing_and_names_what_a_run_would(tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    before_log, before_data = log_names(tmp_path), sorted(tmp_path.glob("*.parquet"))
    table, plan = plan_for(tmp_path, START + 60 * DAY, vacuum_mode=Mode.FULL)
    report = executor.execute(table, plan, dry_run=True)
    assert log_names(tmp_path) == before_log
    assert sorted(tmp_path.glob("*.parquet")) == before_data
    by_op = {o.operation: o for o in report.outcomes}
    assert by_op["checkpoint"].result == "dry-run"
    assert by_op["checkpoint"].files == ["_delta_log/00000000000000000011.checkpoint.parquet"]
    assert sorted(by_op["vacuum"].files) == ["f1.parquet", "stray-old.parquet"]
    assert report.total("deleted_files") == 0


def test_short_vacuum_retention_is_refused_but_the_rest_runs(tmp_path):
    daily_table(tmp_path)
    table, plan = plan_for(tmp_path, START + 60 * DAY, deleted_file_retention_ms=DAY)
    vac = steps(plan)["vacuum"]
    assert vac.refused and not vac.due and "allow" in vac.reason.lower()
    report = executor.execute(table, plan)
    assert results(report) == {"checkpoint": "done", "cleanup": "done", "vacuum": "refused"}
    assert (tmp_path / "f1.parquet").exists()


def test_a_failing_step_skips_the_ones_after_it(tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    # The log changes under the plan: the version it was made for is no longer readable.
    for name in log_names(tmp_path):
        (tmp_path / "_delta_log" / name).unlink()
    report = executor.execute(table, plan)
    assert results(report) == {"checkpoint": "failed", "cleanup": "skipped", "vacuum": "skipped"}
    assert (tmp_path / "stray-old.parquet").exists()


def test_a_step_skipped_after_a_failure_reads_skipped_but_is_its_own_result(tmp_path):
    daily_table(tmp_path)
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    for name in log_names(tmp_path):
        (tmp_path / "_delta_log" / name).unlink()
    after = executor.execute(table, plan).outcomes[1:]
    assert all(o.result is Result.SKIPPED_AFTER_FAILURE for o in after)
    assert all(o.result is not Result.SKIPPED for o in after)
    assert [record.as_json(o)["result"] for o in after] == ["skipped", "skipped"]
    assert [f"{o.result}" for o in after] == ["skipped", "skipped"]
