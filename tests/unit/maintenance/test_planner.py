"""maintenance/planner.py: what is due on a hand-built table and why, the compaction step too.

The compaction step is also seen as `deltakeeper maintain --compact` plans it; the job itself
runs in tests/integration/test_compaction_maintain.py."""

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.delta.errors import LiteVacuumImpossible
from deltakeeper.delta.table import open_table
from deltakeeper.delta.vacuum import info
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance import compaction_plan, executor, planner
from deltakeeper.maintenance.operations import vacuum as vacuum_op
from deltakeeper.maintenance.operations.steps import Plan, Step
from deltakeeper.maintenance.policy import CompactionSettings, effective
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove
from tests.support.planning import plan_for, steps
from tests.support.tables import DAY, START, daily_table, log_names, small_file_table


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
    assert by_op["checkpoint"].result == "done" and by_op["checkpoint"].version == 11
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


NOW = "2023-11-15T00:00:00Z"  # a day after the log builder's modification times


def maintain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["maintain", *argv, "--now", NOW, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_maintain_plans_no_compaction_step_unless_enabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_file_table(tmp_path)
    code, report, _ = maintain(capsys, str(tmp_path), "--dry-run")
    assert code == 0
    assert [s["operation"] for s in report["plan"]["steps"]] == ["checkpoint", "cleanup", "vacuum"]


def test_maintain_compact_dry_run_shows_the_plan_after_the_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_file_table(tmp_path)
    before = sorted(p.name for p in (tmp_path / "_delta_log").iterdir())
    code, report, _ = maintain(capsys, str(tmp_path), "--compact", "--dry-run")
    assert code == 0
    ops = [s["operation"] for s in report["plan"]["steps"]]
    assert ops == ["checkpoint", "compaction", "cleanup", "vacuum"]
    step = report["plan"]["steps"][1]
    # Four small files of partition a, aged past an hour; b's one file is not small.
    assert step["due"] and step["files"] == 4 and step["bytes"] == 4000
    assert [(p["partition"], p["why"]) for p in step["plan"]["partitions"]] == [
        ({"day": "a"}, "small-files-aged")
    ]
    result = next(r for r in report["results"] if r["operation"] == "compaction")
    assert result["result"] == "dry-run" and result["jobId"].startswith("deltakeeper-")
    assert result["job"] is None and result["compacted"] is None
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == before


def test_maintain_compact_refuses_catalog_managed_tables_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    managed = protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"])
    small_file_table(tmp_path, managed)
    code = main(["maintain", str(tmp_path), "--compact", "--now", NOW])
    assert code == 3, capsys.readouterr().err


def test_maintain_only_compaction_asks_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_file_table(tmp_path)
    code, report, _ = maintain(capsys, str(tmp_path), "--only", "compaction", "--dry-run")
    assert code == 0
    assert [(s["operation"], s["due"]) for s in report["plan"]["steps"]] == [("compaction", True)]


def test_the_planners_job_spec_says_types_version_and_replay_size(tmp_path: Path) -> None:
    from deltakeeper.maintenance.planner import forced_compaction

    log = small_file_table(tmp_path)
    log.commit(remove("day=a/0.parquet"))
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    found = compaction_plan.plan(
        snap.files, ("day",), CompactionSettings(min_files_per_partition=2), 0
    )
    (step,) = forced_compaction(table, snap, effective({}), 0, found).steps
    spec = step.job_spec
    assert spec is not None and spec["compact"] == [{"day": "a"}]
    # What the job would otherwise ask Spark for: the types, and the version it starts after.
    assert spec["partitionTypes"] == {"day": "string"} and spec["plannedVersion"] == snap.version
    # Four files and a tombstone: one replay partition, not Delta's 50.
    assert snap.num_files + snap.num_tombstones == 5 and spec["snapshotPartitions"] == 1


# -- vacuum modes ---------------------------------------------------------------------------------
def vacuum_step(plan: Plan) -> Step:
    return steps(plan)["vacuum"]


def test_auto_runs_lite_and_full_when_asked_or_due(tmp_path):
    daily_table(tmp_path)
    now = START + 60 * DAY
    _, plan = plan_for(tmp_path, now)
    lite = vacuum_step(plan).detail
    assert lite.mode == "lite" and lite.why.startswith("auto: LITE while Delta allows it")
    assert [f.key for f in lite.delete] == ["f1.parquet"] and lite.listed == 0
    assert vacuum_step(plan).reason.startswith("LITE (auto: LITE while Delta allows it")
    table = open_table(str(tmp_path))
    pol = effective({})
    full = planner.plan(table, table.snapshot(), pol, now, full_vacuum="no FULL vacuum on record")
    detail = vacuum_step(full).detail
    assert detail.mode == "full" and detail.why == "auto: no FULL vacuum on record"
    _, plan = plan_for(tmp_path, now, vacuum_mode=Mode.FULL)
    assert vacuum_step(plan).detail.why == "vacuum mode full"


def test_full_vacuum_is_due_every_full_interval_under_auto_only():
    pol = effective({})
    assert vacuum_op.full_due(pol, None, START) == "no FULL vacuum on record"
    assert vacuum_op.full_due(pol, START, START + 7 * DAY - 1) is None
    due = vacuum_op.full_due(pol, START, START + 7 * DAY)
    assert due is not None and "over 7 days ago" in due
    lite = effective({}, vacuum_mode=Mode.LITE)
    assert vacuum_op.full_due(lite, None, START) is None
    hourly = effective({}, vacuum_full_interval_ms=3_600_000)
    assert vacuum_op.full_due(hourly, START, START + 3_600_000) is not None


def cleaned_daily(root: Path, below: int) -> None:
    """The daily table with a checkpoint at `below` and the commits before it gone."""
    from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint

    daily_table(root)
    table = open_table(str(root))
    write_checkpoint(table, load_for_checkpoint(table, below), START + 60 * DAY, 7 * DAY)
    for v in range(below):
        (root / "_delta_log" / f"{v:020d}.json").unlink()


def test_auto_runs_full_where_delta_refuses_lite_and_lite_mode_is_refused(tmp_path):
    cleaned_daily(tmp_path, 6)
    now = START + 60 * DAY
    _, plan = plan_for(tmp_path, now)
    detail = vacuum_step(plan).detail
    assert detail.mode == "full" and "LITE refused, FULL instead" in detail.why
    assert "DELTA_CANNOT_VACUUM_LITE" in detail.why
    _, plan = plan_for(tmp_path, now, vacuum_mode=Mode.LITE)
    step = vacuum_step(plan)
    assert step.refused and not step.due and isinstance(step.error, LiteVacuumImpossible)


def test_cleanup_keeps_the_commits_from_the_recorded_n(tmp_path):
    daily_table(tmp_path)
    table = open_table(str(tmp_path))
    info.write(table.storage, 2)
    ops = ("checkpoint", "cleanup")  # no vacuum in this run to move N
    plan = planner.plan(table, table.snapshot(), effective({}), START + 60 * DAY, ops)
    clean = steps(plan)["cleanup"]
    assert not clean.due and "commits from 2 stay" in clean.reason, clean.reason
    for settings in ({"vacuum_mode": Mode.FULL}, {"vacuum_enabled": False}):  # no LITE: no hold
        plan = planner.plan(table, table.snapshot(), effective({}, **settings), START + 60 * DAY)
        assert steps(plan)["cleanup"].due, settings


def test_a_vacuum_that_moves_n_runs_before_the_cleanup_it_frees(tmp_path):
    daily_table(tmp_path)
    table = open_table(str(tmp_path))
    info.write(table.storage, 2)
    _, plan = plan_for(tmp_path, START + 60 * DAY)
    assert [s.operation for s in plan.steps] == ["checkpoint", "vacuum", "cleanup"]
    clean = steps(plan)["cleanup"]
    assert clean.due and "after the vacuum, which records N = 11 first" in clean.reason
    report = executor.execute(table, plan)
    assert {o.operation: o.result for o in report.outcomes} == {
        "checkpoint": "done",
        "vacuum": "done",
        "cleanup": "done",
    }
    assert info.read(table.storage).version == 11
    assert sorted(n for n in log_names(tmp_path) if n.endswith(".json")) == [
        "00000000000000000011.json"
    ]
