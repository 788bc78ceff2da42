"""expire against Delta Spark's own DELETE: each table is written by Delta Spark and copied;
deltakeeper expires one copy, Spark runs `DELETE FROM t WHERE column < cutoff` on the other,
and Delta Spark, delta-rs and DuckDB read the same rows from both. Where files straddle the
cutoff, deltakeeper keeps them whole (Spark rewrites them): then the rows of the two copies
differ by exactly the older rows of the straddling files.

Where Spark's DELETE is metadata-only too (partition predicates), its commit's metrics are
compared with ours; with change data feed on, `table_changes` shows the same rows as deleted.
One Spark session for the module; NOW and KEEP put the cutoff at 2026-01-05T12:00:00Z."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.expire.run import Expiry, ExpiryRun, expire
from deltakeeper.delta.table import open_table
from deltakeeper.units import parse_timestamp_ms
from tests.integration.test_standalone import DELTAKEEPER, _statuses
from tests.support.cli import run
from tests.support.compaction import cli_spark_flags
from tests.support.manifests import table_doc
from tests.support.rows import deltars_digest, digest, duckdb_digest, spark_digest
from tests.support.spark import spark_session

pytestmark = pytest.mark.spark

NOW_MS = parse_timestamp_ms("2026-01-10T12:00:00Z")
KEEP_MS = 5 * 86_400_000
CUTOFF = "TIMESTAMP'2026-01-05 12:00:00'"  # the session's time zone is UTC


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's session, kept for the whole run (stopping it would make the next module
    start another)."""
    return spark_session("deltakeeper-expire")


def sql(spark: Any, text: str) -> None:
    spark.sql(text).collect()


def copies(tmp_path: Path, made: Path) -> tuple[Path, Path]:
    """Two copies of the table Spark made: ours (expired by deltakeeper) and theirs."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(made, ours)
    shutil.copytree(made, theirs)
    return ours, theirs


def expired(path: Path, column: str) -> ExpiryRun:
    done = expire(open_table(str(path)), Expiry(column, KEEP_MS, 1.0), NOW_MS)
    assert done.version is not None and done.plan.files > 0
    return done


def spark_delete(spark: Any, path: Path, where: str) -> None:
    sql(spark, f"DELETE FROM delta.`{path}` WHERE {where}")


def readers_agree(spark: Any, path: Path) -> tuple[int, str]:
    """The rows of the table as Delta Spark, delta-rs and DuckDB read it: the same."""
    theirs = spark_digest(spark, str(path))
    assert deltars_digest(str(path)) == theirs, "delta-rs reads other rows than Delta Spark"
    assert duckdb_digest(str(path)) == theirs, "DuckDB reads other rows than Delta Spark"
    return theirs


def commit(path: Path, version: int) -> dict[str, Any]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return next(a["commitInfo"] for a in map(json.loads, text.splitlines()) if "commitInfo" in a)


def newest(path: Path) -> int:
    return max(int(p.stem) for p in (path / "_delta_log").glob("*.json"))


METRICS = ("numRemovedFiles", "numDeletedRows", "numRemovedBytes", "numAddedFiles")


def same_commit_metrics(ours: Path, theirs: Path) -> None:
    mine, spark = commit(ours, newest(ours)), commit(theirs, newest(theirs))
    assert mine["operation"] == spark["operation"] == "DELETE"
    assert {k: mine["operationMetrics"][k] for k in METRICS} == {
        k: spark["operationMetrics"][k] for k in METRICS
    }


def deleted_changes(spark: Any, path: Path, version: int) -> list[tuple[Any, ...]]:
    rows = spark.sql(f"SELECT * FROM table_changes_by_path('{path}', {version})").collect()
    return sorted(
        tuple(v for k, v in r.asDict().items() if k not in ("_commit_version", "_commit_timestamp"))
        for r in rows
    )


# ------------------------------------------------------------------- partition predicates


def test_string_day_partitions_with_change_data_feed(spark: Any, tmp_path: Path) -> None:
    made = tmp_path / "made"
    sql(
        spark,
        f"CREATE TABLE delta.`{made}` (id INT, day STRING) USING delta PARTITIONED BY (day) "
        "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
    )
    for d in range(1, 9):  # two commits a day: two files in each partition
        values = ", ".join(f"({d * 100 + i}, '2026-01-0{d}')" for i in range(3))
        sql(spark, f"INSERT INTO delta.`{made}` VALUES {values}")
        sql(spark, f"INSERT INTO delta.`{made}` VALUES ({d * 100 + 50}, '2026-01-0{d}')")
    ours, theirs = copies(tmp_path, made)
    done = expired(ours, "day")
    assert (done.plan.rows, done.plan.by) == (16, "partition values")
    spark_delete(spark, theirs, "day < '2026-01-05'")
    assert readers_agree(spark, ours) == readers_agree(spark, theirs)
    same_commit_metrics(ours, theirs)
    changes = deleted_changes(spark, ours, newest(ours))
    assert changes == deleted_changes(spark, theirs, newest(theirs))
    assert len(changes) == 16 and {c[-1] for c in changes} == {"delete"}


def test_date_partitions_and_hour_partitions(spark: Any, tmp_path: Path) -> None:
    dates = tmp_path / "dates" / "made"
    sql(spark, f"CREATE TABLE delta.`{dates}` (id INT, d DATE) USING delta PARTITIONED BY (d)")
    values = ", ".join(f"({d * 10 + i}, DATE'2026-01-0{d}')" for d in range(1, 9) for i in range(2))
    sql(spark, f"INSERT INTO delta.`{dates}` VALUES {values}")
    ours, theirs = copies(tmp_path / "dates", dates)
    assert expired(ours, "d").plan.predicate == "`d` < DATE'2026-01-05'"
    spark_delete(spark, theirs, "d < DATE'2026-01-05'")
    assert readers_agree(spark, ours) == readers_agree(spark, theirs)
    same_commit_metrics(ours, theirs)

    hours = tmp_path / "hours" / "made"
    sql(spark, f"CREATE TABLE delta.`{hours}` (id INT, h STRING) USING delta PARTITIONED BY (h)")
    values = ", ".join(f"({h}, '2026-01-05T{h:02d}')" for h in range(8, 16))
    sql(spark, f"INSERT INTO delta.`{hours}` VALUES {values}")
    ours, theirs = copies(tmp_path / "hours", hours)
    done = expired(ours, "h")
    assert done.plan.predicate == "`h` < '2026-01-05T12'" and done.plan.rows == 4
    spark_delete(spark, theirs, "h < '2026-01-05T12'")
    assert readers_agree(spark, ours) == readers_agree(spark, theirs)
    same_commit_metrics(ours, theirs)


def test_deletion_vectors_are_carried_and_stay_applied(spark: Any, tmp_path: Path) -> None:
    """Files whose deletion vectors hide rows are removed with their vectors: no reader sees
    the hidden rows again, and the change feed shows only the live rows as deleted."""
    made = tmp_path / "made"
    sql(
        spark,
        f"CREATE TABLE delta.`{made}` (id INT, day STRING) USING delta PARTITIONED BY (day) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'delta.enableChangeDataFeed' = 'true')",
    )
    values = ", ".join(f"({d * 100 + i}, '2026-01-0{d}')" for d in range(1, 9) for i in range(6))
    sql(spark, f"INSERT INTO delta.`{made}` VALUES {values}")
    sql(spark, f"DELETE FROM delta.`{made}` WHERE id % 3 = 0")
    ours, theirs = copies(tmp_path, made)
    done = expired(ours, "day")
    with_dv = [a for a in done.plan.removed.to_pylist() if a.get("deletionVector")]
    assert with_dv and done.plan.rows == 16  # 4 days of 6 rows, 2 of each hidden
    removes = [
        json.loads(line)["remove"]
        for line in (ours / "_delta_log" / f"{done.version:020d}.json").read_text().splitlines()
        if "remove" in line
    ]
    assert all(
        r.get("deletionVector") for r in removes if r["path"] in {a["path"] for a in with_dv}
    )
    spark_delete(spark, theirs, "day < '2026-01-05'")
    assert readers_agree(spark, ours) == readers_agree(spark, theirs)
    same_commit_metrics(ours, theirs)
    changes = deleted_changes(spark, ours, newest(ours))
    assert changes == deleted_changes(spark, theirs, newest(theirs)) and len(changes) == 16


# -------------------------------------------------------------------- statistics, straddling


def append(spark: Any, path: Path, rows: list[tuple[Any, ...]], schema: str) -> None:
    """One file of `rows` (a single task writes it)."""
    frame = spark.createDataFrame(rows, schema).coalesce(1)
    frame.write.format("delta").mode("append").save(str(path))


def ts(day: int, hour: int = 0) -> Any:
    import datetime as dt

    return dt.datetime(2026, 1, day, hour)  # naive: the session's time zone, UTC


def older_rows_of(spark: Any, path: Path, column: str) -> list[int]:
    rows = spark.read.format("delta").load(str(path)).where(f"{column} < {CUTOFF}").collect()
    return sorted(r["id"] for r in rows)


def test_a_timestamp_column_by_statistics_with_straddling_files(spark: Any, tmp_path: Path) -> None:
    made = tmp_path / "made"
    schema = "id INT, ts TIMESTAMP"
    sql(spark, f"CREATE TABLE delta.`{made}` ({schema}) USING delta")
    append(spark, made, [(1, ts(1)), (2, ts(2))], schema)  # wholly older
    append(spark, made, [(3, ts(3)), (4, ts(5, 11))], schema)  # wholly older
    append(spark, made, [(5, ts(4)), (6, ts(6))], schema)  # straddles
    append(spark, made, [(7, ts(2)), (8, None)], schema)  # older, and a null: straddles
    append(spark, made, [(9, ts(5, 12)), (10, ts(8))], schema)  # not older
    ours, theirs = copies(tmp_path, made)
    done = expired(ours, "ts")
    assert (done.plan.files, done.plan.rows, len(done.plan.straddling)) == (2, 4, 2)
    spark_delete(spark, theirs, f"ts < {CUTOFF}")
    kept = readers_agree(spark, ours)
    assert kept[0] == readers_agree(spark, theirs)[0] + 2
    assert older_rows_of(spark, ours, "ts") == [5, 7]  # the straddling files' older rows
    newer = spark.read.format("delta").load(str(ours)).where(f"NOT (ts < {CUTOFF}) OR ts IS NULL")
    assert digest([r.asDict() for r in newer.collect()]) == spark_digest(spark, str(theirs))


def test_a_generated_partition_column_prunes(spark: Any, tmp_path: Path) -> None:
    made = tmp_path / "made"
    sql(
        spark,
        f"CREATE TABLE delta.`{made}` (id INT, ts TIMESTAMP, "
        "day DATE GENERATED ALWAYS AS (CAST(ts AS DATE))) USING delta PARTITIONED BY (day)",
    )
    schema = "id INT, ts TIMESTAMP"
    for d in range(1, 9):
        append(spark, made, [(d * 10, ts(d, 1)), (d * 10 + 1, ts(d, 6))], schema)
    append(spark, made, [(100, ts(5, 13)), (101, ts(5, 20))], schema)  # the cutoff's day, newer
    append(spark, made, [(102, ts(5, 3)), (103, ts(5, 23))], schema)  # straddles
    ours, theirs = copies(tmp_path, made)
    done = expired(ours, "ts")
    assert done.plan.by == "generated partition column day and statistics"
    assert (done.plan.files, done.plan.rows, len(done.plan.straddling)) == (5, 10, 1)
    spark_delete(spark, theirs, f"ts < {CUTOFF}")
    readers_agree(spark, ours)
    assert older_rows_of(spark, ours, "ts") == [102]
    newer = spark.read.format("delta").load(str(ours)).where(f"NOT (ts < {CUTOFF})")
    assert digest([r.asDict() for r in newer.collect()]) == readers_agree(spark, theirs)


def test_column_mapping_reads_statistics_under_physical_names(spark: Any, tmp_path: Path) -> None:
    made = tmp_path / "made"
    sql(
        spark,
        f"CREATE TABLE delta.`{made}` (id INT, ts TIMESTAMP) USING delta TBLPROPERTIES "
        "('delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5')",
    )
    sql(spark, f"ALTER TABLE delta.`{made}` RENAME COLUMN ts TO event_time")
    schema = "id INT, event_time TIMESTAMP"
    append(spark, made, [(1, ts(1)), (2, ts(3))], schema)
    append(spark, made, [(3, ts(2)), (4, ts(4))], schema)
    append(spark, made, [(5, ts(7)), (6, ts(9))], schema)
    ours, theirs = copies(tmp_path, made)
    done = expired(ours, "event_time")
    assert done.plan.column.physical.startswith("col-") and done.plan.files == 2
    spark_delete(spark, theirs, f"event_time < {CUTOFF}")
    assert readers_agree(spark, ours) == readers_agree(spark, theirs)


# ----------------------------------------------------------------------------------- refusals


def test_refusals_write_nothing(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = tmp_path / "made"
    sql(
        spark,
        f"CREATE TABLE delta.`{made}` (id INT, n INT, day STRING) USING delta "
        "PARTITIONED BY (day) TBLPROPERTIES ('delta.appendOnly' = 'true')",
    )
    values = ", ".join(f"({d}, {d}, '2026-01-0{d}')" for d in range(1, 9))
    sql(spark, f"INSERT INTO delta.`{made}` VALUES {values}")
    sql(spark, f"ALTER TABLE delta.`{made}` SET TBLPROPERTIES ('delta.appendOnly' = 'false')")
    plain = tmp_path / "plain"
    shutil.copytree(made, plain)
    sql(spark, f"ALTER TABLE delta.`{made}` SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    base = ["--keep", "5d", "--now", "2026-01-10T12:00:00Z", "--json"]
    cases = [
        (made, ["--column", "day"], 2, "delta.appendOnly is set"),
        (plain, ["--column", "missing"], 2, "no column 'missing'"),
        (plain, ["--column", "n"], 2, "column 'n' is of type integer"),
        (plain, ["--column", "day", "--max-fraction", "0.4"], 2, "more than maxFraction 0.4"),
    ]
    for path, flags, code, says in cases:
        before = sorted(p.name for p in (path / "_delta_log").iterdir())
        got, _, err = run(capsys, "expire", str(path), *base, *flags)
        assert (got, says in err) == (code, True), err
        assert sorted(p.name for p in (path / "_delta_log").iterdir()) == before


def days_and_one_straddling(spark: Any, made: Path) -> Path:
    """Days 1-7 in a partition column generated from `ts`, two rows a day, and one file of
    day 5 with rows on both sides of the cutoff."""
    sql(
        spark,
        f"CREATE TABLE delta.`{made}` (id INT, ts TIMESTAMP, "
        "day DATE GENERATED ALWAYS AS (CAST(ts AS DATE))) USING delta PARTITIONED BY (day)",
    )
    schema = "id INT, ts TIMESTAMP"
    for d in range(1, 8):
        append(spark, made, [(d * 10, ts(d, 1)), (d * 10 + 1, ts(d, 6))], schema)
    append(spark, made, [(102, ts(5, 3)), (103, ts(5, 23))], schema)  # straddles
    return made


def test_rewrite_spark_deletes_the_straddling_rows_as_spark_does(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rewrite spark: the metadata-only commit, then Delta Spark's DELETE limited to the
    straddling files' partitions (spark-submit): the same rows as Spark's DELETE on the whole
    table, and the files of other partitions untouched by the job."""
    ours, theirs = copies(tmp_path, days_and_one_straddling(spark, tmp_path / "made"))
    flags = ["--column", "ts", "--keep", "5d", "--now", "2026-01-10T12:00:00Z", "--json"]
    code, out, err = run(capsys, "expire", str(ours), *flags, "--rewrite", "spark",
                         "--max-fraction", "1", *cli_spark_flags())  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["straddlingFiles"] == 1 and report["removedFiles"] == 5
    job = report["job"]
    assert job["result"] == "done" and job["rowsDeleted"] == 1, job
    assert "`day` = CAST('2026-01-05' AS date)" in job["condition"]
    spark_delete(spark, theirs, f"ts < {CUTOFF}")
    assert readers_agree(spark, ours) == readers_agree(spark, theirs)
    assert older_rows_of(spark, ours, "ts") == []


def test_a_daemon_runs_rewrite_spark_through_its_launcher(spark: Any, tmp_path: Path) -> None:
    """Slow: a spark-submit JVM besides the module's session. `deltakeeper run --once` with
    dataRetention.rewrite spark: its commit removes what goes whole, then its launcher runs
    Delta Spark's DELETE on the straddling file's partition; the same rows as Spark's DELETE
    on a copy, and the status holds both."""
    made = days_and_one_straddling(spark, tmp_path / "made")
    ours, theirs = copies(tmp_path, made)
    folder = tmp_path / "manifests"
    folder.mkdir()
    # The daemon's clock is the real one: keep puts its cutoff a few seconds past CUTOFF, hours
    # from any row.
    keep_s = int(time.time() - parse_timestamp_ms("2026-01-05T12:00:00Z") / 1000)
    retention = {"column": "ts", "keep": f"{keep_s}s", "maxFraction": 1, "rewrite": "spark"}
    doc = table_doc("t", f"file://{ours}", dataRetention=retention, vacuum={"enabled": False})
    (folder / "t.json").write_text(json.dumps(doc))
    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--once", *cli_spark_flags()]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}

    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)

    assert done.returncode == 0, done.stderr[-3000:]
    entry = _statuses(folder)["lake/t"]["lastMaintenance"]["expire"]
    assert (entry["result"], entry["engine"], entry["removedFiles"]) == ("done", "spark", 5), entry
    assert (entry["rewrite"]["rowsDeleted"], entry["rewrite"]["filesRemoved"]) == (1, 1), entry
    assert entry["version"] == newest(ours) == newest(made) + 2  # our commit, then the job's
    assert commit(ours, newest(ours))["operation"] == "DELETE"
    spark_delete(spark, theirs, f"ts < {CUTOFF}")
    assert readers_agree(spark, ours) == readers_agree(spark, theirs)
    assert older_rows_of(spark, ours, "ts") == []
