"""Version checksums deltakeeper writes: they agree with the ones Delta Spark writes, Delta Spark
validates them (fatally) and builds its next checksum on them, and delta-rs and DuckDB still
read every table the same."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta import schema
from deltakeeper.delta.crc import build_crc, commit_info, crc_mismatches, read_crc, write_crc
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.table import Table, open_table
from tests.conftest import CORPUS
from tests.support.compare import check_against_oracles, ours

CRC_NAME = re.compile(r"^\.?(\d{20})\.crc(\.crc)?$")  # ours, and Hadoop's checksum of it

# Corpus checksums that disagree with their own log (reported, not forced).
KNOWN_CORPUS_DISAGREEMENTS = {
    # written by an old Delta Spark before metadata and protocol were recorded in checksums
    ("table_with_edge_timestamps", 0): [
        "metadata: missing (required)",
        "protocol: missing (required)",
    ],
}

# Delta Spark: validate the checksum of the snapshot a transaction starts from, and the one it
# derives for its own commit; a mismatch is an error (fatal is already the default).
VERIFY = {
    "spark.databricks.delta.incremental.commit.verify": "true",
    "spark.databricks.delta.checksum.mismatch.fatal": "true",
}
INCREMENTAL = "spark.databricks.delta.incremental.commit.enabled"


def full_snapshot(table: Table, version: int | None = None):
    return table.snapshot(version, add_cols=schema.FULL_ADD, remove_cols=schema.FULL_REMOVE)


def crc_versions(path: Path) -> list[int]:
    log = path / "_delta_log"
    return sorted(
        int(m.group(1))
        for p in log.iterdir()
        if (m := CRC_NAME.match(p.name)) and not p.name.startswith(".")
    )


def drop_crcs(path: Path) -> None:
    """Delete every version checksum (and Hadoop's `.N.crc.crc` beside it)."""
    for p in (path / "_delta_log").iterdir():
        if CRC_NAME.match(p.name):
            p.unlink()


def check_own(path: Path, versions: list[int]) -> dict[int, list[str]]:
    """crc_mismatches for the checksums already at `versions`, with the commits' commitInfo."""
    table = open_table(str(path))
    out = {}
    for v in versions:
        crc = read_crc(table, v)
        assert crc is not None
        snap = full_snapshot(table, v)
        out[v] = crc_mismatches(crc, snap, commit_info(table, v))
        ours_crc = build_crc(snap, commit_info(table, v))
        if "txnId" in crc and "txnId" in ours_crc:
            assert crc["txnId"] == ours_crc["txnId"], v  # the commit's own transaction id
    return out


# -- the corpus ------------------------------------------------------------------------------


def readable_tables() -> list[str]:
    return [
        p.name
        for p in sorted(CORPUS.iterdir())
        if p.is_dir() and not isinstance(ours(p, None), DeltaError)
    ]


def corpus_with_crcs() -> list[str]:
    return [
        name
        for name in readable_tables()
        if any(CRC_NAME.match(p.name) for p in (CORPUS / name / "_delta_log").iterdir())
    ]


@pytest.mark.parametrize("name", corpus_with_crcs())
def test_corpus_checksums_agree_with_what_we_build(name, corpus, tally):
    path = corpus / name
    found = check_own(path, crc_versions(path))
    for version, lines in found.items():
        assert lines == KNOWN_CORPUS_DISAGREEMENTS.get((name, version), []), (version, lines)
        tally["corpus checksums compared field by field"] += 1
        if lines:
            tally["corpus checksums that disagree with their log (known)"] += 1


@pytest.mark.parametrize("name", readable_tables())
def test_corpus_table_with_our_checksum_reads_the_same(name, corpus_copy, tally):
    path = corpus_copy(name)
    before = ours(path, None)
    drop_crcs(path)
    table = open_table(str(path))
    snap = full_snapshot(table)
    result = write_crc(table, snap)
    assert result.written and not result.existed
    crc = read_crc(table, snap.version)
    assert crc is not None and crc_mismatches(crc, snap) == []
    assert (crc["numFiles"], crc["tableSizeBytes"]) == (len(before["files"]), before["sizeBytes"])
    assert write_crc(table, snap).existed  # a second run leaves it alone
    after = ours(path, None)
    assert after["files"] == before["files"] and after["version"] == before["version"]
    assert check_against_oracles(after, path, None, tally) == ["delta-rs", "duckdb"]
    tally["our checksums read past by both oracles"] += 1


# -- Delta Spark -----------------------------------------------------------------------------


def spark_append(spark: Any, path: Path) -> None:
    """Append a copy of one row through Delta Spark: a transaction on top of our checksum."""
    df = spark.read.format("delta").load(str(path))
    df.limit(1).write.format("delta").mode("append").save(str(path))


@pytest.mark.spark
def test_spark_checksums_agree_with_what_we_build(tally):
    from tests.support.spark import TABLES, ensure_tables

    tables = ensure_tables()
    for name in TABLES:
        path = Path(tables[name])
        versions = crc_versions(path)
        assert versions, name
        found = check_own(path, versions)
        assert found == {v: [] for v in versions}, name
        tally["Delta Spark checksums compared field by field"] += len(versions)


@pytest.mark.spark
def test_spark_validates_and_builds_on_our_checksums(tmp_path, tally):
    from tests.support.spark import TABLES, copy_table, ensure_tables, session_conf, spark_session

    tables = ensure_tables()
    spark = spark_session("deltakeeper-crc")
    for name in TABLES:
        path = copy_table(tables[name], tmp_path / name)
        drop_crcs(path)
        table = open_table(str(path))
        snap = full_snapshot(table)
        assert write_crc(table, snap).written
        assert check_against_oracles(ours(path, None), path, None, tally) == ["delta-rs", "duckdb"]
        with session_conf(spark, VERIFY, restore=(INCREMENTAL,)):
            spark_append(spark, path)  # validates ours first; a mismatch raises
            # a failed check of the checksum Spark derived from ours turns this off
            assert spark.conf.get(INCREMENTAL) == "true", name
        # Spark's next checksum, derived from ours, agrees with a full replay of the log
        nxt = read_crc(table, snap.version + 1)
        assert nxt is not None, name
        after = full_snapshot(table, snap.version + 1)
        assert crc_mismatches(nxt, after) == [], name
        assert nxt["numFiles"] == snap.num_files + 1, name  # one row, one file
        assert check_against_oracles(ours(path, None), path, None, tally) == ["delta-rs", "duckdb"]
        tally["our checksums validated by Delta Spark"] += 1


@pytest.mark.spark
@pytest.mark.parametrize(
    "field, wrong, message",
    [
        ("numFiles", lambda crc: crc["numFiles"] + 1, "Number of files"),
        ("tableSizeBytes", lambda crc: crc["tableSizeBytes"] - 1, "Table size"),
        ("numDeletedRecordsOpt", lambda crc: crc["numDeletedRecordsOpt"] + 1, "deleted records"),
    ],
)
def test_spark_rejects_a_wrong_checksum(field, wrong, message, tmp_path):
    from tests.support.spark import copy_table, ensure_tables, session_conf, spark_session

    path = copy_table(ensure_tables()["dv"], tmp_path / "dv")
    drop_crcs(path)
    table = open_table(str(path))
    snap = full_snapshot(table)
    crc = build_crc(snap)
    crc[field] = wrong(crc)
    (path / "_delta_log" / f"{snap.version:020d}.crc").write_text(json.dumps(crc) + "\n")
    assert crc_mismatches(crc, snap) != []
    spark = spark_session("deltakeeper-crc")
    with (
        session_conf(spark, VERIFY, restore=(INCREMENTAL,)),
        pytest.raises(Exception, match=message),
    ):
        spark_append(spark, path)
    assert table.latest_version() == snap.version  # nothing was committed
