"""Vacuum on real tables: stray files go, referenced ones stay, and every oracle reads the same
rows at the latest version as before."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from deltakeeper.cli import main
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.vacuum.plan import dv_relative_path
from tests.conformance.test_checkpoint_write import readable_tables
from tests.support.compare import check_against_oracles, ours
from tests.support.oracles import Unreadable, decoded, deltars_state
from tests.support.rows import deltars_digest, duckdb_digest, spark_digest

DAY = 86_400_000
BASE = 1_600_000_000_000  # 2020-09-13: every data file is made this old
FAR = 4_102_444_800_000  # 2100-01-01: every tombstone in the corpus has expired by then
STRAYS_OLD = ["stray-old.parquet", "sub dir/stray old%.parquet", "_change_data/stray-cdc.parquet"]
STRAYS_KEPT_HIDDEN = ["_tmp_not_a_partition/stray.parquet", ".stray-old.crc"]


def set_mtime(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def age_data_files(root: Path) -> None:
    """Make every file outside `_delta_log` old: only references keep them now."""
    for p in root.rglob("*"):
        if p.is_file() and "_delta_log" not in p.relative_to(root).parts:
            set_mtime(p, BASE)


def add_strays(root: Path, new_ms: int) -> None:
    for key in STRAYS_OLD + STRAYS_KEPT_HIDDEN:
        p = root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"stray")
        set_mtime(p, BASE)
    new = root / "stray-new.parquet"
    new.write_bytes(b"new")
    set_mtime(new, new_ms)


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def run(capsys, path: Path, now_ms: int, *flags: str) -> dict:
    """A FULL vacuum (these tests plant strays, which only a listing finds)."""
    code = main(["vacuum", str(path), "--now", str(now_ms), "--json", "--mode", "full", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def row_digests(path: Path) -> dict[str, tuple[int, str] | Unreadable]:
    return {
        "delta-rs": deltars_digest(str(path)),
        "duckdb": duckdb_digest(str(path)),
    }


def same_rows(before: dict, after: dict, tally) -> list[str]:
    """Each oracle reads what it read before; returns the oracles that could read rows."""
    read = []
    for oracle, was in before.items():
        now = after[oracle]
        if isinstance(was, Unreadable):
            assert isinstance(now, Unreadable), f"{oracle} reads rows only after vacuum"
            tally[f"{oracle} rows unreadable before vacuum"] += 1
            continue
        assert now == was, f"{oracle} reads different rows after vacuum"
        read.append(oracle)
    return read


def vacuum_and_check(capsys, path: Path, now_ms: int, *flags: str) -> tuple[dict, set[str]]:
    """Dry run, then the real run: the dry run deleted nothing and listed exactly what went.
    `_delta_log` is untouched. Returns the real report and the keys deleted."""
    listed = files_under(path)
    dry = run(capsys, path, now_ms, "--dry-run", *flags)
    assert files_under(path) == listed, "the dry run deleted something"
    assert [f["path"] for f in dry["filesWithSizes"]] == dry["files"]
    report = run(capsys, path, now_ms, *flags)
    gone = listed - files_under(path)
    assert gone == set(dry["files"]) and report["deletedFiles"] == len(gone)
    assert report["deletedBytes"] == sum(f["size"] for f in dry["filesWithSizes"])
    assert not any(k.startswith("_delta_log/") for k in gone)
    return report, gone


@pytest.mark.parametrize("name", readable_tables())
def test_vacuum_keeps_the_latest_state(name, corpus_copy, capsys, tally):
    path = corpus_copy(name)
    age_data_files(path)
    before = ours(path, None)
    rows = row_digests(path)
    live = decoded(before["files"])
    present = {k for k in live if (path / k).is_file()}  # some corpus tables lack data files
    add_strays(path, FAR)
    report, gone = vacuum_and_check(capsys, path, FAR)
    assert report["version"] == before["version"]
    left = files_under(path)
    assert present <= left, "a live file was deleted"
    assert not any((path / s).exists() for s in STRAYS_OLD)
    assert all((path / s).exists() for s in [*STRAYS_KEPT_HIDDEN, "stray-new.parquet"])
    after = ours(path, None)
    assert not isinstance(after, DeltaError), after
    assert after["files"] == before["files"]
    agreed = check_against_oracles(after, path, None, tally)
    rs = deltars_state(str(path))
    if not isinstance(rs, Unreadable):  # delta-rs's live files are all still there
        assert present == {k for k in decoded(rs["files"]) if (path / k).is_file()}
    read = same_rows(rows, row_digests(path), tally)
    tally["corpus tables vacuumed"] += 1
    tally["corpus tables vacuumed, rows re-read by delta-rs and DuckDB"] += read == [
        "delta-rs",
        "duckdb",
    ]
    tally["files deleted by vacuum in the corpus"] += len(gone)
    assert agreed == ["delta-rs", "duckdb"] or isinstance(rows["delta-rs"], Unreadable)


# -- Spark tables -----------------------------------------------------------------------------
SPARK_TABLES = ("dv", "partitioned_many_commits", "column_mapping", "v2_checkpoint_sidecars")


def spark_rows(spark, path: Path) -> tuple[int, str]:
    return spark_digest(spark, str(path))


def commit_actions(path: Path) -> list[dict]:
    out = []
    for f in sorted((path / "_delta_log").glob("*.json")):
        if f.name[:20].isdigit():
            out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return out


def dv_file(dv: dict | None) -> set[str]:
    if not dv or dv["storageType"] != "u":
        return set()
    return {dv_relative_path(dv["pathOrInlineDv"])}


def expected_deletions(path: Path, cutoff: int) -> set[str]:
    """Independently of deltakeeper: visible files that no live add (as delta-rs sees it), no
    live add's DV and no tombstone deleted at or after the cut-off names. Spark tables have
    every commit since version 0, so their JSON holds every tombstone and every DV."""
    state = deltars_state(str(path))
    assert not isinstance(state, Unreadable), state
    live = set(decoded(state["files"]))
    actions = commit_actions(path)
    current: dict[str, dict | None] = {}  # the DV of each path's newest add
    keep = set(live)
    for a in actions:
        if "add" in a:
            current[unquote(a["add"]["path"])] = a["add"].get("deletionVector")
        if "remove" in a and a["remove"].get("deletionTimestamp", 0) >= cutoff:
            keep |= {unquote(a["remove"]["path"])} | dv_file(a["remove"].get("deletionVector"))
    for key in live:
        keep |= dv_file(current[key])
    return {k for k in files_under(path) if k not in keep and visible(k)} - {"stray-new.parquet"}


def visible(key: str) -> bool:
    """Delta Spark's rule for these tables (none is partitioned by a column starting with _)."""
    return not any(
        part.startswith(("_", ".")) and not part.startswith("_change_data")
        for part in key.split("/")
    )


@pytest.mark.spark
def test_spark_tables_after_vacuum_read_the_same_in_three_oracles(tmp_path, capsys, tally):
    from tests.support.spark import copy_table, ensure_tables, spark_session

    tables = ensure_tables()
    spark = spark_session("deltakeeper-vacuum")
    for name in SPARK_TABLES:
        path = copy_table(tables[name], tmp_path / name)
        age_data_files(path)
        stamps = sorted(
            a["remove"]["deletionTimestamp"] for a in commit_actions(path) if "remove" in a
        )
        assert len(stamps) >= 2, name
        cutoff = stamps[len(stamps) // 2]  # half the tombstones expire, half protect files
        now = cutoff + 7 * DAY
        add_strays(path, now)
        before = ours(path, None)
        rows, spark_before = row_digests(path), spark_rows(spark, path)
        expected = expected_deletions(path, cutoff)
        report, gone = vacuum_and_check(capsys, path, now)
        assert report["cutoffTimestamp"] == cutoff
        assert gone == expected, name
        assert any(not k.startswith(("stray", "sub dir")) for k in gone), "no data file expired"
        after = ours(path, None)
        assert after["files"] == before["files"]
        assert check_against_oracles(after, path, None, tally) == ["delta-rs", "duckdb"], name
        assert same_rows(rows, row_digests(path), tally) == ["delta-rs", "duckdb"], name
        assert spark_rows(spark, path) == spark_before, f"{name}: Delta Spark reads other rows"
        tally["Spark tables vacuumed, rows re-read by three oracles"] += 1


@pytest.mark.spark
@pytest.mark.timeout(1800)  # four Spark VACUUMs; slow on a loaded 2-core machine
def test_we_delete_what_delta_spark_vacuum_would(tmp_path, capsys, tally):
    """Delta Spark's own VACUUM ... RETAIN 0 HOURS DRY RUN (its clock, now) lists the same
    files as our dry run with the same retention."""
    from tests.support.spark import _conf, copy_table, ensure_tables, spark_session

    tables = ensure_tables()
    spark = spark_session("deltakeeper-vacuum")
    for name in SPARK_TABLES:
        path = copy_table(tables[name], tmp_path / name)
        age_data_files(path)
        now = int(time.time() * 1000)
        add_strays(path, now + DAY)  # too new for both
        ours_dry = run(
            capsys,
            path,
            now,
            "--dry-run",
            "--deleted-file-retention",
            "0s",
            "--allow-short-retention",
        )
        with _conf(spark, spark__databricks__delta__retentionDurationCheck__enabled="false"):
            found = spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS DRY RUN").collect()
        root = path.resolve()
        theirs = {Path(unquote(urlparse(r[0]).path)).relative_to(root).as_posix() for r in found}
        assert set(ours_dry["files"]) == theirs, name
        tally["dry runs equal to Delta Spark's VACUUM DRY RUN"] += 1


def test_a_table_nested_in_another_is_skipped_and_still_reads_the_same(corpus_copy, capsys):
    outer = corpus_copy("simple_table")
    inner = outer / "nested"
    shutil.copytree(corpus_copy("delta-0.8.0-partitioned"), inner)
    age_data_files(outer)  # every data file, the nested table's too, is past the retention
    inner_files = files_under(inner)
    rows = row_digests(inner)
    assert not any(isinstance(r, Unreadable) for r in rows.values()), rows
    report, gone = vacuum_and_check(capsys, outer, FAR)
    assert not any(k.startswith("nested/") for k in gone)
    assert files_under(inner) == inner_files
    assert report["skippedNestedTables"] == ["nested"]
    assert row_digests(inner) == rows  # delta-rs and DuckDB read the nested table as before
    assert not isinstance(ours(outer, None), DeltaError)
