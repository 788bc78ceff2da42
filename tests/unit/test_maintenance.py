"""Planner and executor on small hand-written tables: what is due, why, and what a run changes."""

import os
from pathlib import Path

import pytest

from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import executor, planner
from deltakeeper.maintenance.policy import effective
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

DAY = 86_400_000
START = 1_700_000_000_000  # commit 0; one commit a day after it


def touch(path: Path, mtime_ms: int, size: int = 100) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, ns=(mtime_ms * 1_000_000,) * 2)


def daily_table(root: Path, commits: int = 12, **conf: str) -> LogBuilder:
    """`commits` commits a day apart; commit v adds f<v>.parquet; commit 5 removes f1."""
    b = LogBuilder(root)
    for v in range(commits):
        actions = [add(f"f{v}.parquet")]
        if v == 0:
            actions = [protocol(), metadata(**conf), *actions]
        if v == 5:
            actions.append(remove("f1.parquet", ts=START + 5 * DAY))
        b.commit(*actions, mtime_ms=START + v * DAY)
        touch(root / f"f{v}.parquet", START + v * DAY)
    return b


def log_names(root: Path) -> set[str]:
    return {p.name for p in (root / "_delta_log").iterdir()}


def plan_for(root: Path, now: int, **settings):
    table = open_table(str(root))
    snap = table.snapshot()
    pol = effective(snap.metadata.configuration, **settings)
    return table, planner.plan(table, snap, pol, now)


def steps(plan) -> dict[str, planner.Step]:
    return {s.operation: s for s in plan.steps}


def test_a_long_log_without_checkpoint_gets_one_and_cleanup_uses_it_in_the_same_run(tmp_path):
    daily_table(tmp_path)
    now = START + 60 * DAY
    table, plan = plan_for(tmp_path, now)
    s = steps(plan)
    assert s["checkpoint"].due and "12 commits" in s["checkpoint"].reason
    # Cleanup is planned as it will be once the checkpoint at 11 is written.
    assert s["cleanup"].due and "using the checkpoint at version 11" in s["cleanup"].reason
    assert s["cleanup"].detail.cutoff_checkpoint == 11 and s["cleanup"].detail.files == 11
    report = executor.execute(table, plan)
    by_op = {o.operation: o for o in report.outcomes}
    assert by_op["checkpoint"].result == "done" and by_op["checkpoint"].checkpoint_version == 11
    assert by_op["cleanup"].result == "done" and by_op["cleanup"].deleted_files == 11
    assert "00000000000000000011.checkpoint.parquet" in log_names(tmp_path)
    assert sorted(n for n in log_names(tmp_path) if n.endswith(".json")) == [
        "00000000000000000011.json"
    ]
    assert open_table(str(tmp_path)).snapshot().num_files == 11
    # The next run has nothing left to do in the log.
    table, plan = plan_for(tmp_path, now)
    s = steps(plan)
    assert not s["checkpoint"].due and "0 commits" in s["checkpoint"].reason
    assert not s["cleanup"].due


def test_vacuum_removes_the_expired_tombstones_file_and_strays_only(tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    touch(tmp_path / "stray-new.parquet", START + 59 * DAY)
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    vac = steps(plan)["vacuum"]
    assert vac.due and vac.detail is not None
    assert sorted(f.key for f in vac.detail.delete) == ["f1.parquet", "stray-old.parquet"]
    report = executor.execute(table, plan)
    outcome = {o.operation: o for o in report.outcomes}["vacuum"]
    assert (outcome.result, outcome.deleted_files, outcome.deleted_bytes) == ("done", 2, 200)
    left = {p.name for p in tmp_path.iterdir() if p.is_file()}
    assert "f1.parquet" not in left and "stray-old.parquet" not in left
    assert {"stray-new.parquet", *(f"f{v}.parquet" for v in range(12) if v != 1)} <= left


def test_dry_run_changes_nothing_and_names_what_a_run_would(tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    before_log, before_data = log_names(tmp_path), sorted(tmp_path.glob("*.parquet"))
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    report = executor.execute(table, plan, dry_run=True)
    assert log_names(tmp_path) == before_log
    assert sorted(tmp_path.glob("*.parquet")) == before_data
    by_op = {o.operation: o for o in report.outcomes}
    assert by_op["checkpoint"].result == "dry-run"
    assert by_op["checkpoint"].files == ["_delta_log/00000000000000000011.checkpoint.parquet"]
    assert sorted(by_op["vacuum"].files) == ["f1.parquet", "stray-old.parquet"]
    assert report.total("deleted_files") == 0


def test_nothing_is_due_on_a_young_short_table(tmp_path):
    daily_table(tmp_path, commits=3)
    table, plan = plan_for(tmp_path, START + 3 * DAY)
    assert plan.due == []
    report = executor.execute(table, plan)
    assert {o.result for o in report.outcomes} == {"skipped"}


def test_policy_switches_turn_steps_off(tmp_path):
    daily_table(tmp_path, **{"delta.enableExpiredLogCleanup": "false"})
    _, plan = plan_for(tmp_path, START + 60 * DAY, vacuum_enabled=False, checkpoint_interval=50)
    s = steps(plan)
    assert not any(step.due for step in plan.steps)
    assert "delta.enableExpiredLogCleanup" in s["cleanup"].reason
    assert "vacuum.enabled" in s["vacuum"].reason


def test_short_vacuum_retention_is_refused_but_the_rest_runs(tmp_path):
    daily_table(tmp_path)
    table, plan = plan_for(tmp_path, START + 60 * DAY, deleted_file_retention_ms=DAY)
    vac = steps(plan)["vacuum"]
    assert vac.refused and not vac.due and "allow" in vac.reason.lower()
    report = executor.execute(table, plan)
    by_op = {o.operation: o.result for o in report.outcomes}
    assert by_op == {"checkpoint": "done", "cleanup": "done", "vacuum": "refused"}
    assert (tmp_path / "f1.parquet").exists()


def test_unknown_writer_feature_refuses_the_whole_table(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=[], writerFeatures=["someFutureFeature"]),
        metadata(),
        add("a.parquet"),
    )
    for _ in range(12):
        b.commit(add("a.parquet"))
    before = log_names(tmp_path)
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    assert plan.refusal and "someFutureFeature" in plan.refusal and plan.steps == []
    executor.execute(table, plan)
    assert log_names(tmp_path) == before


def test_a_failing_step_skips_the_ones_after_it(tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray-old.parquet", START)
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    # The log changes under the plan: the version it was made for is no longer readable.
    for name in log_names(tmp_path):
        (tmp_path / "_delta_log" / name).unlink()
    report = executor.execute(table, plan)
    by_op = {o.operation: o.result for o in report.outcomes}
    assert by_op == {"checkpoint": "failed", "cleanup": "skipped", "vacuum": "skipped"}
    assert (tmp_path / "stray-old.parquet").exists()


def test_a_step_skipped_after_a_failure_reads_skipped_but_is_its_own_result(tmp_path):
    daily_table(tmp_path)
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    for name in log_names(tmp_path):
        (tmp_path / "_delta_log" / name).unlink()
    after = executor.execute(table, plan).outcomes[1:]
    assert all(o.result is executor.Result.SKIPPED_AFTER_FAILURE for o in after)
    assert all(o.result is not executor.Result.SKIPPED for o in after)
    assert [o.to_json()["result"] for o in after] == ["skipped", "skipped"]
    assert [f"{o.result}" for o in after] == ["skipped", "skipped"]


@pytest.mark.parametrize("ops", [("checkpoint",), ("cleanup", "vacuum")])
def test_plans_cover_only_the_operations_asked_for(tmp_path, ops):
    daily_table(tmp_path)
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    plan = planner.plan(table, snap, effective({}), START + 60 * DAY, operations=ops)
    assert tuple(s.operation for s in plan.steps) == ops


def test_a_hint_left_behind_makes_the_checkpoint_due_again(tmp_path):
    daily_table(tmp_path)
    table, plan = plan_for(tmp_path, START + 60 * DAY)
    executor.execute(table, plan)
    hint = tmp_path / "_delta_log" / "_last_checkpoint"
    hint.unlink()  # as a run killed between the checkpoint and its pointer leaves it
    _, plan = plan_for(tmp_path, START + 60 * DAY)
    step = steps(plan)["checkpoint"]
    assert step.due and "_last_checkpoint is missing" in step.reason
    executor.execute(*plan_for(tmp_path, START + 60 * DAY))
    assert hint.exists()
    assert not steps(plan_for(tmp_path, START + 60 * DAY)[1])["checkpoint"].due
