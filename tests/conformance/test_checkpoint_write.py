"""Checkpoints deltakeeper writes are read the same by delta-rs, DuckDB and Delta Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint
from deltakeeper.delta.errors import DeltaError, UnsupportedProtocolError
from deltakeeper.delta.log import last_checkpoint
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


def checkpoint(path: Path, retention_ms: int = 10_000 * DAY, **kw):
    table = open_table(str(path))
    return write_checkpoint(table, load_for_checkpoint(table), NOW, retention_ms, **kw)


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


# -- multi-part and V2 layouts -------------------------------------------------------------------


def _dv_id(dv: dict | None) -> str | None:
    if not dv:
        return None
    base = f"{dv['storageType']}{dv['pathOrInlineDv']}"
    return base if dv.get("offset") is None else f"{base}@{dv['offset']}"


def file_actions(files: list[Path]) -> set[tuple[str, str, str | None]]:
    """(kind, path, dv id) of every add and remove row in checkpoint files or sidecars."""
    out = set()
    for f in files:
        for row in pq.read_table(
            f, columns=[c for c in ("add", "remove") if c in pq.read_schema(f).names]
        ).to_pylist():
            for kind in ("add", "remove"):
                action = row.get(kind)
                if action:
                    out.add((kind, action["path"], _dv_id(action.get("deletionVector"))))
    return out


def written_parts(path: Path, result) -> list[Path]:
    """Our parts (multi-part) or sidecars (V2), in part order."""
    keys = [k for k in result.keys if "/_sidecars/" in k] if result.layout == "v2" else result.keys
    return [path / k for k in keys]


@pytest.mark.parametrize("name", readable_tables())
def test_corpus_table_reads_the_same_through_parts_or_sidecars(name, corpus_copy, tally):
    path = corpus_copy(name)
    before = ours(path, None)
    existing = open_table(str(path)).snapshot().segment.checkpoint
    result = checkpoint(path, part_size=2)
    expected_parts = -(-(result.adds + result.tombstones) // 2)
    if existing is not None and existing.version == before["version"]:
        # a checkpoint already at this version: the rewrite keeps its layout (one per version)
        assert len(result.keys) == len(existing.files), result
    elif result.layout == "v2":
        assert result.sidecars == expected_parts
    elif expected_parts > 1:
        assert (result.layout, result.parts) == ("multipart", expected_parts)
    after = ours(path, None)
    assert not isinstance(after, DeltaError), after
    assert after["lastCheckpointVersion"] == result.version == before["version"]
    for key in ("protocol", "configuration", "files", "numTxns", "numDomains"):
        assert after[key] == before[key], key
    assert check_against_oracles(after, path, None, tally) == ["delta-rs", "duckdb"]
    # a second write of the same version, now read from the first, gives the same parts
    parts = {k: (path / k).read_bytes() for k in result.keys}
    again = checkpoint(path, part_size=2)
    if result.layout == "multipart":
        assert {k: (path / k).read_bytes() for k in again.keys} == parts
    else:
        assert [p.read_bytes() for p in written_parts(path, again)] == [
            p.read_bytes() for p in written_parts(path, result)
        ]
    tally[f"our {result.layout} checkpoints read by both oracles"] += 1


def test_stats_as_struct_in_parts_read_by_oracles(tmp_path, tally):
    schema_string = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "id", "type": "long", "nullable": True, "metadata": {}},
                {"name": "day", "type": "date", "nullable": True, "metadata": {}},
            ],
        }
    )
    b = LogBuilder(tmp_path)
    meta = metadata(("day",), **{"delta.checkpoint.writeStatsAsStruct": "true"})
    meta["metaData"]["schemaString"] = schema_string
    files = []
    for i in range(30):
        a = add(f"day=2024-01-{i % 9 + 1:02d}/f{i}.parquet", day=f"2024-01-{i % 9 + 1:02d}")
        stats = {"numRecords": i, "minValues": {"id": i}, "maxValues": {"id": i + 5}}
        a["add"]["stats"] = json.dumps(stats) if i % 10 else "{broken"
        files.append(a)
    b.commit(protocol(), meta, *files)
    before = ours(tmp_path, None)
    result = checkpoint(tmp_path, part_size=7)
    assert result.layout == "multipart" and result.parts == 5
    after = ours(tmp_path, None)
    assert after["files"] == before["files"]
    assert check_against_oracles(after, tmp_path, None, tally) == ["delta-rs", "duckdb"]
    rows = [r["add"] for k in result.keys for r in pq.read_table(tmp_path / k).to_pylist()]
    parsed = {r["path"]: r for r in rows if r}
    assert parsed["day=2024-01-02/f1.parquet"]["stats_parsed"]["maxValues"]["id"] == 6
    assert parsed["day=2024-01-01/f0.parquet"]["stats"] == "{broken"
    assert parsed["day=2024-01-01/f0.parquet"]["stats_parsed"] is None


@pytest.mark.spark
def test_spark_tables_through_our_parts_match_sparks_own(tmp_path, tally):
    """Our multi-part checkpoints (V2 sidecars on v2Checkpoint tables) are read by all three
    engines, and hold exactly the rows Spark puts in each part for the same part size."""
    import time
    from urllib.parse import unquote

    from tests.conformance.test_spark_tables import spark_files
    from tests.support.spark import TABLES, copy_table, ensure_tables, spark_session

    tables = ensure_tables()
    spark = spark_session("deltakeeper-checkpoint-parts")
    now = int(time.time() * 1000)
    for name in TABLES:
        path = copy_table(tables[name], tmp_path / name)
        before = ours(path, None)
        table = open_table(str(path))
        result = write_checkpoint(table, load_for_checkpoint(table), now, 7 * DAY, part_size=3)
        after = ours(path, None)
        assert (
            after["files"] == before["files"] and after["lastCheckpointVersion"] == result.version
        )
        assert check_against_oracles(after, path, None, tally) == ["delta-rs", "duckdb"], name
        assert {unquote(p) for p in after["files"]} == spark_files(spark, str(path), result.version)
        # Spark checkpoints a pristine copy with the same part size
        theirs = copy_table(tables[name], tmp_path / f"{name}-spark")
        spark.conf.set("spark.databricks.delta.checkpoint.partSize", "3")
        try:
            jvm = spark._jvm
            jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
                spark._jsparkSession, str(theirs)
            ).checkpoint()
        finally:
            spark.conf.unset("spark.databricks.delta.checkpoint.partSize")
        spark_parts = sparks_parts(theirs, result.version, result.layout)
        ours_parts = written_parts(path, result)
        assert len(spark_parts) == len(ours_parts), name
        for mine, spark_part in zip(ours_parts, spark_parts, strict=True):
            assert file_actions([mine]) == file_actions([spark_part]), (name, mine.name)
        tally[f"our {result.layout} parts equal Delta Spark's"] += 1


def sparks_parts(path: Path, version: int, layout: str) -> list[Path]:
    log = path / "_delta_log"
    prefix = f"{version:020d}.checkpoint."
    if layout == "v2":
        found = sorted((log / "_sidecars").glob(f"{prefix}*.parquet"))
    else:
        found = sorted(log.glob(f"{prefix}*.parquet"))
    assert found, f"Delta Spark wrote no checkpoint at {version} in {log}"
    return found


def test_struct_only_stats_survive_a_rewrite(corpus_copy):
    """A table with writeStatsAsJson=false keeps stats only as stats_parsed; rewriting its
    checkpoint (twice, the second time from our own) must not drop them."""
    path = corpus_copy("delta-1.2.1-only-struct-stats")
    for _ in range(2):
        result = checkpoint(path, part_size=3)
        adds = [r["add"] for k in result.keys for r in pq.read_table(path / k).to_pylist()]
        adds = [a for a in adds if a]
        assert adds and all(a["stats_parsed"] is not None for a in adds)
        assert all(a["stats_parsed"]["numRecords"] >= 1 for a in adds)


# -- the incremental source (newest checkpoint streamed + the commits after it) ------------------

FULL_RETENTION = 10_000 * DAY  # nothing in the corpus expires
SHORT_RETENTION = 7 * DAY  # everything older than 7 days before NOW (2027) expires


def _expected_rows(path: Path, versions: list[int], retention_ms: int) -> dict[int, tuple]:
    from deltakeeper.delta.checkpoint import snapshot_content
    from tests.support.checkpoints import content_rows

    table = open_table(str(path))
    out = {}
    for v in versions:
        content, expired = snapshot_content(load_for_checkpoint(table, v), NOW, retention_ms, None)
        out[v] = (*content_rows(content), expired)
    return out


def _incremental_rows(path: Path, version: int, retention_ms: int) -> tuple:
    from deltakeeper.delta.checkpoint import incremental_content
    from tests.support.checkpoints import content_rows

    found = incremental_content(open_table(str(path)), version, NOW, retention_ms, None)
    assert found is not None, f"version {version}: the incremental source did not apply"
    content, expired = found
    return (*content_rows(content), expired)


def check_incremental(path: Path, tally, oracles: bool = True) -> None:
    """At every version from the oldest checkpoint on (ours at the middle version when the table
    has none below its latest), the incremental source gives the snapshot path's rows; then the
    checkpoint it writes reads the same in deltakeeper, delta-rs and DuckDB."""
    from deltakeeper.delta.checkpoint import checkpoint_table
    from deltakeeper.delta.log.segment import earliest_version, segment_for

    table = open_table(str(path))
    listing = table.list_log()
    latest = segment_for(listing, table.uri).version
    below = [v for v in listing.checkpoints if v < latest]
    mid = min(below) if below else max(latest // 2, earliest_version(listing) or 0)
    # some corpus tables have early versions no reader accepts (e.g. metaData without a schema)
    versions = [v for v in range(mid, latest + 1) if not isinstance(ours(path, v), DeltaError)]
    versions = versions[-30:]
    mid = mid if below else versions[0]
    expected = _expected_rows(path, versions, FULL_RETENTION)
    expected_short = _expected_rows(path, [latest], SHORT_RETENTION)[latest]
    if not below:
        write_checkpoint(table, load_for_checkpoint(table, mid), NOW, FULL_RETENTION)
    for v in versions:
        assert _incremental_rows(path, v, FULL_RETENTION) == expected[v], f"version {v}"
    assert _incremental_rows(path, latest, SHORT_RETENTION) == expected_short
    before = ours(path, None)
    result = checkpoint_table(table, None, NOW, FULL_RETENTION)
    assert (result.version, result.adds) == (latest, len(before["files"]))
    after = ours(path, None)
    assert not isinstance(after, DeltaError), after
    assert after["lastCheckpointVersion"] == latest
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
    if oracles:
        assert check_against_oracles(after, path, None, tally) == ["delta-rs", "duckdb"]
    tally["incremental checkpoints equal to full ones"] += 1


@pytest.mark.parametrize("name", readable_tables())
def test_corpus_table_incremental_checkpoint_equals_the_full_one(name, corpus_copy, tally):
    check_incremental(corpus_copy(name), tally)


@pytest.mark.parametrize("old_layout", ["classic", "multipart", "v2", "v2-classic"])
@pytest.mark.parametrize("with_dvs", [False, True])
def test_incremental_over_each_old_layout(tmp_path, tally, old_layout, with_dvs):
    """Re-adds, DV updates, expired and live tombstones after an old checkpoint of each layout.
    The oracles check the DV-free log only: DuckDB opens deletion vector files, and these
    synthetic DVs name files that do not exist (the Spark dv table covers real ones)."""
    from tests.support.logbuilder import dv

    v2 = old_layout.startswith("v2")
    features = ["deletionVectors", *(["v2Checkpoint"] if v2 else [])]
    b = LogBuilder(tmp_path)
    files = [add(f"day=d{i % 3}/f{i}.parquet", day=f"d{i % 3}") for i in range(12)]
    old_dv, new_dv = (dv("a"), dv("b")) if with_dvs else (None, None)
    files[1] = add("day=d1/f1.parquet", dv=old_dv, day="d1")
    b.commit(
        protocol(3, 7, readerFeatures=features, writerFeatures=features),
        metadata(("day",)),
        *files,
    )
    b.commit(remove("day=d0/f0.parquet", ts=NOW - 30 * DAY), remove("day=d2/f2.parquet", ts=NOW))
    table = open_table(str(tmp_path))
    part_size = 4 if old_layout in ("multipart", "v2") else None
    classic = old_layout == "v2-classic"
    write_checkpoint(
        table, load_for_checkpoint(table), NOW, FULL_RETENTION, part_size=part_size, classic=classic
    )
    # with DVs: the file's DV replaced; without: the same path added again (new size wins)
    swap = [remove("day=d1/f1.parquet", ts=NOW - DAY, dv=old_dv)] if with_dvs else []
    b.commit(*swap, add("day=d1/f1.parquet", size=5, dv=new_dv, day="d1"))
    b.commit(add("day=d2/f2.parquet", day="d2"), remove("day=d0/f3.parquet", ts=NOW - 20 * DAY))
    b.commit(remove("day=d1/f4.parquet", ts=NOW - DAY))
    full = _expected_rows(tmp_path, [4], SHORT_RETENTION)[4]
    assert _incremental_rows(tmp_path, 4, SHORT_RETENTION) == full
    # live tombstones: f4, and f1 under its old DV (with DVs; without, f1 is simply re-added)
    assert full[3:] == ((9, 2 if with_dvs else 1), 2)
    check_incremental(tmp_path, tally, oracles=not with_dvs)


@pytest.mark.spark
def test_spark_tables_incremental_checkpoint_equals_the_full_one(tmp_path, tally):
    """Spark-written checkpoints (classic, multi-part, V2 with sidecars) streamed as the base;
    Delta Spark then reads the table from our checkpoint too."""
    from urllib.parse import unquote

    from tests.conformance.test_spark_tables import spark_files
    from tests.support.spark import TABLES, copy_table, ensure_tables, spark_session

    tables = ensure_tables()
    spark = spark_session("deltakeeper-checkpoint-incremental")
    for name in TABLES:
        path = copy_table(tables[name], tmp_path / name)
        check_incremental(path, tally)
        after = ours(path, None)
        assert {unquote(p) for p in after["files"]} == spark_files(
            spark, str(path), after["version"]
        ), name
        tally["incremental checkpoints read by Delta Spark"] += 1
