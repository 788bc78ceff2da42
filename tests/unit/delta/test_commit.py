"""delta/commit.py: one commit by put-if-absent, and Delta's conflict rules after a lost race."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.commit import ENGINE_INFO, Change, commit, create, judge
from deltakeeper.delta.errors import (
    CommitConflictError,
    InvalidInputError,
    UnsupportedProtocolError,
)
from deltakeeper.delta.features import Protocol
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove

NOW = 1_800_000_000_000


def table_at(tmp_path: Path, *commits: tuple[dict[str, Any], ...]) -> tuple[Any, Any, LogBuilder]:
    log = LogBuilder(tmp_path)
    log.commit(protocol(), metadata(), add("a.parquet"), add("b.parquet"))
    for actions in commits:
        log.commit(*actions)
    table = open_table(str(tmp_path))
    return table, table.snapshot(), log


def lines(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def readd(path: str, stats: str = '{"numRecords":3}') -> dict[str, Any]:
    a = add(path)
    a["add"] |= {"dataChange": False, "stats": stats}
    return a


def stats_change(*files: str, droppable: bool = True) -> Change:
    return Change(
        "COMPUTE STATS",
        tuple(readd(f) for f in files),
        reads=frozenset(files),
        droppable=droppable,
        metrics={"numFiles": len(files)},
    )


def test_writes_the_next_version_with_commit_info_first(tmp_path: Path) -> None:
    table, snap, _ = table_at(tmp_path)
    done = commit(table, snap, stats_change("a.parquet"), now_ms=NOW)
    assert (done.version, done.attempts, done.dropped) == (1, 1, ())
    first, second = lines(tmp_path, 1)
    info = first["commitInfo"]
    assert info["operation"] == "COMPUTE STATS" and info["engineInfo"] == ENGINE_INFO
    assert info["readVersion"] == 0 and info["timestamp"] == NOW
    assert info["operationMetrics"] == {"numFiles": "1"} and info["isBlindAppend"] is False
    assert "inCommitTimestamp" not in info
    assert second == readd("a.parquet")
    assert open_table(str(tmp_path)).snapshot().num_files == 2


def test_an_append_after_a_lost_race_lands_on_the_next_free_version(tmp_path: Path) -> None:
    table, snap, log = table_at(tmp_path)
    log.commit(commit_info(), add("c.parquet"))  # a concurrent append wins version 1
    log.commit(commit_info(), add("d.parquet"))
    append = Change("WRITE", (add("e.parquet"),), parameters={"mode": "Append"})
    done = commit(table, snap, append, now_ms=NOW)
    assert (done.version, done.attempts) == (3, 2)
    assert lines(tmp_path, 3)[0]["commitInfo"]["isBlindAppend"] is True
    assert open_table(str(tmp_path)).snapshot().num_files == 5


def test_a_file_removed_by_the_winner_is_dropped_not_resurrected(tmp_path: Path) -> None:
    table, snap, log = table_at(tmp_path)
    log.commit(commit_info(), remove("a.parquet"), add("a2.parquet"))  # a rewrite wins
    done = commit(table, snap, stats_change("a.parquet", "b.parquet"), now_ms=NOW)
    assert (done.version, done.dropped) == (2, ("a.parquet",))
    assert [list(x) for x in lines(tmp_path, 2)] == [["commitInfo"], ["add"]]
    live = set(open_table(str(tmp_path)).snapshot().files.column("path").to_pylist())
    assert live == {"a2.parquet", "b.parquet"}


def test_nothing_left_after_dropping_means_no_commit(tmp_path: Path) -> None:
    table, snap, log = table_at(tmp_path)
    log.commit(commit_info(), remove("a.parquet"))
    done = commit(table, snap, stats_change("a.parquet"), now_ms=NOW)
    assert (done.version, done.dropped) == (None, ("a.parquet",))
    assert not (tmp_path / "_delta_log" / f"{2:020d}.json").exists()


def test_a_change_that_cannot_drop_gives_up_naming_the_file(tmp_path: Path) -> None:
    table, snap, log = table_at(tmp_path)
    log.commit(commit_info(), remove("a.parquet"))
    with pytest.raises(CommitConflictError, match=r"gave up at version 1.*a\.parquet"):
        commit(table, snap, stats_change("a.parquet", droppable=False), now_ms=NOW)
    assert not (tmp_path / "_delta_log" / f"{2:020d}.json").exists()


@pytest.mark.parametrize(
    ("winner", "reason"),
    [
        (metadata(x="1"), "metadata"),
        (protocol(1, 3), "protocol"),
    ],
)
def test_a_metadata_or_protocol_change_makes_it_give_up(
    tmp_path: Path, winner: dict[str, Any], reason: str
) -> None:
    table, snap, log = table_at(tmp_path)
    log.commit(commit_info(), winner)
    with pytest.raises(CommitConflictError, match=f"version 1 changed the table's {reason}"):
        commit(table, snap, stats_change("a.parquet"), now_ms=NOW)
    assert not (tmp_path / "_delta_log" / f"{2:020d}.json").exists()


def test_same_application_transaction_conflicts() -> None:
    mine = Change("WRITE", ({"txn": {"appId": "x", "version": 2}}, add("c.parquet")))
    theirs = [(1, [{"txn": {"appId": "x", "version": 1}}])]
    assert "transaction x" in (judge(mine, theirs).reason or "")
    other = [(1, [{"txn": {"appId": "y", "version": 1}}, add("a.parquet")])]
    assert judge(mine, other).reason is None and not judge(mine, other).drop


def test_both_removing_one_file_conflicts() -> None:
    mine = Change("DELETE", (remove("a.parquet"),))
    assert judge(mine, [(1, [remove("a.parquet")])]).drop == {"a.parquet"}


def test_in_commit_timestamps_follow_the_winner(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path)
    ict = {"delta.enableInCommitTimestamps": "true"}
    features = protocol(3, 7, readerFeatures=[], writerFeatures=["inCommitTimestamp"])
    log.commit(commit_info(ict=NOW + 5_000), features, metadata(**ict), add("a.parquet"))
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    log.commit(commit_info(ict=NOW + 9_000), add("c.parquet"))
    commit(table, snap, stats_change("a.parquet"), now_ms=NOW)  # a clock behind the table's
    info = lines(tmp_path, 2)[0]["commitInfo"]
    assert info["inCommitTimestamp"] == info["timestamp"] == NOW + 9_001
    assert open_table(str(tmp_path)).snapshot().timestamp_ms == NOW + 9_001


def test_catalog_managed_and_unknown_features_are_refused(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path)
    managed = protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"])
    log.commit(managed, metadata(), add("a.parquet"))
    table = open_table(str(tmp_path))
    with pytest.raises(UnsupportedProtocolError, match="catalog-managed"):
        commit(table, table.snapshot(), stats_change("a.parquet"), now_ms=NOW)
    assert not (tmp_path / "_delta_log" / f"{1:020d}.json").exists()


def test_new_files_refused_where_the_table_gives_writers_duties(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path)
    rows = protocol(3, 7, readerFeatures=[], writerFeatures=["rowTracking", "domainMetadata"])
    log.commit(rows, metadata(), add("a.parquet"))
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    with pytest.raises(InvalidInputError, match="rowTracking"):
        commit(table, snap, Change("WRITE", (add("c.parquet"),)), now_ms=NOW)
    assert commit(table, snap, stats_change("a.parquet"), now_ms=NOW).version == 1  # re-adds


def test_create_writes_version_zero_once(tmp_path: Path) -> None:
    table = open_table(str(tmp_path))
    meta = metadata()["metaData"]
    assert create(table, Protocol(1, 2), meta, NOW) == 0
    assert open_table(str(tmp_path)).snapshot().version == 0
    with pytest.raises(FileExistsError):
        create(table, Protocol(1, 2), meta, NOW)
