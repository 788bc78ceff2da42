"""`deltakeeper maintain` on copies of every readable corpus table and every Spark-written table:
delta-rs and DuckDB read the same rows afterwards as before (a digest of the sorted rows) at
every version the retention still promises, and Delta Spark at the latest version.

Two runs per table. A young run (now = the copy's file times, so the log retention keeps every
commit): a checkpoint is written and a planted stray data file is vacuumed; every version whose
files the deleted-file retention still protects must read as before. An old run (now = 400 days
later, twice, so the second run's cleanup can cut at the first run's checkpoint): the log before
the newest checkpoint and every tombstoned data file go; the latest version must read as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deltakeeper.cli import main
from deltakeeper.delta import paths
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.table import open_table
from tests.conformance.test_checkpoint_write import readable_tables
from tests.support.oracles import Unreadable, table_versions
from tests.support.rows import deltars_digest, duckdb_digest, spark_digest
from tests.support.spark import TABLES, copy_table, ensure_tables, spark_session

pytestmark = pytest.mark.spark

DAY = 86_400_000
RETENTION = 7 * DAY  # Delta's default deleted-file retention, which maintain uses here

CASES = [f"corpus/{n}" for n in readable_tables()] + [f"spark/{n}" for n in TABLES]


@pytest.fixture(scope="module")
def spark():
    return spark_session("deltakeeper-maintain")


def source(case: str, corpus_copy, tmp_path: Path) -> Path:
    kind, name = case.split("/", 1)
    if kind == "corpus":
        return corpus_copy(name)
    return copy_table(ensure_tables()[name], tmp_path / name)


def plant(path: Path, name: str, mtime_ms: int) -> Path:
    f = path / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(b"not data")
    os.utime(f, ns=(mtime_ms * 1_000_000,) * 2)
    return f


def a_second_apart(log: Path) -> int:
    """Give the copied log a real history (a copy's file times tie); return a second later."""
    start = max(f.stat().st_mtime_ns for f in log.iterdir()) // 1_000_000
    last = start
    for f in log.iterdir():
        name = paths.parse(f.name)
        if name is not None and name.version >= 0:
            last = max(last, start + name.version * 1000)
            os.utime(f, ns=((start + name.version * 1000) * 1_000_000,) * 2)
    return last + 1000


def maintain(capsys, path: Path, now_ms: int) -> dict:
    full = ("--mode", "full")  # the planted stray is found by a listing only
    code = main(
        ["maintain", str(path), "--now", str(now_ms), "--checkpoint-interval", "1", "--json", *full]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert all(r["result"] in ("done", "skipped") for r in report["results"]), report
    return report


def keys(actions) -> list[tuple[str, str | None]]:
    """(path, deletion vector) of file actions: a DV file can expire while its data file lives."""
    dvs = actions["deletionVector"].to_pylist()
    return [
        (p, None if dv is None else f"{dv['storageType']}{dv['pathOrInlineDv']}")
        for p, dv in zip(actions["path"].to_pylist(), dvs, strict=True)
    ]


def promised(path: Path, now_ms: int) -> list[int]:
    """Versions whose files the deleted-file retention still protects at `now_ms`: none of the
    (file, deletion vector) pairs they read was removed before now - retention."""
    table = open_table(str(path))
    tombstones = table.snapshot().tombstones
    times = tombstones["deletionTimestamp"].to_pylist()
    expired = {
        k for k, ts in zip(keys(tombstones), times, strict=True) if (ts or 0) < now_ms - RETENTION
    }
    out = []
    for v in table_versions(str(path)):
        try:
            files = table.snapshot(version=v).files
        except DeltaError:  # a version no one can read (delta-live-table@0): nothing to keep
            continue
        if not set(keys(files)) & expired:
            out.append(v)
    return out


def read_all(spark, path: Path, versions: list[int]) -> dict[tuple[str, int], object]:
    """delta-rs and DuckDB at every version; Delta Spark (a JVM, slower) at the latest."""
    out: dict[tuple[str, int], object] = {}
    for v in versions:
        out["delta-rs", v] = deltars_digest(str(path), v)
        out["duckdb", v] = duckdb_digest(str(path), v)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # re-read the log we changed
    try:
        out["spark", versions[-1]] = spark_digest(spark, str(path), versions[-1])
    except Exception as e:  # the oracle's own refusal, compared like the others'
        out["spark", versions[-1]] = Unreadable(f"spark: {type(e).__name__}")
    return out


def same_as_before(before: dict, after: dict, tally) -> None:
    for key, digest in before.items():
        if isinstance(digest, Unreadable):
            tally["oracle reads refused before maintenance (not compared)"] += 1
            continue
        assert after[key] == digest, f"{key}: {after[key]} != {digest}"
        tally["oracle reads identical after maintain"] += 1


@pytest.mark.parametrize("case", CASES)
def test_maintain_keeps_every_promised_version(case, corpus_copy, tmp_path, spark, capsys, tally):
    path = source(case, corpus_copy, tmp_path)
    log = path / "_delta_log"
    snap = open_table(str(path)).snapshot()
    if snap.unsupported_features:
        refused_untouched(capsys, path)
        return
    young = a_second_apart(log)
    stray = plant(path, "stray-unreferenced.parquet", young - 30 * DAY)
    hidden = plant(path, "_hidden/kept.parquet", young - 30 * DAY)

    versions = promised(path, young)
    assert versions and versions[-1] == table_versions(str(path))[-1]
    before = read_all(spark, path, versions)
    report = maintain(capsys, path, young)
    assert not stray.exists() and hidden.exists()
    assert report["deletedFiles"] >= 1
    same_as_before(before, read_all(spark, path, versions), tally)
    tally["tables maintained (young run)"] += 1

    latest = versions[-1]
    old = young + 400 * DAY
    history = table_versions(str(path))
    maintain(capsys, path, old)
    maintain(capsys, path, old)
    if snap.metadata.configuration.get("delta.enableExpiredLogCleanup") == "false":
        assert table_versions(str(path)) == history
    elif (log / paths.commit(latest)).exists():
        assert table_versions(str(path)) == [latest]
    at_latest = {k: v for k, v in before.items() if k[1] == latest}
    same_as_before(at_latest, read_all(spark, path, [latest]), tally)
    tally["tables maintained (old run)"] += 1


def refused_untouched(capsys, path: Path) -> None:
    before = sorted((str(p), p.stat().st_size) for p in path.rglob("*") if p.is_file())
    code = main(["maintain", str(path), "--checkpoint-interval", "1", "--json"])
    _, err = capsys.readouterr()
    assert code == 3 and "does not support" in err
    assert sorted((str(p), p.stat().st_size) for p in path.rglob("*") if p.is_file()) == before


def test_cases_cover_the_corpus_and_spark_tables():
    assert len([c for c in CASES if c.startswith("corpus/")]) >= 40
    assert len([c for c in CASES if c.startswith("spark/")]) == len(TABLES)
