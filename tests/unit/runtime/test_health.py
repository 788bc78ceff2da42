"""Health: each component against a table built to have exactly that problem, the formulas
on their own, and the score where users read it (status, metric, inspect)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deltakeeper.cli import main
from deltakeeper.delta.held import read_held
from deltakeeper.delta.table import open_table
from deltakeeper.runtime import health
from deltakeeper.runtime.health import Component, Facts, assess
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Target
from deltakeeper.runtime.registry import record
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.logbuilder import LogBuilder, add, dv, metadata, protocol, remove

DAY = 86_400_000
NOW = 1_800_000_000_000
MiB = 1 << 20


def facts(**changes: int) -> Facts:
    base = dict(
        files=100,
        bytes=100 * 64 * MiB,
        small_files=0,
        small_bytes=0,
        removable_small_files=0,
        commits_since_checkpoint=3,
        checkpoint_interval=10,
        log_files=20,
        expired_log_files=0,
        expired_log_bytes=0,
        expired_tombstones=0,
        expired_tombstone_bytes=0,
    )
    return Facts(**{**base, **changes})


def scores(h: health.Health) -> dict[str, int]:
    return {str(s.component): s.score for s in h.components}


def test_a_table_without_problems_scores_100_with_no_worst_component() -> None:
    h = assess(facts())
    assert h.score == 100 and h.worst is None and h.band is health.Band.HEALTHY
    assert h.reclaimable == {"data": 0, "log": 0}


PROBLEMS = dict(
    small_files=60,
    small_bytes=60 * MiB,
    removable_small_files=50,  # of 100 files
    commits_since_checkpoint=40,  # interval 10
    expired_log_files=5,  # of 20
    expired_log_bytes=5_000,
    expired_tombstones=3,
    expired_tombstone_bytes=100 * 64 * MiB,  # as much as is live
)


def test_each_formula_as_documented() -> None:
    h = assess(facts(**PROBLEMS, records=1000, deleted_rows=100, files_without_stats=20))
    assert scores(h) == {
        "smallFiles": 50,
        "vacuumDebt": 50,
        "deletedRows": 90,
        "checkpointLag": 25,
        "logDebt": 75,
        "missingStats": 80,
    }
    assert h.score == round((30 * 50 + 20 * 50 + 15 * 90 + 15 * 25 + 10 * 75 + 10 * 80) / 100)
    assert h.worst is Component.CHECKPOINT_LAG and h.band is health.Band.FAIR
    assert h.reclaimable == {"data": 100 * 64 * MiB, "log": 5_000}
    detail = h.to_json()["components"]
    assert detail["smallFiles"]["filesShare"] == 0.6
    assert detail["smallFiles"]["bytesShare"] == round(60 / 6400, 4)
    assert detail["deletedRows"]["share"] == 0.1 and detail["missingStats"]["share"] == 0.2


def test_without_record_counts_the_four_other_components_make_the_score() -> None:
    h = assess(facts(**PROBLEMS))
    assert set(scores(h)) == {"smallFiles", "vacuumDebt", "checkpointLag", "logDebt"}
    assert h.score == round((30 * 50 + 20 * 50 + 15 * 25 + 10 * 75) / 75)


def test_a_tie_names_the_heavier_component_and_bands_have_their_floors() -> None:
    h = assess(facts(removable_small_files=50, commits_since_checkpoint=20))
    assert scores(h)["smallFiles"] == scores(h)["checkpointLag"] == 50
    assert h.worst is Component.SMALL_FILES
    expected = ["healthy", "healthy", "fair", "fair", "poor", "poor"]
    assert [health.band(s) for s in (100, 80, 79, 50, 49, 0)] == expected


def counted(path: str, size: int = 100, records: int = 10, **kw: object) -> dict:
    """An add whose statistics count its records (most writers write them)."""
    action = add(path, size, **kw)  # type: ignore[arg-type]
    action["add"]["stats"] = f'{{"numRecords":{records},"nullCount":{{"id":0}}}}'
    return action


def small_table(root: Path, partitions: int, files: int) -> None:
    """`files` files of 1 KiB in each of `partitions` partitions."""
    b = LogBuilder(root)
    adds = [
        counted(f"p={p}/f{i}.parquet", 1024, p=str(p))
        for p in range(partitions)
        for i in range(files)
    ]
    b.commit(protocol(), metadata(("p",)), *adds)


def table_health(root: Path, now: int = NOW, **spec: int) -> health.Health:
    obs = TableWatcher(now).observe(Target("ns", "t", str(root), settings=spec), now)
    assert obs.health is not None
    return obs.health


def test_small_files_count_what_compacting_each_partition_removes(
    tmp_path: Path, holding: str
) -> None:
    small_table(tmp_path / "one", partitions=1, files=10)  # 10 small files, one partition
    small_table(tmp_path / "spread", partitions=10, files=1)  # one small file per partition
    one, spread = table_health(tmp_path / "one"), table_health(tmp_path / "spread")
    assert scores(one)["smallFiles"] == 10  # 9 of 10 files go
    assert one.worst is Component.SMALL_FILES
    assert scores(spread)["smallFiles"] == 100  # nothing to merge within a partition


def test_a_compacted_table_scores_higher_than_its_data_in_small_files(tmp_path: Path) -> None:
    small_table(tmp_path / "small", partitions=1, files=40)
    b = LogBuilder(tmp_path / "compacted")
    b.commit(
        protocol(), metadata(("p",)), counted("p=0/big.parquet", 40 * 1024, records=400, p="0")
    )
    assert table_health(tmp_path / "compacted").score > table_health(tmp_path / "small").score
    assert table_health(tmp_path / "compacted").score == 100


def test_vacuum_debt_is_tombstones_past_retention_not_files_still_in_use(
    tmp_path: Path, holding: str
) -> None:
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(),
        counted("a", 1000),
        counted("b", 1000),
        counted("c", 1000),
        counted("d", 1000),
    )
    old, recent = NOW - 8 * DAY, NOW - 1 * DAY  # the default retention is 7 days
    b.commit(remove("a", ts=old), remove("b", ts=recent))
    # A deletion vector update: the file stays live under a new key; its tombstone frees nothing.
    b.commit(remove("c", ts=old), counted("c", 1000, dv=dv("x")))
    # A restore to before d's deletion vector: d is live without one, its tombstone has one.
    b.commit(remove("d", ts=old), counted("d", 1000, dv=dv("y")))
    b.commit(remove("d", ts=old, dv=dv("y")), counted("d", 1000))
    table = open_table(str(tmp_path))
    snap = read_held(table) if holding == "held" else table.snapshot()
    assert snap.expired_tombstones(NOW - 7 * DAY) == (1, 100)  # remove() says size 100
    h = table_health(tmp_path)
    detail = h.to_json()["components"]["vacuumDebt"]
    assert detail["expiredTombstones"] == 1 and detail["reclaimableBytes"] == 100
    assert h.reclaimable["data"] == 100
    assert scores(h)["vacuumDebt"] == round(100 * 2000 / 2100)
    # The retention of the table's properties (or spec) decides.
    assert scores(table_health(tmp_path, deleted_file_retention_ms=12 * 3600_000))[
        "vacuumDebt"
    ] == round(100 * 2000 / 2200)


def test_vacuum_debt_grows_on_quiet_polls_as_tombstones_pass_the_retention(tmp_path: Path) -> None:
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), counted("a", 100), counted("b", 100))
    b.commit(remove("a", ts=NOW - 6 * DAY))
    w = TableWatcher(NOW)
    target = Target("ns", "t", str(tmp_path))
    first = w.observe(target, NOW)
    assert first.health is not None and first.health.reclaimable["data"] == 0
    later = w.observe(target, NOW + 2 * DAY)  # nothing committed; the tombstone is now 8 days old
    assert later.health is not None and later.health.reclaimable["data"] == 100


def test_checkpoint_lag_against_the_interval(tmp_path: Path) -> None:
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), counted("a", 64 * MiB))
    for i in range(39):
        b.commit(counted(f"f{i}", 64 * MiB))
    assert scores(table_health(tmp_path))["checkpointLag"] == 25  # 40 commits, interval 10
    assert scores(table_health(tmp_path, checkpoint_interval=40))["checkpointLag"] == 100


def test_log_debt_is_what_a_cleanup_would_delete_now(tmp_path: Path) -> None:
    b = LogBuilder(tmp_path)
    for v in range(12):
        actions = [protocol(), metadata()] if v == 0 else []
        b.commit(*actions, counted(f"f{v}", 64 * MiB), mtime_ms=NOW - (60 - v) * DAY)
    assert main(["checkpoint", str(tmp_path)]) == 0  # at 11, its commit 49 days old
    os.utime(
        tmp_path / "_delta_log" / f"{11:020d}.checkpoint.parquet",
        ns=((NOW - 49 * DAY) * 1_000_000,) * 2,
    )
    h = table_health(tmp_path)
    detail = h.to_json()["components"]["logDebt"]
    assert (
        detail["expiredLogFiles"] == 11
    )  # commits 0-10 go; 11, its checkpoint and _last_checkpoint stay
    log_files = len(list((tmp_path / "_delta_log").iterdir()))
    assert scores(h)["logDebt"] == round(100 * (1 - 11 / log_files))
    assert h.reclaimable["log"] == sum(
        (tmp_path / "_delta_log" / f"{v:020d}.json").stat().st_size for v in range(11)
    )


def test_metric_status_and_inspect_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_table(tmp_path, partitions=2, files=5)
    now = NOW
    target = Target("ns", "t", str(tmp_path))
    obs = TableWatcher(now).observe(target, now)
    m = Metrics()
    record(m, target, obs)
    labels = {"namespace": "ns", "table": "t"}
    assert obs.health is not None
    assert m.registry.get_sample_value("deltakeeper_table_health_score", labels) == obs.health.score
    for s in obs.health.components:
        got = m.registry.get_sample_value(
            "deltakeeper_table_health_component_score", {**labels, "component": str(s.component)}
        )
        assert got == s.score
    for kind in ("data", "log"):
        got = m.registry.get_sample_value(
            "deltakeeper_table_reclaimable_bytes", {**labels, "kind": kind}
        )
        assert got == obs.health.reclaimable[kind]
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    inspected = json.loads(capsys.readouterr().out)["health"]
    assert inspected["score"] == obs.health.score == 76  # 8 of 10 files removable: smallFiles 20
    assert main(["inspect", str(tmp_path)]) == 0
    assert "health" in capsys.readouterr().out


def test_a_lake_counts_its_tables_by_band_and_names_its_ten_worst() -> None:
    statuses: dict[str, dict | None] = {
        f"t{i:02d}": {"health": {"score": i * 5, "worst": "smallFiles"}} for i in range(21)
    }
    statuses["never-read"] = {"conditions": []}
    statuses["not-polled-here"] = None
    found = health.lake(statuses)
    # scores 0..100 by 5: 80..100 healthy (5), 50..75 fair (6), 0..45 poor (10)
    assert found["bands"] == {"healthy": 5, "fair": 6, "poor": 10, "unknown": 2}
    assert [w["table"] for w in found["worst"]] == [f"t{i:02d}" for i in range(10)]
    assert found["worst"][0] == {"table": "t00", "score": 0, "worst": "smallFiles"}
    assert health.lake({"perfect": {"health": {"score": 100, "worst": None}}})["worst"] == []


def test_deleted_rows_are_what_deletion_vectors_hide_of_the_counted_records(
    tmp_path: Path, holding: str
) -> None:
    b = LogBuilder(tmp_path)
    dvs = ["deletionVectors"]
    b.commit(protocol(3, 7, readerFeatures=dvs, writerFeatures=dvs), metadata())
    hides = {**dv("x"), "cardinality": 25}  # of a's 100 rows
    b.commit(counted("a", 64 * MiB, records=100, dv=hides), counted("b", 64 * MiB, records=100))
    b.commit(add("c", 64 * MiB, dv={**dv("y"), "cardinality": 7}))  # no count: not in the ratio
    h = table_health(tmp_path)
    detail = h.to_json()["components"]["deletedRows"]
    assert (detail["deletedRows"], detail["records"]) == (25, 200)
    assert scores(h)["deletedRows"] == round(100 * (1 - 25 / 200))
    assert scores(h)["missingStats"] == round(100 * (1 - 1 / 3))


def test_missing_stats_are_files_whose_statistics_give_no_record_count(
    tmp_path: Path, holding: str
) -> None:
    b = LogBuilder(tmp_path)
    no_count = add("c", 64 * MiB)
    no_count["add"]["stats"] = '{"minValues":{"id":1}}'
    b.commit(protocol(), metadata(), counted("a", 64 * MiB), add("b", 64 * MiB), no_count)
    assert main(["checkpoint", str(tmp_path)]) == 0  # the counts now come from stats_parsed
    b.next_version = 1
    b.commit(counted("d", 64 * MiB), add("e", 64 * MiB))
    h = table_health(tmp_path)
    detail = h.to_json()["components"]["missingStats"]
    assert detail["filesWithoutStats"] == 3 and detail["share"] == 0.6
    assert scores(h)["missingStats"] == 40 and h.worst is Component.MISSING_STATS


def test_benefit_is_what_the_due_operations_bring_per_unit_of_cost() -> None:
    from deltakeeper.maintenance.operations import Operation as Op

    h = assess(facts(**PROBLEMS))  # 50 removable, 40 commits at interval 10, reclaimable bytes
    data, log = h.reclaimable["data"], h.reclaimable["log"]
    files = 100
    cost = 1 + files / health.COST_FILES
    assert health.benefit(h, (Op.VACUUM,), files) == data / cost
    assert health.benefit(h, (Op.CLEANUP,), files) == log / cost
    lag = 30 * health.FILE_BYTES  # the commits past the interval, each a file readers open
    assert health.benefit(h, (Op.CHECKPOINT,), files) == (log + lag) / cost
    assert health.benefit(h, (Op.COMPACTION,), files) == 50 * health.FILE_BYTES / cost
    assert health.benefit(h, (), files) == 0 and health.benefit(None, (Op.VACUUM,), files) == 0
    # The same gain on a table of a million files costs more: it comes later.
    assert health.benefit(h, (Op.VACUUM,), 1_000_000) < health.benefit(h, (Op.VACUUM,), files)
