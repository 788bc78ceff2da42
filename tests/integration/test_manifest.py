"""Symlink manifests against Delta Spark's `GENERATE symlink_format_manifest`: after every
change to a Spark table (appends, deletes that rewrite files, a partition emptied), the
manifests deltakeeper keeps are those Spark generates on a copy of the table, file for file and
line for line (Spark's line order is its shuffle's; ours is sorted), with Hive's escaping of
partition values that need it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.errors import UnsupportedProtocolError
from deltakeeper.delta.manifest import generate
from deltakeeper.delta.table import open_table
from tests.support.cli import run
from tests.support.spark import spark_session

pytestmark = pytest.mark.spark

VALUES = ["a/b c", "x=1", "100%", "é#{", None]


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's session, kept for the whole run (stopping it would make the next module
    start another)."""
    return spark_session("deltakeeper-manifest")


def manifests(path: Path) -> dict[str, bytes]:
    """Each manifest's path below the table, and its bytes with the table's root made `ROOT`."""
    root = f"file:{path}"
    return {
        str(f.relative_to(path)): f.read_bytes().replace(root.encode(), b"ROOT")
        for f in (path / "_symlink_format_manifest").rglob("manifest")
    }


def sparks(spark: Any, path: Path, copy: Path) -> dict[str, bytes]:
    """What Spark generates on a copy of the table, lines sorted."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns("_symlink_format_manifest"))
    spark.sql(f"GENERATE symlink_format_manifest FOR TABLE delta.`{copy}`")
    return {k: b"".join(sorted(v.splitlines(keepends=True))) for k, v in manifests(copy).items()}


def ours(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, bytes]:
    code, _, err = run(capsys, "manifest", str(path))
    assert code == 0, err
    return manifests(path)


def rows(spark: Any, n0: int, n: int) -> Any:
    return spark.createDataFrame(
        [(i, VALUES[i % len(VALUES)], i % 2) for i in range(n0, n0 + n)], "id long, p string, q int"
    )


@pytest.mark.parametrize("partitions", [["p", "q"], []], ids=["partitioned", "unpartitioned"])
def test_manifests_are_those_spark_generates_after_each_change(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], partitions: list[str]
) -> None:
    path, copy = tmp_path / "t", tmp_path / "copy"
    (
        rows(spark, 0, 20)
        .write.format("delta")
        .partitionBy(*partitions)
        .option("delta.enableDeletionVectors", "false")
        .save(str(path))
    )
    first = ours(capsys, path)
    assert first == sparks(spark, path, copy)
    if partitions:
        assert "_symlink_format_manifest/p=a%2Fb c/q=0/manifest" in first
        assert "_symlink_format_manifest/p=__HIVE_DEFAULT_PARTITION__/q=1/manifest" in first
        assert "_symlink_format_manifest/p=100%25/q=0/manifest" in first

    rows(spark, 100, 7).write.format("delta").mode("append").save(str(path))
    assert ours(capsys, path) == sparks(spark, path, copy)

    spark.sql(f"DELETE FROM delta.`{path}` WHERE p = 'x=1' OR id % 3 = 0")
    after = ours(capsys, path)
    assert after == sparks(spark, path, copy)
    assert not any("x%3D1" in k for k in after)  # the emptied partition's manifest is gone
    assert len(after) == (2 * (len(VALUES) - 1) if partitions else 1)


def test_a_second_run_writes_nothing_and_a_dry_run_nothing_at_all(
    spark: Any, tmp_path: Path
) -> None:
    path = tmp_path / "t"
    rows(spark, 0, 10).write.format("delta").partitionBy("p").save(str(path))
    planned = generate(open_table(str(path)), dry_run=True)
    assert len(planned.written) == len(VALUES) and not (path / "_symlink_format_manifest").exists()
    generate(open_table(str(path)))
    again = generate(open_table(str(path)))
    assert (again.written, again.unchanged, again.deleted) == ([], len(VALUES), [])


def test_tables_with_deletion_vectors_are_refused(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows(spark, 0, 10).write.format("delta").option("delta.enableDeletionVectors", "true").save(
        str(path)
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 3")
    with pytest.raises(UnsupportedProtocolError, match="deletion vectors"):
        generate(open_table(str(path)))
    assert not (path / "_symlink_format_manifest").exists()
