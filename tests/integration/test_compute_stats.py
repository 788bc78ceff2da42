"""compute-stats against Delta Spark: the statistics deltakeeper builds from footers equal those
Delta Spark computes from the data of the same files, Spark skips files with them, and every
reader reads the same rows before and after.

The reference is Delta Spark's own COMPUTE STATS (`StatisticsCollection.recompute`, through
py4j) on a copy of the table, or the statistics Spark wrote with its files.
Where deltakeeper differs by design it is asserted too: float and double bounds of files from
Arrow-family writers are dropped (Delta's skipFloatingPointFromFooter: their footers leave NaN
out), and Spark computes them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.cli import run
from tests.support.rows import deltars_digest, duckdb_digest, spark_digest
from tests.support.spark import spark_session

pytestmark = pytest.mark.spark

FLOATS = ("f32", "f64")


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's session, kept for the whole run (stopping it would make the next module
    start another)."""
    return spark_session("deltakeeper-compute-stats")


def rich(n0: int, n: int) -> pa.Table:
    """Every type Delta keeps statistics for, nulls in each, strings past the 32-character
    prefix (two-byte and four-byte characters), timestamps before 1970, nested structs, a
    list, a map, a column of nulls only."""
    rows = range(n0, n0 + n)

    def some(f: Any) -> list[Any]:
        return [None if i % 7 == 3 else f(i) for i in rows]

    long = "é" * 30 + "z" * 10
    utc = dt.UTC
    return pa.table(
        {
            "part": pa.array(["a/b c" if i % 2 else "x=1" for i in rows]),
            "i8": pa.array(some(lambda i: i % 100 - 50), pa.int8()),
            "i16": pa.array(some(lambda i: i * 3), pa.int16()),
            "i32": pa.array(some(lambda i: -i), pa.int32()),
            "i64": pa.array(some(lambda i: i * 1_000_000_007), pa.int64()),
            "f32": pa.array(some(lambda i: i / 3), pa.float32()),
            "f64": pa.array(some(lambda i: i / 7), pa.float64()),
            "dec": pa.array(some(lambda i: decimal.Decimal(i) / 100), pa.decimal128(10, 2)),
            "d": pa.array(some(lambda i: dt.date(2020, 1, 1) + dt.timedelta(days=i)), pa.date32()),
            "ts": pa.array(
                some(lambda i: dt.datetime(2021, 3, 4, 5, 6, 7, 1000 * i + 999, tzinfo=utc)),
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array(
                some(lambda i: dt.datetime(1969, 12, 31, 23, 59, 59, 999999 - 1000 * i)),
                pa.timestamp("us"),
            ),
            "s": pa.array(some(lambda i: f"v{i:04d}" + (long if i % 5 == 0 else ""))),
            "emoji": pa.array(some(lambda i: "\U0001f600" * 20 + str(i))),
            "b": pa.array(some(lambda i: i % 2 == 0), pa.bool_()),
            "bin": pa.array(some(lambda i: bytes([i % 256])), pa.binary()),
            "st": pa.array(
                [
                    None if i % 11 == 0 else {"x": None if i % 3 == 0 else i, "y": {"z": f"z{i}"}}
                    for i in rows
                ]
            ),
            "l": pa.array([None if i % 4 == 1 else [i, None] for i in rows], pa.list_(pa.int64())),
            "m": pa.array(
                [None if i % 6 == 1 else [("k", i)] for i in rows],
                pa.map_(pa.string(), pa.int64()),
            ),
            "allnull": pa.array([None] * n, pa.int64()),
        }
    )


def strip_stats(path: Path) -> None:
    """What a writer without statistics leaves: adds with no `stats` (and no Hadoop checksums
    of the commits, which would no longer match)."""
    for crc in (path / "_delta_log").glob(".*.json.crc"):
        crc.unlink()
    for f in sorted((path / "_delta_log").glob("*.json")):
        lines = []
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                action["add"].pop("stats", None)
            lines.append(json.dumps(action))
        f.write_text("\n".join(lines) + "\n")


def live_adds(path: Path) -> dict[str, dict[str, Any]]:
    """The live adds by path, replayed from the JSON commits."""
    live: dict[str, dict[str, Any]] = {}
    for f in sorted((path / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return live


def parsed(stats: str) -> dict[str, Any]:
    doc = json.loads(stats, parse_float=decimal.Decimal)
    doc.pop("tightBounds", None)
    return doc


def spark_recompute(spark: Any, path: Path) -> dict[str, dict[str, Any]]:
    """Delta Spark's COMPUTE STATS on the table at `path`; the statistics it committed."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))
    stats = getattr(
        getattr(jvm.org.apache.spark.sql.delta.stats, "StatisticsCollection$"), "MODULE$"
    )
    everything = getattr(stats, "recompute$default$4")()  # Seq(true)
    every_file = getattr(stats, "recompute$default$5")()
    stats.recompute(spark._jsparkSession, log, jvm.scala.Option.empty(), everything, every_file)
    return {p: parsed(a["stats"]) for p, a in live_adds(path).items()}


def files_scanned(spark: Any, path: Path, where: str) -> int:
    """Files Spark's scan read for a filtered query (the scan node's numFiles)."""
    df = spark.read.format("delta").load(str(path)).where(where)
    df.collect()
    nodes = [df._jdf.queryExecution().executedPlan()]
    while nodes:
        node = nodes.pop()
        metrics = node.metrics()
        if metrics.contains("numFiles"):
            return int(metrics.apply("numFiles").value())
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    raise AssertionError(f"no scan with numFiles in the plan of {where}")


def agree(spark: Any, path: Path, version: int) -> tuple[int, str]:
    ours = deltars_digest(str(path), version)
    assert ours == duckdb_digest(str(path), version) == spark_digest(spark, str(path), version)
    assert isinstance(ours, tuple)
    return ours


def compute(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    code, out, err = run(capsys, "compute-stats", str(path), "--json")
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def without_floats(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        k: ({c: v for c, v in part.items() if c not in FLOATS} if k.endswith("Values") else part)
        for k, part in doc.items()
    }


def test_deltars_files_get_the_statistics_spark_computes(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deltalake import DeltaTable, WriterProperties, write_deltalake

    path = tmp_path / "t"
    small_groups = WriterProperties(max_row_group_size=16)  # bounds merged across row groups
    write_deltalake(str(path), rich(0, 40), partition_by=["part"], writer_properties=small_groups)
    write_deltalake(
        str(path),
        rich(100, 30),
        partition_by=["part"],
        mode="append",
        writer_properties=small_groups,
    )
    strip_stats(path)
    shutil.copytree(path, tmp_path / "theirs")
    where = "i64 < 2000000000"  # rows 0 and 1: one file of each partition
    before = files_scanned(spark, path, where)
    rows = agree(spark, path, 1)

    report = compute(capsys, path)
    assert (report["missingStats"], report["givenStats"], report["commits"]) == (4, 4, [2])
    adds = live_adds(path)
    sparks = spark_recompute(spark, tmp_path / "theirs")
    assert len(adds) == 4 and set(sparks) == set(adds)
    for name, add in adds.items():
        assert add["dataChange"] is False
        ours, theirs = parsed(add["stats"]), sparks[name]
        assert ours == without_floats(theirs), name
        for side in ("minValues", "maxValues"):  # Arrow footers: float bounds dropped
            assert set(FLOATS) <= set(theirs[side]) and not set(FLOATS) & set(ours[side])

    assert (before, files_scanned(spark, path, where)) == (4, 2)
    assert agree(spark, path, 2) == agree(spark, path, 1) == rows
    records = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))[
        "num_records"
    ].to_pylist()
    assert sorted(records) == sorted(parsed(a["stats"])["numRecords"] for a in adds.values())
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "COMPUTE STATS" and history[0]["version"] == 2
    again = compute(capsys, path)
    assert (again["missingStats"], again["commits"]) == (0, [])


def spark_table(spark: Any, path: Path, properties: dict[str, str]) -> None:
    """Three Spark files (parquet-mr footers, INT96 timestamps, decimals stored as integers)
    with a nested struct."""
    df = spark.sql(
        """
        SELECT id, id / 3.0D AS f, CAST(id AS FLOAT) / 7 AS g,
               IF(id % 4 = 0, NULL, concat('k', repeat('é', 40), id)) AS s,
               timestamp_micros(1600000000000000 + id * 1001) AS ts,
               named_struct('a', id * 2, 'b', IF(id % 3 = 0, NULL, concat('b', id))) AS st,
               array(id) AS arr,
               CAST(id / 7 AS DECIMAL(9, 2)) AS dec,
               date_add(DATE'2020-01-01', CAST(id AS INT)) AS d
        FROM range(0, 30)
        """
    ).repartition(3)
    writer = df.write.format("delta")
    for key, value in properties.items():
        writer = writer.option(key, value)
    writer.save(str(path))


@pytest.mark.parametrize(
    "properties",
    [
        {},
        {"delta.dataSkippingNumIndexedCols": "6"},  # st.a is the sixth leaf, st.b is out
        {"delta.dataSkippingStatsColumns": "st.b, s"},
    ],
    ids=["default", "six-leaves", "named-columns"],
)
def test_spark_files_get_back_sparks_own_statistics(
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    properties: dict[str, str],
) -> None:
    path = tmp_path / "t"
    spark_table(spark, path, properties)
    written = {p: parsed(a["stats"]) for p, a in live_adds(path).items()}
    strip_stats(path)

    report = compute(capsys, path)
    assert (report["givenStats"], report["commits"]) == (3, [1])
    # INT96 timestamps have no footer bounds and an array no footer null count: both read
    reads = "delta.dataSkippingStatsColumns" not in properties
    assert (report["dataBytesRead"] > 0) == reads
    assert {p: parsed(a["stats"]) for p, a in live_adds(path).items()} == written
    assert agree(spark, path, 1) == agree(spark, path, 0)


def test_files_written_before_the_indexed_columns_changed(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t"
    spark_table(spark, path, {"delta.dataSkippingNumIndexedCols": "1"})
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.dataSkippingNumIndexedCols=32)")
    shutil.copytree(path, tmp_path / "theirs")
    before = files_scanned(spark, path, "s < 'k'")  # only id has bounds: every file is read

    report = compute(capsys, path)
    assert (report["missingStats"], report["givenStats"], report["commits"]) == (3, 3, [2])
    sparks = spark_recompute(spark, tmp_path / "theirs")
    assert {p: parsed(a["stats"]) for p, a in live_adds(path).items()} == sparks
    assert (before, files_scanned(spark, path, "s < 'k'")) == (3, 0)
    assert agree(spark, path, 2) == agree(spark, path, 1)
