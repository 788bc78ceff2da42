"""LITE and FULL vacuum against Delta Spark's own VACUUM LITE and VACUUM FULL, on copies of the
same tables: the same files deleted, the same `_last_vacuum_info`, the same refusals; and
afterwards delta-rs, DuckDB and Delta Spark read the same rows at every version inside the
retention.

The clock: Spark's VACUUM reads the real one, so both run with a retention of 0 hours, and each
table is aged (tests/support/vacuum_tables.age): commits up to k keep the past times Spark wrote
them at, later ones are moved a day into the future with their removes' deletionTimestamps.
The newest commit before the cut-off (N) is then k for both, LITE reads commits 0 to k, and the
versions from k on stay readable."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from deltakeeper.cli import main
from deltakeeper.delta import paths
from tests.support.rows import deltars_digest, duckdb_digest, spark_digest
from tests.support.vacuum_tables import age, commit_versions, ensure_cdc_table

pytestmark = pytest.mark.spark

DAY = 86_400_000
SHORT = ("--deleted-file-retention", "0s", "--allow-short-retention")
# table -> k, the newest commit older than the cut-off after `age`. Checkpointed tables have k
# at their newest checkpoint: its tombstones keep the times Spark wrote (so they expire), and
# only removes after it are moved to the future.
TABLES = {
    "cdc": 4,  # change data files, partition values that are hard to quote
    "dv": 6,  # deletion vectors replaced by larger ones: the old DV files go
    "column_mapping": 5,  # partition folders named by physical names
    "v2_checkpoint_sidecars": 10,  # V2 checkpoints with sidecars, JSON and Parquet
    "multipart_checkpoint": 5,  # a classic multi-part checkpoint
    "partitioned_many_commits": 30,  # classic checkpoints, a space and a null in partitions
    "in_commit_timestamps": 4,  # N found by in-commit timestamps, not file times
}
# FULL against Spark where tests/conformance/test_vacuum_tables.py does not compare already.
FULL_TOO = ("cdc", "multipart_checkpoint", "in_commit_timestamps")


def source(name: str) -> Path:
    from tests.support.spark import ensure_tables

    return ensure_cdc_table() if name == "cdc" else Path(ensure_tables()[name])


def visible(root: Path) -> set[str]:
    """Files below the table outside `_delta_log`, but Hadoop's `.crc` side files (Delta Spark
    deletes each with its file on a local disk; deltakeeper leaves hidden files alone)."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts and not p.name.startswith(".")
    }


def info(root: Path) -> dict | None:
    f = root / paths.LOG_DIR / paths.LAST_VACUUM_INFO
    return json.loads(f.read_text()) if f.exists() else None


def ours(root: Path, mode: str, *flags: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["vacuum", str(root), "--mode", mode, *SHORT, "--json", *flags])
    assert code == 0
    return json.loads(out.getvalue())


def ours_deleting(root: Path, mode: str) -> tuple[dict, set[str]]:
    """Our dry run, then the real run: the dry run listed exactly what went."""
    before = visible(root)
    dry = ours(root, mode, "--dry-run")
    assert visible(root) == before, "the dry run deleted something"
    report = ours(root, mode)
    gone = before - visible(root)
    assert gone == set(dry["files"]) and report["deletedFiles"] == len(gone)
    assert report["mode"] == mode
    recorded = (info(root) or {}).get("latestCommitVersionOutsideOfRetentionWindow")
    assert dry["lastVacuumInfo"]["after"] in (None, recorded)
    return report, gone


def spark_vacuum(spark, root: Path, mode: str, dry: bool = False) -> set[str]:
    """Delta Spark's VACUUM ... <mode> RETAIN 0 HOURS; what it deleted (or would)."""
    from tests.support.spark import session_conf

    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # the files were edited
    before = visible(root)
    conf = {
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        "spark.databricks.delta.vacuum.logging.enabled": "false",  # no commits of its own
    }
    with session_conf(spark, conf):
        rows = spark.sql(
            f"VACUUM '{root}' {mode.upper()} RETAIN 0 HOURS{' DRY RUN' if dry else ''}"
        ).collect()
    if dry:  # paths as Hadoop prints them: not encoded
        base = root.resolve()
        return {Path(urlparse(r[0]).path).relative_to(base).as_posix() for r in rows}
    return before - visible(root)


def readable(spark, root: Path, versions: list[int]) -> dict:
    """Rows (count, digest) at each version, as delta-rs, DuckDB and Delta Spark read them."""
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return {
        v: (
            deltars_digest(str(root), v),
            duckdb_digest(str(root), v),
            spark_digest(spark, str(root), v),
        )
        for v in versions
    }


def prepared(name: str, where: Path, future_ms: int, k: int | None = None) -> Path:
    src = source(name)
    dest = Path(shutil.copytree(src, where))
    age(dest, src, TABLES[name] if k is None else k, future_ms)
    stray = dest / "stray-old.parquet"  # a file no commit names: FULL's, never LITE's
    stray.write_bytes(b"stray")
    return dest


@pytest.mark.parametrize("name", list(TABLES))
def test_lite_and_full_delete_what_delta_spark_deletes(name, tmp_path, tally):
    """A test per table, so the tables spread over the workers (each in the Spark session its
    worker keeps) instead of one test running them all one after another.

    Slow: Delta Spark's VACUUM per mode, and three readers at every version in the retention
    before and after each mode (Delta Spark's read of a version is several Spark jobs)."""
    from tests.support.spark import spark_session

    spark = spark_session("deltakeeper-vacuum")
    future = int(time.time() * 1000) + DAY
    k = TABLES[name]
    base = prepared(name, tmp_path / "base", future)
    versions = [v for v in commit_versions(base) if v >= k]
    rows = readable(spark, base, versions)
    for mode in ("lite", "full") if name in FULL_TOO else ("lite",):
        mine = Path(shutil.copytree(base, tmp_path / f"ours-{mode}"))
        theirs = Path(shutil.copytree(base, tmp_path / f"spark-{mode}"))
        report, gone = ours_deleting(mine, mode)
        assert spark_vacuum(spark, theirs, mode) == gone, f"{name} {mode}"
        assert info(mine) == {"latestCommitVersionOutsideOfRetentionWindow": k}, name
        spark_info = {"latestCommitVersionOutsideOfRetentionWindow": k} if mode == "lite" else {}
        assert info(theirs) == spark_info, f"{name} {mode}: Spark's _last_vacuum_info"
        assert ("stray-old.parquet" in gone) == (mode == "full")
        if mode == "lite":
            assert report["commitsRead"] == [0, k] and report["listedObjects"] == 0
        assert readable(spark, mine, versions) == rows, f"{name} {mode}: rows changed"
        tally[f"{mode} vacuums equal to Delta Spark's"] += 1
        tally[f"files deleted by {mode} vacuums, as Delta Spark deleted them"] += len(gone)
        tally["versions read the same by delta-rs, DuckDB and Spark after vacuum"] += len(versions)


def test_last_vacuum_info_is_shared_with_delta_spark_both_ways(tmp_path, tally):
    """Spark LITE after ours and ours after Spark's read from the N the other recorded: each
    step deletes what two LITE runs of ours delete."""
    from tests.support.spark import spark_session

    spark = spark_session("deltakeeper-vacuum")
    name, first, second = "partitioned_many_commits", 15, 25
    future = int(time.time() * 1000) + DAY
    src = source(name)
    runs = {
        "ours-ours": ("ours", "ours"),
        "ours-spark": ("ours", "spark"),
        "spark-ours": ("spark", "ours"),
    }
    deleted: dict[str, list[set[str]]] = {}
    for label, who in runs.items():
        root = prepared(name, tmp_path / label, future, k=first)
        deleted[label] = []
        for step, k in zip(who, (first, second), strict=True):
            age(root, src, k, future)  # time passes: commits up to k are past the cut-off
            if step == "ours":
                deleted[label].append(ours_deleting(root, "lite")[1])
            else:
                deleted[label].append(spark_vacuum(spark, root, "lite"))
            assert info(root) == {"latestCommitVersionOutsideOfRetentionWindow": k}, (label, k)
    assert all(d == deleted["ours-ours"] for d in deleted.values()), deleted
    assert all(deleted["ours-ours"]), "each step deletes something"
    tally["LITE vacuums continued from the other engine's _last_vacuum_info"] += 2


def cleaned_up(name: str, where: Path, before: int, n: int | None) -> Path:
    """A copy whose commits before `before` are gone (a log cleanup ran), with
    `_last_vacuum_info` at `n` (None: no file)."""
    root = Path(shutil.copytree(source(name), where))
    for v in range(before):
        (root / paths.LOG_DIR / paths.commit(v)).unlink()
    if n is not None:
        (root / paths.LOG_DIR / paths.LAST_VACUUM_INFO).write_text(
            json.dumps({"latestCommitVersionOutsideOfRetentionWindow": n})
        )
    return root


@pytest.mark.parametrize("n", [None, 3], ids=["no-info", "info-older-than-the-log"])
def test_lite_refuses_where_delta_spark_refuses_and_auto_runs_full(tmp_path, capsys, n, tally):
    from tests.support.spark import spark_session

    spark = spark_session("deltakeeper-vacuum")
    root = cleaned_up("v2_checkpoint_sidecars", tmp_path / "t", 10, n)
    with pytest.raises(Exception, match="DELTA_CANNOT_VACUUM_LITE"):
        spark_vacuum(spark, root, "lite", dry=True)
    code = main(["vacuum", str(root), "--mode", "lite", *SHORT])
    err = capsys.readouterr().err
    assert code == 2 and "DELTA_CANNOT_VACUUM_LITE" in err and "FULL" in err, err
    report = ours(root, "auto", "--dry-run")
    assert report["mode"] == "full" and "LITE refused" in report["modeReason"]
    assert spark_vacuum(spark, root, "full", dry=True) == set(report["files"])
    tally["LITE refusals shared with Delta Spark, FULL under auto"] += 1


def test_our_log_cleanup_keeps_lite_possible_for_delta_spark(tmp_path, capsys):
    """Cleanup with a log retention that would cut at checkpoint 10 keeps the commits from the
    recorded N = 7 (it cuts at checkpoint 5): Spark's LITE and ours still run."""
    from tests.support.spark import spark_session

    spark = spark_session("deltakeeper-vacuum")
    root = cleaned_up("v2_checkpoint_sidecars", tmp_path / "t", 0, 7)
    far = str(int(time.time() * 1000) + 400 * DAY)  # every commit past a 30-day retention
    code = main(["cleanup", str(root), "--now", far, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["checkpointVersion"] == 5, report
    assert any("commits from 7 stay" in r for r in report["reasons"]), report["reasons"]
    assert min(commit_versions(root)) == 5
    spark_vacuum(spark, root, "lite", dry=True)  # no DELTA_CANNOT_VACUUM_LITE
    assert ours(root, "lite", "--dry-run")["commitsRead"] == [8, max(commit_versions(root))]
