"""maintenance/operations/expire.py: the expire step as a plan and the executor run it, and
what it reports: lastMaintenance fields, history metrics, --json, the metrics' counts."""

from __future__ import annotations

import json
from pathlib import Path

from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import executor, planner, record
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Outcome
from deltakeeper.maintenance.operations.registry import REGISTRY
from deltakeeper.maintenance.policy import DataRetention, effective
from tests.support.expire_tables import KEEP_MS, NOW_MS, add, metadata, stats, table, ts

EXPIRE = Operation.EXPIRE


def built(root: Path) -> Path:
    return table(
        root,
        metadata(),
        add("old.parquet", stat=stats(10, low=ts(1), high=ts(2))),
        add("straddles.parquet", stat=stats(10, low=ts(4), high=ts(6))),
        add("unknown.parquet", records=10),
        add("new.parquet", stat=stats(30, low=ts(7), high=ts(9))),
    )


def run(root: Path, dry_run: bool = False, keep_ms: int = KEEP_MS, **retention: object):
    t = open_table(str(root))
    pol = effective({}, data_retention=DataRetention("ts", keep_ms, **retention))  # type: ignore[arg-type]
    plan = planner.plan(t, t.snapshot(), pol, NOW_MS, [EXPIRE])
    return plan, executor.execute(t, plan, dry_run=dry_run).outcomes[0]


def test_the_step_plans_and_commits_and_reports(tmp_path: Path) -> None:
    plan, done = run(built(tmp_path))
    (step,) = plan.steps
    assert step.due and step.reason == (
        "1 files (10 rows, 100 B) older than the cutoff 2026-01-05T12:00:00Z, by statistics; "
        "kept: 1 straddling the cutoff, 1 without statistics for ts"
    )
    assert step.to_json()["files"] == 1 and step.to_json()["bytes"] == 100
    assert done.result == "done" and done.version == 1
    entry = record.entry(done, 0, NOW_MS)
    assert {k: entry[k] for k in ("cutoff", "removedFiles", "removedRows", "removedBytes")} == {
        "cutoff": "2026-01-05T12:00:00Z",
        "removedFiles": 1,
        "removedRows": 10,
        "removedBytes": 100,
    }
    assert (entry["straddlingFiles"], entry["filesWithoutStats"]) == (1, 1)
    assert set(entry) - {"timeMs"} <= set(record.fields(EXPIRE))
    assert REGISTRY[EXPIRE].history(done)["removedRows"] == 10
    assert counted(done) == {"files": 1, "rows": 10, "bytes": 100}
    shown = record.as_json(done)["expire"]
    assert shown["version"] == 1 and shown["files"] == ["old.parquet"]
    json.dumps(record.as_json(done))  # plain JSON


def test_nothing_to_remove_is_skipped_with_its_cutoff(tmp_path: Path) -> None:
    plan, _ = run(built(tmp_path), keep_ms=30 * 86_400_000)
    (step,) = plan.steps
    assert not step.due and step.reason.startswith("nothing older than the cutoff 2025-12-11")
    skipped = REGISTRY[EXPIRE].skip(step)  # type: ignore[misc]
    entry = record.entry(skipped, 0, NOW_MS)
    assert entry["result"] == "skipped" and entry["removedFiles"] == 0
    assert counted(skipped) == {"files": 0, "rows": 0, "bytes": 0}


def test_a_dry_run_removes_nothing_and_counts_nothing_removed(tmp_path: Path) -> None:
    root = built(tmp_path)
    _, dry = run(root, dry_run=True)
    assert dry.result == "dry-run" and dry.files == ["old.parquet"]
    assert record.entry(dry, 0, NOW_MS)["removedFiles"] == 0
    assert counted(dry) == {"files": 0, "rows": 0, "bytes": 0}
    assert not (root / "_delta_log" / f"{1:020d}.json").exists()


def test_refusals_are_refused_steps(tmp_path: Path) -> None:
    plan, refused = run(built(tmp_path), max_fraction=0.1)
    assert plan.steps[0].refused and refused.result == "refused"
    assert "more than maxFraction 0.1" in refused.message
    t = open_table(str(tmp_path))
    named = planner.plan(t, t.snapshot(), effective({}), NOW_MS, [EXPIRE], named=True)
    assert named.steps[0].refused and "expire needs dataRetention" in named.steps[0].reason
    assert planner.plan(t, t.snapshot(), effective({}), NOW_MS, [EXPIRE]).steps == []


def counted(o: Outcome) -> dict[str, int]:
    """What expire's own counters add for `o`, by the middle word of their names."""
    return {c.name.split("_")[2]: c.count(o) for c in REGISTRY[EXPIRE].counters}
