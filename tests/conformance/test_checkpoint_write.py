"""Checkpoints deltakeeper writes are read the same by delta-rs, DuckDB and Delta Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deltakeeper.delta import last_checkpoint
from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint
from deltakeeper.delta.errors import DeltaError, UnsupportedProtocolError
from deltakeeper.delta.table import open_table
from tests.conftest import CORPUS
from tests.support.compare import check_against_oracles, ours
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

DAY = 86_400_000
NOW = 1_800_000_000_000


def readable_tables() -> list[str]:
    out = []
    for p in sorted(CORPUS.iterdir()):
        if p.is_dir() and not isinstance(ours(p, None), DeltaError):
            out.append(p.name)
    return out


def checkpoint(path: Path, retention_ms: int = 10_000 * DAY):
    table = open_table(str(path))
    return write_checkpoint(table, load_for_checkpoint(table), NOW, retention_ms)


@pytest.mark.parametrize("name", readable_tables())
def test_corpus_table_reads_the_same_through_our_checkpoint(name, corpus_copy, tally):
    path = corpus_copy(name)
    before = ours(path, None)
    result = checkpoint(path)
    after = ours(path, None)
    assert not isinstance(after, DeltaError), after
    assert after["lastCheckpointVersion"] == result.version == before["version"]
    assert after["commitsSinceCheckpoint"] == 0
    for key in (
        "version",
        "protocol",
        "tableId",
        "configuration",
        "files",
        "numTxns",
        "numDomains",
    ):
        assert after[key] == before[key], key
    agreed = check_against_oracles(after, path, None, tally)
    assert agreed == ["delta-rs", "duckdb"] or (
        not before["files"] and agreed == ["delta-rs", "duckdb"]
    )
    tally["our checkpoints read by both oracles"] += 1


def test_expired_tombstones_leave_the_checkpoint(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), add("b"), add("c"))
    b.commit(remove("a", ts=NOW - 10 * DAY), remove("b", ts=NOW - 2 * DAY))
    result = checkpoint(tmp_path, retention_ms=7 * DAY)
    assert (result.adds, result.tombstones, result.expired_tombstones) == (1, 1, 1)
    rows = pq.read_table(tmp_path / "_delta_log" / "00000000000000000001.checkpoint.parquet")
    removes = [r["path"] for r in rows["remove"].to_pylist() if r]
    assert removes == ["b"]
    assert "stats" not in rows.schema.field("remove").type.names  # tombstones carry no stats


def test_last_checkpoint_has_a_valid_checksum_and_never_moves_back(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    b.commit(add("b"))
    table = open_table(str(tmp_path))
    write_checkpoint(table, load_for_checkpoint(table, 1), NOW, DAY)
    hint = (tmp_path / "_delta_log" / "_last_checkpoint").read_bytes()
    parsed = last_checkpoint.parse(hint)  # raises on a bad checksum
    assert parsed.version == 1 and parsed.raw["numOfAddFiles"] == 2 and parsed.size == 4
    older = write_checkpoint(table, load_for_checkpoint(table, 0), NOW, DAY)
    assert not older.last_checkpoint_moved
    assert json.loads((tmp_path / "_delta_log" / "_last_checkpoint").read_bytes())["version"] == 1


def test_unknown_writer_feature_writes_nothing(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(1, 7, writerFeatures=["somethingNew"]), metadata(), add("a"))
    table = open_table(str(tmp_path))
    with pytest.raises(UnsupportedProtocolError, match="somethingNew"):
        write_checkpoint(table, load_for_checkpoint(table), NOW, DAY)
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == [
        "00000000000000000000.json"
    ]


@pytest.mark.spark
def test_spark_tables_read_the_same_through_our_checkpoint(tmp_path, tally):
    from urllib.parse import unquote

    from tests.conformance.test_spark_tables import spark_files
    from tests.support.spark import TABLES, copy_table, ensure_tables, spark_session

    tables = ensure_tables()
    spark = spark_session("deltakeeper-checkpoint")
    for name in TABLES:
        path = copy_table(tables[name], tmp_path / name)
        before = ours(path, None)
        result = checkpoint(path)
        after = ours(path, None)
        assert (
            after["files"] == before["files"] and after["lastCheckpointVersion"] == result.version
        )
        assert check_against_oracles(after, path, None, tally) == ["delta-rs", "duckdb"], name
        # a fresh Spark session reads the table from our checkpoint (the newest one)
        assert {unquote(p) for p in after["files"]} == spark_files(spark, str(path), result.version)
        tally["our checkpoints read by Delta Spark"] += 1
