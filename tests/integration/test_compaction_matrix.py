"""The compaction job's matrix: planned by deltakeeper, run by the job, read by three oracles.

For each kind of table, written by delta-rs and by Delta Spark where that writer can make it:
deltakeeper's planner plans, the real job runs (its own entry point, in the module's Delta Spark
session: what the job does to a table does not depend on how it was launched, and a JVM of its
own per kind cost 44-76 s each on the loaded 2-core machine; spark-submit itself is tested by
`deltakeeper compact` below and in test_compaction_job.py and test_spark_engine_job.py), and
then delta-rs, DuckDB and Delta Spark read the same rows (sorted-row digest) at every version,
the ones before the compaction unchanged. The job's commits carry dataChange=false, operation
OPTIMIZE (REORG for a purge) and the job id; each planned partition ends with the files the
plan said; a second plan finds nothing. What an oracle or a writer cannot do is written down
below, with the reason, and asserted, so it shows when it changes. `deltakeeper compact`
itself runs once here too, on a table due a checkpoint, which it writes before the job.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltakeeper.cli import main
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.policy import CompactionSettings
from tests.support import spark as spark_support
from tests.support.compaction import (
    cli_spark_flags,
    commit_info,
    file_changes,
    files_per_partition,
    plan_table,
    run_in_session,
)
from tests.support.oracles import Unreadable, table_versions
from tests.support.rows import deltars_digest, digest, duckdb_digest, spark_digest
from tests.support.spark import copy_table, spark_session

pytestmark = pytest.mark.spark

spark_tables = spark_support.spark_tables

SETTINGS = CompactionSettings(min_files_per_partition=2)
UTC = dt.UTC
# Partition values a planner must type and quote: quotes, %, =, /, backslash, unicode, nulls,
# dates and timestamps (with microseconds).
PARTS: list[tuple[str | None, dt.date | None, dt.datetime | None]] = [
    ("it's", dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 12, 30, 1, 123456, UTC)),
    ("100%", None, dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ("a=b/c", dt.date(1970, 1, 1), None),
    ("back\\slash", None, None),
    ("ünïcødé ☃", dt.date(2000, 1, 1), dt.datetime(2000, 1, 1, tzinfo=UTC)),
    (None, None, dt.datetime(2024, 6, 1, 1, 2, 3, tzinfo=UTC)),
]
ROUNDS = 3  # appends: three small files in every partition

# (table, oracle) -> why that oracle cannot read the table, as its error says. Empty: every
# oracle reads every table kind below; an entry here must keep failing the way it says.
KNOWN_UNREADABLE: dict[tuple[str, str], str] = {}
# Known limitation: DuckDB's delta extension (1.5.5) reads the partition column of a table with
# column mapping as NULL (the log keys partition values by physical name). Every other column
# and the row count it reads right; that much is asserted for these tables, and counted apart.
DUCKDB_NULL_PARTITION = {"rs_column_mapping": "s", "sp_column_mapping": "region"}

AGREEMENTS: Counter[str] = Counter()
PARTIAL: Counter[str] = Counter()  # DuckDB's reads under DUCKDB_NULL_PARTITION


# ------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------


def _rs_rows(round_: int) -> pa.Table:
    n = len(PARTS)
    return pa.table(
        {
            "id": pa.array(range(round_ * n, (round_ + 1) * n), pa.int64()),
            "s": pa.array([p[0] for p in PARTS], pa.string()),
            "d": pa.array([p[1] for p in PARTS], pa.date32()),
            "ts": pa.array([p[2] for p in PARTS], pa.timestamp("us", tz="UTC")),
        }
    )


def rs_partitioned(_: Any, path: Path) -> Path:
    from deltalake import write_deltalake

    for round_ in range(ROUNDS):
        write_deltalake(str(path), _rs_rows(round_), mode="append", partition_by=["s", "d", "ts"])
    return path


def rs_unpartitioned(_: Any, path: Path) -> Path:
    from deltalake import write_deltalake

    for round_ in range(ROUNDS):
        write_deltalake(str(path), _rs_rows(round_), mode="append")
    return path


def rs_column_mapping(_: Any, path: Path) -> Path:
    """Name mode: partition values and parquet columns under generated physical names."""
    from deltalake import write_deltalake

    config = {"delta.columnMapping.mode": "name"}
    for round_ in range(ROUNDS):
        write_deltalake(
            str(path), _rs_rows(round_), mode="append", partition_by=["s"], configuration=config
        )
    return path


def rs_deletion_vectors(_: Any, path: Path) -> Path:
    """The deletionVectors feature on; delta-rs deletes by rewriting (it writes no vectors)."""
    from deltalake import DeltaTable, write_deltalake

    config = {"delta.enableDeletionVectors": "true"}
    for round_ in range(ROUNDS):
        write_deltalake(str(path), _rs_rows(round_), mode="append", configuration=config)
    DeltaTable(str(path)).delete("id = 1")
    return path


def _sp_append(spark: Any, path: Path, rows: list[tuple[Any, ...]], schema: str) -> None:
    spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append").save(
        str(path)
    )


SP_SCHEMA = "id LONG, s STRING, d DATE, ts TIMESTAMP"


def _sp_rows(round_: int) -> list[tuple[Any, ...]]:
    n = len(PARTS)
    return [(round_ * n + i, *part) for i, part in enumerate(PARTS)]


def _sp_table(spark: Any, path: Path, layout: str) -> Path:
    """The PARTS rows in ROUNDS appends to a Spark table created with `layout` (e.g.
    PARTITIONED BY ...), or created by the first append when `layout` is empty."""
    if layout:
        spark.sql(f"CREATE TABLE delta.`{path}` ({SP_SCHEMA}) USING delta {layout}")
    for round_ in range(ROUNDS):
        _sp_append(spark, path, _sp_rows(round_), SP_SCHEMA)
    return path


def sp_partitioned(spark: Any, path: Path) -> Path:
    return _sp_table(spark, path, "PARTITIONED BY (s, d, ts)")


def sp_unpartitioned(spark: Any, path: Path) -> Path:
    return _sp_table(spark, path, "")


def sp_clustered(spark: Any, path: Path) -> Path:
    return _sp_table(spark, path, "CLUSTER BY (s)")


def sp_purge(spark: Any, path: Path) -> Path:
    """Partition 'lone': one file, half its rows deleted (a deletion vector): OPTIMIZE drops
    single-file bins, so only a purge rewrites it. Partition 'many': three small files."""
    schema = "id LONG, p STRING"
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({schema}) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    _sp_append(spark, path, [(i, "lone") for i in range(20)], schema)
    for round_ in range(ROUNDS):
        _sp_append(spark, path, [(100 + round_ * 2 + i, "many") for i in range(2)], schema)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE p = 'lone' AND id % 2 = 0")
    return path


def _cached(name: str) -> Callable[[Any, Path], Path]:
    def build(_: Any, path: Path) -> Path:
        return copy_table(spark_support.ensure_tables()[name], path)

    build.__name__ = f"sp_{name}"
    return build


TABLES: dict[str, Callable[[Any, Path], Path]] = {
    "rs_partitioned": rs_partitioned,
    "rs_unpartitioned": rs_unpartitioned,
    "rs_column_mapping": rs_column_mapping,
    "rs_deletion_vectors": rs_deletion_vectors,
    "sp_partitioned": sp_partitioned,
    "sp_unpartitioned": sp_unpartitioned,
    "sp_clustered": sp_clustered,
    "sp_purge": sp_purge,
    # Delta Spark's feature tables (tests/support/spark.py): deletion vectors on every file,
    # column mapping with a rename, row tracking, in-commit timestamps, V2 checkpoints.
    **{
        f"sp_{n}": _cached(n)
        for n in (
            "dv",
            "column_mapping",
            "row_tracking",
            "in_commit_timestamps",
            "v2_checkpoint_sidecars",
        )
    },
}


# ------------------------------------------------------------------------------------------
# Oracles
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One Delta Spark session for the module: it writes the Spark tables, runs the planned
    jobs and is the third oracle."""
    yield spark_session("deltakeeper-compaction-matrix")


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    total = sum(AGREEMENTS.values())
    lines = [f"  {name}: {n}" for name, n in sorted(AGREEMENTS.items())]
    print(f"\noracle agreements (table x version x oracle): {total}", *lines, sep="\n")
    print(f"DuckDB reads with the partition column NULL (known limitation): {dict(PARTIAL)}")


def read(spark: Any, name: str, path: Path, version: int) -> dict[str, Any]:
    """Each oracle's digest of the rows at `version`; a known limitation is checked, then left
    out."""
    try:
        from_spark: Any = spark_digest(spark, str(path), version)
    except Exception as e:  # Delta Spark raises; the other two return Unreadable
        from_spark = Unreadable(f"spark: {type(e).__name__}: {str(e).splitlines()[0]}")
    got = {
        "delta-rs": deltars_digest(str(path), version),
        "duckdb": duckdb_digest(str(path), version),
        "spark": from_spark,
    }
    if name in DUCKDB_NULL_PARTITION:
        column = DUCKDB_NULL_PARTITION[name]
        nulled = [{**row, column: None} for row in deltars_rows(path, version)]
        assert got.pop("duckdb") == digest(nulled), (name, version)
        PARTIAL[name] += 1
    for oracle, answer in list(got.items()):
        known = KNOWN_UNREADABLE.get((name, oracle))
        if known is None:
            assert not isinstance(answer, Unreadable), f"{name} v{version}: {answer}"
        else:
            assert isinstance(answer, Unreadable) and known in answer, (name, version, answer)
            del got[oracle]
    return got


def deltars_rows(path: Path, version: int) -> list[dict[str, Any]]:
    from deltalake import DeltaTable, QueryBuilder

    qb = QueryBuilder().register("t", DeltaTable(str(path), version=version))
    return list(pa.table(qb.execute("SELECT * FROM t").read_all()).to_pylist())


def agreed(spark: Any, name: str, path: Path) -> dict[int, tuple[int, str]]:
    """The rows at every version, as every oracle reads them alike."""
    out = {}
    for version in table_versions(str(path)):
        got = read(spark, name, path, version)
        assert len(set(got.values())) == 1, (name, version, got)
        AGREEMENTS[name] += len(got)
        out[version] = next(iter(got.values()))
    return out


def baseline(path: Path) -> dict[int, Any]:
    """The rows at every version before the job, by delta-rs alone (the cheap oracle); all
    three read every version after it."""
    return {v: deltars_digest(str(path), v) for v in table_versions(str(path))}


def same_partition(key: tuple[tuple[str, str | None], ...]) -> tuple[tuple[str, Any], ...]:
    """A partition key with timestamps as instants: delta-rs writes `2024-02-29 12:30:01.123456`
    where Delta Spark writes `2024-02-29T12:30:01.123456Z`, both UTC, for the same partition."""
    return tuple((column, _instant(value)) for column, value in key)


def by_instant(counts: Counter[Any]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for key, n in counts.items():
        out[same_partition(key)] += n
    return out


def _instant(value: str | None) -> Any:
    if value is None or not re.fullmatch(
        r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?Z?", value
    ):
        return value
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# ------------------------------------------------------------------------------------------
# The matrix
# ------------------------------------------------------------------------------------------


def _plan(path: Path) -> tuple[compaction_plan.CompactionPlan, dict[str, str], int]:
    return plan_table(path, SETTINGS)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_planned_job_keeps_every_row_for_every_oracle(
    spark: Any, tmp_path: Path, name: str
) -> None:
    path = TABLES[name](spark, tmp_path / name)
    found, names, planned = _plan(path)
    assert found.due, found.reason()
    before = files_per_partition(path)
    rows = baseline(path)
    assert max(rows) == planned and not any(isinstance(r, Unreadable) for r in rows.values())
    # The types as the planner sends them: the job must not need to ask Spark.
    types = compaction_plan.spark_partition_types(open_table(str(path)).snapshot().metadata)
    assert types is not None and set(types) == set(names.values()), types
    spec = compaction_plan.job_spec(found, names, f"dk-{name}", planned, types)

    code, out, err = run_in_session(spark, {**spec, "table": str(path)})

    assert code == 0, err
    assert out["result"] == "done" and out["plannedVersion"] == planned, out
    versions = [c["version"] for c in out["commits"]]
    assert versions == list(range(planned + 1, planned + 1 + len(versions)))
    assert table_versions(str(path))[-1] == versions[-1]
    expected_ops = {
        op for op, groups in (("OPTIMIZE", "compact"), ("REORG", "purge")) if spec[groups]
    }
    assert {commit_info(path, v)["operation"] for v in versions} == expected_ops
    for v in versions:
        assert commit_info(path, v)["userMetadata"] == f"dk-{name}"
        changes = file_changes(path, v)
        assert changes and all(c["dataChange"] is False for c in changes), (v, changes)
    # Each planned partition ends with the files the plan said; the others are untouched.
    after, expected = by_instant(files_per_partition(path)), by_instant(before)
    for part in found.partitions:
        key = same_partition(tuple(sorted(part.values.items())))
        expected[key] += part.expected_files - part.files
    assert +after == +expected
    # The rows: unchanged at every version before, and the same at every version after.
    now = agreed(spark, name, path)
    assert {v: now[v] for v in rows} == rows
    assert all(now[v] == rows[planned] for v in versions)
    again = _plan(path)[0]
    assert not again.due, again.reason()


def test_compact_writes_the_due_checkpoint_before_its_job(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`deltakeeper compact` (the CLI, a real spark-submit) on a table 11 commits past no
    checkpoint, the checkpoint interval 10: the checkpoint at the planned version is there
    before the job's commit, and the three oracles read the same rows at every version, the
    checkpointed one included.

    Slow: the CLI's own spark-submit (a JVM of its own: the launcher path is what is tested
    here), then three readers at each of 12 versions."""
    from deltalake import write_deltalake

    name, path = "rs_checkpoint_first", tmp_path / "rs_checkpoint_first"
    for round_ in range(11):  # delta-rs checkpoints every 100 commits: none of its own here
        write_deltalake(str(path), _rs_rows(round_), mode="append", partition_by=["s", "d", "ts"])
    log = path / "_delta_log"
    rows = baseline(path)
    planned = max(rows)
    assert planned == 10 and not list(log.glob("*.checkpoint*"))

    code = main(["compact", str(path), "--min-files", "2", "--json", *cli_spark_flags()])

    out, err = capsys.readouterr()
    assert code == 0 and out, err
    report = json.loads(out)
    assert report["checkpointVersion"] == planned, report
    assert report["checkpoint"]["result"] == "done", report["checkpoint"]
    job = report["job"]
    assert job["result"] == "done" and job["plannedVersion"] == planned, job
    versions = [c["version"] for c in job["commits"]]
    assert versions and versions[0] == planned + 1
    checkpoint = log / f"{planned:020d}.checkpoint.parquet"
    first_commit = log / f"{versions[0]:020d}.json"
    assert checkpoint.stat().st_mtime_ns < first_commit.stat().st_mtime_ns
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == planned
    assert {commit_info(path, v)["userMetadata"] for v in versions} == {job["jobId"]}
    assert all(c["dataChange"] is False for v in versions for c in file_changes(path, v))
    now = agreed(spark, name, path)
    assert {v: now[v] for v in rows} == rows
    assert all(now[v] == rows[planned] for v in versions)
    assert sum(files_per_partition(path).values()) == 6  # one file in each of 6 partitions


def test_what_delta_rs_cannot_write(tmp_path: Path) -> None:
    """Why some kinds above exist only as Delta Spark tables: delta-rs 1.6.6 refuses row
    tracking and in-commit timestamps, writes no deletion vector (it deletes by rewriting),
    and writes a classic checkpoint under checkpointPolicy=v2."""
    from deltalake import DeltaTable, write_deltalake

    data = _rs_rows(0)
    for prop in ("delta.enableRowTracking", "delta.enableInCommitTimestamps"):
        with pytest.raises(Exception, match=f"Error parsing property '{prop}'"):
            write_deltalake(str(tmp_path / prop), data, configuration={prop: "true"})
    dv = tmp_path / "dv"
    write_deltalake(str(dv), data, configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable(str(dv)).delete("id = 1")
    assert not any(c.get("deletionVector") for c in file_changes(dv, 1))
    v2 = tmp_path / "v2"
    write_deltalake(str(v2), data, configuration={"delta.checkpointPolicy": "v2"})
    DeltaTable(str(v2)).create_checkpoint()
    names = sorted(p.name for p in (v2 / "_delta_log").iterdir())
    assert "00000000000000000000.checkpoint.parquet" in names, names
