"""Log compaction files as Delta Spark, delta-rs and DuckDB meet them: a Spark table with
appends, a DELETE and an UPDATE after its last checkpoint gets `x.y.compacted.json` files from
`deltakeeper compact-log`; every reader reads the same rows as before, Spark reads through the
compaction file (proved by damaging a commit it covers in a copy), deltakeeper's reader
(which reads the commits) finds the same files, and cleanup removes the
compaction files its checkpoint makes stale."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.delta.table import open_table
from tests.support.rows import deltars_digest, duckdb_digest, spark_digest
from tests.support.spark import spark_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's session, kept for the whole run (stopping it would make the next module
    start another)."""
    return spark_session("deltakeeper-log-compaction")


def commit_file(path: Path, version: int) -> Path:
    return path / "_delta_log" / f"{version:020d}.json"


def live_files(path: Path, version: int | None = None) -> list[tuple[str, int]]:
    """deltakeeper's reader: the live files and their sizes at a version."""
    snap = open_table(str(path)).snapshot(version, add_cols=("path", "size"))
    return sorted((r["path"], r["size"]) for r in snap.files.to_pylist())


def test_spark_reads_through_compaction_files_with_the_same_rows(
    spark: Any, tmp_path: Path
) -> None:
    path = tmp_path / "t"
    spark.range(0, 10).selectExpr("id", "id % 3 AS g").write.format("delta").save(str(path))
    for i in range(1, 6):  # versions 1-5
        spark.range(i * 10, i * 10 + 10).selectExpr("id", "id % 3 AS g").write.format("delta").mode(
            "append"
        ).save(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 7 = 0")  # 6
    spark.sql(f"UPDATE delta.`{path}` SET g = 9 WHERE id < 5")  # 7
    before = spark_digest(spark, str(path))
    assert before == deltars_digest(str(path)) == duckdb_digest(str(path))
    ours = {v: live_files(path, v) for v in (None, 4)}

    assert main(["compact-log", str(path), "--from", "1", "--to", "7"]) == 0
    assert main(["compact-log", str(path), "--from", "2", "--to", "4"]) == 0
    assert spark_digest(spark, str(path)) == deltars_digest(str(path)) == before
    assert duckdb_digest(str(path)) == before
    assert spark_digest(spark, str(path), 4) == deltars_digest(str(path), 4)  # time travel
    assert {v: live_files(path, v) for v in (None, 4)} == ours  # deltakeeper's reader too

    # Two copies whose commit 3 (inside both ranges) also adds a file that does not exist:
    # with the compaction files Spark reads the rows as before, so it read them instead of
    # the commits; without them (a copy Spark never read: its snapshots are cached by path)
    # it fails on the missing file.
    ghost = {"path": "ghost.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1}
    copies = {}
    for name in ("with", "without"):
        copies[name] = copy = tmp_path / name
        shutil.copytree(path, copy)
        with commit_file(copy, 3).open("a") as f:
            f.write(json.dumps({"add": ghost | {"dataChange": True}}) + "\n")
        (copy / "_delta_log" / f".{3:020d}.json.crc").unlink()  # Hadoop's checksum of it
    for f in (copies["without"] / "_delta_log").glob("*.compacted.json"):
        f.unlink()
    assert spark_digest(spark, str(copies["with"])) == before
    with pytest.raises(Exception, match=r"ghost\.parquet"):  # a Py4J error of Spark's own kind
        spark_digest(spark, str(copies["without"]))


def test_cleanup_removes_the_compaction_files_its_checkpoint_makes_stale(
    spark: Any, tmp_path: Path
) -> None:
    path = tmp_path / "t"
    for i in range(6):
        spark.range(i, i + 1).write.format("delta").mode("append").save(str(path))
    assert main(["compact-log", str(path), "--from", "1", "--to", "3"]) == 0
    assert main(["compact-log", str(path), "--from", "4", "--to", "5"]) == 0
    assert main(["checkpoint", str(path)]) == 0  # at version 5
    assert main(["cleanup", str(path), "--log-retention", "0d", "--now", "4102444800000"]) == 0
    left = sorted(p.name for p in (path / "_delta_log").glob("*.compacted.json"))
    assert left == []  # both start at or before the checkpoint's version
    assert spark_digest(spark, str(path)) == deltars_digest(str(path)) == duckdb_digest(str(path))
