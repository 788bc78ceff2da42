"""compute_stats on local tables: which files it re-adds, what it leaves alone and why, the
read budget, batches, dry runs and files it cannot read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.stats.compute import compute_stats
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import (
    LogBuilder,
    add,
    commit_info,
    dv,
    metadata,
    protocol,
    remove,
)

DV_PROTOCOL = protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"])


def table_of(root: Path, files: int, *first: dict[str, Any], lists: bool = False) -> LogBuilder:
    """A table of `files` one-row files without statistics (each with a list column when
    `lists`, whose null count needs the data)."""
    log = LogBuilder(root)
    actions = []
    for i in range(files):
        rows = {"id": pa.array([i], pa.int64()), "day": pa.array([f"d{i}"])}
        if lists:
            rows["day"] = pa.array([[i]], pa.list_(pa.int64()))
        pq.write_table(pa.table(rows), root / f"f{i}.parquet")
        actions.append(add(f"f{i}.parquet", size=(root / f"f{i}.parquet").stat().st_size))
    meta = metadata()
    if lists:
        doc = json.loads(meta["metaData"]["schemaString"])
        doc["fields"][1]["type"] = {"type": "array", "elementType": "long", "containsNull": True}
        meta["metaData"]["schemaString"] = json.dumps(doc)
    log.commit(commit_info(), *(first or (protocol(),)), meta, *actions)
    return log


def stats_by_path(root: Path) -> dict[str, dict[str, Any] | None]:
    live: dict[str, dict[str, Any] | None] = {}
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line).get("add")
            if a:
                live[a["path"]] = json.loads(a["stats"]) if "stats" in a else None
    return live


def test_every_file_gets_stats_in_batches_and_a_second_run_finds_none(tmp_path: Path) -> None:
    table_of(tmp_path, 5)
    table = open_table(str(tmp_path))
    run = compute_stats(table, batch=2, now_ms=1_800_000_000_000)
    assert (run.missing, run.given, run.commits) == (5, 5, [1, 2, 3])
    stats = stats_by_path(tmp_path)
    assert stats["f3.parquet"] == {
        "numRecords": 1,
        "minValues": {"id": 3, "day": "d3"},
        "maxValues": {"id": 3, "day": "d3"},
        "nullCount": {"id": 0, "day": 0},
    }
    again = compute_stats(open_table(str(tmp_path)))
    assert (again.missing, again.commits) == (0, [])


def test_a_dry_run_commits_nothing(tmp_path: Path) -> None:
    table_of(tmp_path, 2)
    run = compute_stats(open_table(str(tmp_path)), dry_run=True)
    assert (run.given, run.commits) == (2, [])
    assert sorted((tmp_path / "_delta_log").glob("*.json")) == [
        tmp_path / "_delta_log" / f"{0:020d}.json"
    ]


def test_files_with_deletion_vectors_are_left_alone_and_others_get_tight_bounds(
    tmp_path: Path,
) -> None:
    log = table_of(tmp_path, 2, DV_PROTOCOL)
    size = (tmp_path / "f0.parquet").stat().st_size
    log.commit(
        commit_info(),
        {"remove": {"path": "f0.parquet", "deletionTimestamp": 1, "dataChange": True}},
        add("f0.parquet", size=size, dv=dv("x")),
    )
    run = compute_stats(open_table(str(tmp_path)))
    assert (run.deletion_vectors, run.given) == (1, 1)
    stats = stats_by_path(tmp_path)
    assert stats["f0.parquet"] is None
    assert stats["f1.parquet"] is not None and stats["f1.parquet"]["tightBounds"] is True


def test_files_whose_data_read_would_pass_the_budget_wait(tmp_path: Path) -> None:
    table_of(tmp_path, 3, lists=True)
    chunk = pq.ParquetFile(tmp_path / "f0.parquet").metadata.row_group(0).column(1)
    run = compute_stats(open_table(str(tmp_path)), max_data_bytes=2 * chunk.total_compressed_size)
    assert (run.given, run.deferred, run.data_bytes) == (2, 1, 2 * chunk.total_compressed_size)
    rest = compute_stats(open_table(str(tmp_path)))
    assert (rest.missing, rest.given, rest.deferred) == (1, 1, 0)
    assert all(
        s is not None and s["nullCount"]["day"] == 0 for s in stats_by_path(tmp_path).values()
    )


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_an_unreadable_file_is_named_and_the_others_are_committed(
    tmp_path: Path, damage: str
) -> None:
    table_of(tmp_path, 3)
    bad = tmp_path / "f1.parquet"
    if damage == "missing":
        bad.unlink()
    else:
        bad.write_bytes(b"not parquet" * 10)
    run = compute_stats(open_table(str(tmp_path)))
    assert run.given == 2 and [p for p, _ in run.unreadable] == ["f1.parquet"]
    assert stats_by_path(tmp_path)["f1.parquet"] is None


def test_checkpoints_with_stats_only_parsed_are_refused(tmp_path: Path) -> None:
    log = table_of(tmp_path, 1)
    meta = metadata(**{"delta.checkpoint.writeStatsAsJson": "false"})
    log.commit(commit_info(), meta)
    table = open_table(str(tmp_path))
    from deltakeeper.delta.checkpoint import checkpoint_table

    checkpoint_table(table, None, 1_800_000_000_000, 7 * 86_400_000)
    with pytest.raises(InvalidInputError, match="writeStatsAsJson"):
        compute_stats(open_table(str(tmp_path)))


def new_file(root: Path, i: int) -> dict[str, Any]:
    pq.write_table(
        pa.table({"id": pa.array([i], pa.int64()), "day": [f"d{i}"]}), root / f"f{i}.parquet"
    )
    return add(f"f{i}.parquet", size=(root / f"f{i}.parquet").stat().st_size)


def test_since_a_complete_version_only_the_later_commits_are_read(tmp_path: Path) -> None:
    log = table_of(tmp_path, 3)
    first = compute_stats(open_table(str(tmp_path)), now_ms=1_800_000_000_000)
    assert (first.given, first.commits, first.since) == (3, [1], None)
    log.next_version = 2
    log.commit(commit_info(), new_file(tmp_path, 3), new_file(tmp_path, 4))  # 2
    log.commit(commit_info(), remove("f4.parquet"), new_file(tmp_path, 5))  # 3
    table = open_table(str(tmp_path))
    header = table.snapshot()
    table.storage.requests.clear()
    run = compute_stats(table, base=header, since=1, now_ms=1_800_000_000_000)
    # f3 and f5, the live adds of commits 2 and 3; f4 was removed; f0-f2 are not looked at
    assert (run.since, run.files, run.missing, run.given, run.commits) == (1, 2, 2, 2, [4])
    assert table.storage.requests["read"] == 2 + 2  # two commits, two footers
    assert all(stats_by_path(tmp_path)[f"f{i}.parquet"] for i in (0, 1, 2, 3, 5))


def test_since_falls_back_to_every_file_when_the_commits_cannot_say(tmp_path: Path) -> None:
    log = table_of(tmp_path, 2)
    log.commit(commit_info(), new_file(tmp_path, 2))  # 1
    log.commit(commit_info(), metadata(**{"delta.dataSkippingNumIndexedCols": "1"}))  # 2
    table = open_table(str(tmp_path))
    header = table.snapshot()
    run = compute_stats(table, base=header, since=0, dry_run=True)
    assert (run.since, run.files, run.missing) == (None, 3, 3)  # the metadata changed
    run = compute_stats(table, base=header, since=1, dry_run=True)  # commit 2: metadata only
    assert (run.since, run.files, run.missing) == (None, 3, 3)
    run = compute_stats(table, base=header, since=5, dry_run=True)  # a version past the base
    assert (run.since, run.files) == (None, 3)
