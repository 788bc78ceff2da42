"""The commit writer (delta/commit.py) against real writers: a delta-rs writer appending at the
same time, a Delta Spark DELETE of a file being re-committed, a Spark metadata change; and the
operation history it writes, read by Delta Spark, delta-rs and DuckDB alike."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta import append
from deltakeeper.delta.commit import Change, commit
from deltakeeper.delta.errors import CommitConflictError
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.runtime.history import History
from deltakeeper.runtime.model import Observation, Target
from tests.support.rows import deltars_digest, duckdb_digest, spark_digest
from tests.support.spark import spark_session

pytestmark = pytest.mark.spark

ROUNDS = 15


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's session, kept for the whole run (stopping it would make the next module
    start another)."""
    return spark_session("deltakeeper-commit-writer")


def ids(n0: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n0, n0 + n), pa.int64())})


def agree(spark: Any, path: Path) -> tuple[int, str]:
    """Every reader reads the same rows; their count and digest."""
    ours = deltars_digest(str(path))
    assert ours == duckdb_digest(str(path)) == spark_digest(spark, str(path)), path
    assert isinstance(ours, tuple)
    return ours


def readd_with_stats(path: Path, snap: Any) -> Change:
    """Each live file re-added with `numRecords` from its footer, as compute-stats would."""
    actions = []
    for row in snap.files.to_pylist():
        n = pq.ParquetFile(path / row["path"]).metadata.num_rows
        add = {
            "path": row["path"],
            "partitionValues": {},
            "size": row["size"],
            "modificationTime": row["modificationTime"],
            "dataChange": False,
            "stats": orjson.dumps({"numRecords": n}).decode(),
        }
        actions.append({"add": add})
    reads = frozenset(a["add"]["path"] for a in actions)
    return Change("COMPUTE STATS", tuple(actions), reads=reads, droppable=True)


def spark_table(spark: Any, path: Path) -> None:
    """20 rows in two files, without deletion vectors: a DELETE rewrites a whole file."""
    (
        spark.range(20)
        .repartition(2)
        .write.format("delta")
        .option("delta.enableDeletionVectors", "false")
        .save(str(path))
    )


def stats_race(spark: Any, path: Path) -> tuple[Any, Any, Change]:
    """A Spark table, its snapshot, and the stats re-adds of its files planned from it: what a
    concurrent Spark commit then races."""
    spark_table(spark, path)
    table = open_table(str(path))
    snap = table.snapshot()
    return table, snap, readd_with_stats(path, snap)


def test_appends_race_a_deltars_writer_and_lose_no_row(spark: Any, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    path = tmp_path / "t"
    write_deltalake(str(path), ids(0, 5))
    table = open_table(str(path))
    stale = table.snapshot()  # every commit of ours starts from version 0: each must race
    attempts = []

    def theirs() -> None:
        for i in range(ROUNDS):
            write_deltalake(str(path), ids(1000 + 10 * i, 10), mode="append")

    other = threading.Thread(target=theirs)
    other.start()
    for i in range(ROUNDS):
        add = append.write_file(table.storage, ids(2000 + 10 * i, 10), 1_800_000_000_000)
        attempts.append(commit(table, stale, Change("WRITE", (add,))).attempts)
    other.join()
    snap = open_table(str(path)).snapshot()
    assert snap.version == 2 * ROUNDS and snap.num_files == 1 + 2 * ROUNDS
    assert sum(attempts) > ROUNDS  # every commit after the first lost at least one race
    rows, _ = agree(spark, path)
    assert rows == 5 + 2 * 10 * ROUNDS


def test_a_file_spark_deletes_from_is_not_resurrected(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    table, snap, change = stats_race(spark, path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")  # rewrites the file holding 3
    gone = {a["path"] for a in _removes(path, snap.version + 1)}
    assert len(gone) == 1
    done = commit(table, snap, change)
    assert done.version == snap.version + 2 and set(done.dropped) == gone
    after = open_table(str(path)).snapshot()
    assert not gone & set(after.files.column("path").to_pylist())
    rows, _ = agree(spark, path)
    assert rows == 19
    assert spark.read.format("delta").load(str(path)).where("id = 3").count() == 0
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "COMPUTE STATS" and history[1]["operation"] == "DELETE"


def test_a_change_that_may_not_drop_files_gives_up_cleanly(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    table, snap, change = stats_race(spark, path)
    strict = replace(change, droppable=False)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
    with pytest.raises(CommitConflictError, match="a concurrent commit removed"):
        commit(table, snap, strict)
    assert open_table(str(path)).snapshot().version == snap.version + 1
    assert agree(spark, path)[0] == 19


def test_a_spark_metadata_change_makes_it_give_up(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    table, snap, change = stats_race(spark, path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('team' = 'ingest')")
    with pytest.raises(CommitConflictError, match="changed the table's metadata"):
        commit(table, snap, change)
    assert open_table(str(path)).snapshot().version == snap.version + 1
    assert agree(spark, path)[0] == 20


def test_spark_reads_the_history_as_delta_rs_and_duckdb_do(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "history"
    history = History(str(path), clock=lambda: 1_800_000_000_000)
    target = Target("lake", "events", "s3://bucket/events")
    for i in range(3):
        o = Outcome(Operation.VACUUM, Result.DONE, "", 0.5, deleted_files=i, deleted_bytes=i * 10)
        history.add(target, Observation(1_800_000_000_000 + i, [], outcomes=[o]))
        history.flush()
    failed = Outcome(Operation.CHECKPOINT, Result.FAILED, "store unreachable", 0.1)
    history.add(target, Observation(1_800_000_100_000, [], outcomes=[failed]))
    history.flush()
    rows, _ = agree(spark, path)
    assert rows == 4
    got = spark.read.format("delta").load(str(path)).orderBy("start_time").collect()
    assert [(r["operation"], r["status"], r["reason"]) for r in got] == [
        *[("vacuum", "succeeded", None)] * 3,
        ("checkpoint", "failed", "store unreachable"),
    ]
    assert [r["metrics"]["deletedFiles"] for r in got[:3]] == [0, 1, 2]
    assert got[0]["start_time"].isoformat() == "2027-01-15T08:00:00"  # UTC session
    skipped = spark.read.format("delta").load(str(path)).where("start_time > '2027-01-15 08:01'")
    assert [r["operation"] for r in skipped.collect()] == ["checkpoint"]


def _removes(path: Path, version: int) -> list[dict[str, Any]]:
    lines = (path / "_delta_log" / f"{version:020d}.json").read_bytes().splitlines()
    return [a["remove"] for a in map(orjson.loads, lines) if "remove" in a]
