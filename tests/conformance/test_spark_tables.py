"""Tables written by Delta Spark with today's features, at every version: deltakeeper agrees
with delta-rs, DuckDB and Delta Spark itself (the files its scan would read)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.table import open_table
from tests.support.compare import check_against_oracles, ours
from tests.support.oracles import table_versions
from tests.support.spark import TABLES, ensure_tables, spark_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def tables() -> dict[str, str]:
    return ensure_tables()


@pytest.fixture(scope="module")
def spark():
    return spark_session("deltakeeper-conformance")


def spark_files(spark, path: str, version: int) -> set[str]:
    """Decoded paths, relative to the table root, of the files Delta Spark's scan would read."""
    df = spark.read.format("delta").option("versionAsOf", version).load(path)
    root = Path(path).resolve()
    return {str(Path(unquote(urlparse(u).path)).relative_to(root)) for u in df.inputFiles()}


@pytest.mark.parametrize("name", TABLES)
def test_every_version_agrees_with_three_oracles(name, tables, spark, tally):
    """Slow: every version of each table (partitioned_many_commits has 32) read by deltakeeper,
    delta-rs, DuckDB and Delta Spark."""
    path = tables[name]
    versions = table_versions(path)
    assert len(versions) >= 2
    for version in versions:
        mine = ours(Path(path), version)
        assert not isinstance(mine, DeltaError), f"{name}@{version}: {mine}"
        agreed = check_against_oracles(mine, Path(path), version, tally)
        assert set(agreed) == {"delta-rs", "duckdb"}, f"{name}@{version}: only {agreed} could read"
        assert {unquote(p) for p in mine["files"]} == spark_files(spark, path, version), (
            f"{name}@{version}: live files differ from Delta Spark"
        )
        tally["spark table-versions checked"] += 1
        tally["delta-spark agreed"] += 1


def test_v2_checkpoints_with_sidecars_are_read_from_both_top_level_formats(tables):
    path = tables["v2_checkpoint_sidecars"]
    table = open_table(path)
    kinds = {}
    for version in (5, 10):
        snap = table.snapshot(version=version)
        cp = snap.segment.checkpoint
        assert cp is not None and cp.version == version and cp.kind is Kind.UUID_CHECKPOINT
        kinds[cp.files[0].name.fmt] = snap.num_files
    assert set(kinds) == {"json", "parquet"}
    assert all(n > 0 for n in kinds.values())
    assert any(
        p.name.endswith(".parquet") for p in (Path(path) / "_delta_log" / "_sidecars").iterdir()
    )


def test_multipart_checkpoint_is_read_in_full(tables):
    snap = open_table(tables["multipart_checkpoint"]).snapshot(version=5)
    cp = snap.segment.checkpoint
    parts = sorted(
        (Path(tables["multipart_checkpoint"]) / "_delta_log").glob("*5.checkpoint.*.parquet")
    )
    assert len(parts) > 1
    assert cp is not None and cp.kind is Kind.MULTIPART_CHECKPOINT
    assert [f.name.name for f in cp.files] == [p.name for p in parts]


def test_in_commit_timestamps_drive_timestamp_time_travel(tables):
    table = open_table(tables["in_commit_timestamps"])
    latest = table.snapshot()
    assert latest.in_commit_timestamps
    for version in range(latest.version + 1):
        ts = table.snapshot(version=version).timestamp_ms
        assert ts == latest_ict(tables["in_commit_timestamps"], version)
        assert table.version_at(ts) == version


def latest_ict(path: str, version: int) -> int:
    import json

    first = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()[0]
    return int(json.loads(first)["commitInfo"]["inCommitTimestamp"])
