"""delta/expire/run.py: the one DELETE commit an expiry writes, as Delta Spark writes a
metadata-only one, and Delta's conflict rules against what others commit meanwhile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.commit import commit
from deltakeeper.delta.errors import CommitConflictError, ExpiryLimitError
from deltakeeper.delta.expire.run import Expiry, change, expire, plan_expiry
from deltakeeper.delta.table import open_table
from tests.support.expire_tables import KEEP_MS, NOW_MS, add, metadata, stats, ts
from tests.support.logbuilder import LogBuilder, protocol

WRITTEN_MS = 1_800_000_000_000
DV = {
    "storageType": "u",
    "pathOrInlineDv": "ab^-aqEH.+t@",
    "offset": 1,
    "sizeInBytes": 36,
    "cardinality": 2,
}


def daily(root: Path, days: range = range(1, 9)) -> LogBuilder:
    """Partitioned by a string day; one 10-row file a day; day 2's file has a deletion
    vector, tags and row tracking fields."""
    log = LogBuilder(root)
    adds = [
        add(f"day=2026-01-0{d}/0.parquet", records=10, size=100 + d, day=f"2026-01-0{d}")
        for d in days
    ]
    adds[1]["add"] |= {
        "deletionVector": DV,
        "tags": {"k": "v"},
        "baseRowId": 10,
        "defaultRowCommitVersion": 0,
    }
    log.commit(
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(("day",)),
        *adds,
    )
    return log


def lines(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_one_delete_commit_with_the_removes_delta_spark_writes(tmp_path: Path) -> None:
    daily(tmp_path)
    run = expire(open_table(str(tmp_path)), Expiry("day", KEEP_MS), NOW_MS, write_ms=WRITTEN_MS)
    assert run.version == 1
    info, *removes = lines(tmp_path, 1)
    assert {
        k: info["commitInfo"][k]
        for k in ("operation", "operationParameters", "readVersion", "isBlindAppend")
    } == {
        "operation": "DELETE",
        "operationParameters": {"predicate": "[\"`day` < '2026-01-05'\"]"},
        "readVersion": 0,
        "isBlindAppend": False,
    }
    metrics = info["commitInfo"]["operationMetrics"]
    assert {
        k: metrics[k]
        for k in (
            "numRemovedFiles",
            "numDeletedRows",
            "numRemovedBytes",
            "numAddedFiles",
            "numCopiedRows",
        )
    } == {
        "numRemovedFiles": "4",
        "numDeletedRows": "38",  # 40 rows, 2 hidden by day 2's deletion vector
        "numRemovedBytes": str(101 + 102 + 103 + 104),
        "numAddedFiles": "0",
        "numCopiedRows": "0",
    }
    by_path = {r["remove"]["path"]: r["remove"] for r in removes}
    assert sorted(by_path) == [f"day=2026-01-0{d}/0.parquet" for d in range(1, 5)]
    assert by_path["day=2026-01-01/0.parquet"] == {
        "path": "day=2026-01-01/0.parquet",
        "deletionTimestamp": WRITTEN_MS,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": {"day": "2026-01-01"},
        "size": 101,
        "stats": '{"numRecords":10}',
    }
    carried = by_path["day=2026-01-02/0.parquet"]
    assert carried["deletionVector"] == DV
    assert (carried["tags"], carried["baseRowId"], carried["defaultRowCommitVersion"]) == (
        {"k": "v"},
        10,
        0,
    )
    snap = open_table(str(tmp_path)).snapshot()
    assert sorted(snap.files["path"].to_pylist()) == [
        f"day=2026-01-0{d}/0.parquet" for d in range(5, 9)
    ]


def test_a_dry_run_and_a_run_with_nothing_to_expire_write_nothing(tmp_path: Path) -> None:
    daily(tmp_path)
    table = open_table(str(tmp_path))
    dry = expire(table, Expiry("day", KEEP_MS), NOW_MS, dry_run=True)
    assert (dry.version, dry.plan.files, dry.plan.rows) == (None, 4, 38)
    assert dry.to_json()["files"] == [f"day=2026-01-0{d}/0.parquet" for d in range(1, 5)]
    nothing = expire(table, Expiry("day", 30 * 86_400_000), NOW_MS)
    assert (nothing.version, nothing.plan.files) == (None, 0)
    assert sorted(p.name for p in (tmp_path / "_delta_log").glob("*.json")) == [f"{0:020d}.json"]


def test_a_rerun_after_the_commit_finds_nothing_left(tmp_path: Path) -> None:
    daily(tmp_path)
    table = open_table(str(tmp_path))
    assert expire(table, Expiry("day", KEEP_MS), NOW_MS).version == 1
    again = expire(table, Expiry("day", KEEP_MS), NOW_MS)
    assert (again.version, again.plan.files, again.plan.table_files) == (None, 0, 4)


def test_max_fraction_refuses_before_writing(tmp_path: Path) -> None:
    daily(tmp_path)
    with pytest.raises(ExpiryLimitError, match="38 of the table's 78 rows"):
        expire(open_table(str(tmp_path)), Expiry("day", KEEP_MS, 0.4), NOW_MS)
    assert not (tmp_path / "_delta_log" / f"{1:020d}.json").exists()


def race(tmp_path: Path, *winner: dict[str, Any]) -> tuple[Any, Any]:
    """Plan at version 0, let another writer commit `winner` as version 1, then commit."""
    log = daily(tmp_path)
    table = open_table(str(tmp_path))
    plan = plan_expiry(table, Expiry("day", KEEP_MS), NOW_MS)
    log.commit(*winner)
    return table, lambda: commit(table, plan.base, change(plan, WRITTEN_MS, 0.0), WRITTEN_MS)


def test_an_append_into_an_expiring_partition_makes_it_give_up(tmp_path: Path) -> None:
    table, attempt = race(tmp_path, add("day=2026-01-03/late.parquet", day="2026-01-03"))
    with pytest.raises(CommitConflictError, match=r"version 1 added day=2026-01-03/late\.parquet"):
        attempt()
    assert not (tmp_path / "_delta_log" / f"{2:020d}.json").exists()
    assert "day=2026-01-03/late.parquet" in table.snapshot().files["path"].to_pylist()


def test_an_append_elsewhere_commits_after_it_and_stays(tmp_path: Path) -> None:
    table, attempt = race(tmp_path, add("day=2026-01-09/new.parquet", day="2026-01-09"))
    done = attempt()
    assert done.version == 2
    live = sorted(table.snapshot().files["path"].to_pylist())
    assert live == [
        *(f"day=2026-01-0{d}/0.parquet" for d in range(5, 10) if d != 9),
        "day=2026-01-09/new.parquet",
    ]


def test_a_planned_file_removed_meanwhile_makes_it_give_up(tmp_path: Path) -> None:
    gone = {
        "remove": {"path": "day=2026-01-01/0.parquet", "deletionTimestamp": 1, "dataChange": True}
    }
    _, attempt = race(tmp_path, gone)
    with pytest.raises(
        CommitConflictError, match=r"a concurrent commit removed day=2026-01-01/0\.parquet"
    ):
        attempt()


def test_by_statistics_an_append_of_old_or_unknown_rows_conflicts(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path)
    log.commit(
        protocol(1, 2), metadata(), add("old.parquet", stat=stats(10, low=ts(1), high=ts(2)))
    )
    table = open_table(str(tmp_path))
    plan = plan_expiry(table, Expiry("ts", KEEP_MS, 1.0), NOW_MS)
    assert plan.may_expire(add("x", stat=stats(1, low=ts(4), high=ts(9)))["add"])
    assert plan.may_expire(add("x", records=None)["add"])
    assert not plan.may_expire(add("x", stat=stats(1, low=ts(6), high=ts(9)))["add"])
    log.commit(add("new.parquet", stat=stats(10, low=ts(6), high=ts(9))))
    assert commit(table, plan.base, change(plan, WRITTEN_MS, 0.0), WRITTEN_MS).version == 2
