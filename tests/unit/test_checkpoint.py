"""Checkpoint layouts: Spark's hash, multi-part clustering, V2 with sidecars, stats as structs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltakeeper.delta import last_checkpoint, paths
from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint
from deltakeeper.delta.errors import CorruptLogError, InvalidInputError
from deltakeeper.delta.spark_hash import SEED, hash_string, hash_strings, pmod
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, dv, metadata, protocol, remove

DAY = 86_400_000
NOW = 1_800_000_000_000
V2 = protocol(3, 7, readerFeatures=["v2Checkpoint"], writerFeatures=["v2Checkpoint"])

# Values Delta Spark 4.4 / Spark 4.2 returned for `SELECT hash(s)` on this machine.
SPARK_HASHES = {
    "": 142593372,
    "a": 1485273170,
    "ab": -97053317,
    "abc": 1322437556,
    "abcd": -396302900,
    "abcde": 814637928,
    "é": 2119106806,
    "x" * 1001: -1536256584,
    "date=2020-01-01/part-0001%20x.parquet": 1793442308,
}


def _reference(s: str) -> int:
    """Spark's Murmur3_x86_32.hashUnsafeBytes written out plainly, one string at a time."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    def mix(h: int, k: int) -> int:
        k = rotl((k * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
        return (rotl(h ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF

    b = s.encode()
    h, whole = SEED, len(b) - len(b) % 4
    for i in range(0, whole, 4):
        h = mix(h, int.from_bytes(b[i : i + 4], "little"))
    for byte in b[whole:]:
        h = mix(h, (byte - 256 if byte >= 128 else byte) & 0xFFFFFFFF)
    h ^= len(b)
    for shift, mult in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * mult) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def test_hash_matches_spark():
    got = hash_strings(pa.array([*SPARK_HASHES, None])).to_pylist()
    assert got == [*SPARK_HASHES.values(), SEED]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=60))
def test_vectorised_hash_equals_the_plain_one(values):
    assert hash_strings(pa.array(values, pa.string())).to_pylist() == [
        _reference(v) for v in values
    ]


def test_pmod_is_never_negative():
    assert pmod(pa.array([-7, 7, 0, -1, 42, -(2**31)], pa.int32()), 5).to_pylist() == [
        3,
        2,
        0,
        4,
        2,
        2,
    ]


def _table(tmp_path: Path, proto=None, n: int = 12, **conf: str) -> Path:
    b = LogBuilder(tmp_path)
    files = [add(f"day=d{i % 3}/f-{i}.parquet", day=f"d{i % 3}") for i in range(n)]
    b.commit(proto or protocol(), metadata(("day",), **conf), *files)
    b.commit(remove("day=d0/f-0.parquet", ts=NOW - DAY), add("day=d1/g.parquet", day="d1"))
    return tmp_path


def _write(path: Path, **kw):
    table = open_table(str(path))
    return write_checkpoint(table, load_for_checkpoint(table), NOW, 30 * DAY, **kw)


def _log(path: Path) -> Path:
    return path / paths.LOG_DIR


def test_multi_part_when_actions_pass_the_part_size(tmp_path):
    result = _write(_table(tmp_path), part_size=4)
    assert (result.layout, result.parts, result.adds, result.tombstones) == ("multipart", 4, 12, 1)
    names = sorted(p.name for p in _log(tmp_path).glob("*.checkpoint.*.parquet"))
    assert names == [paths.multipart_checkpoint(1, p, 4) for p in range(1, 5)]
    hint = last_checkpoint.parse((_log(tmp_path) / "_last_checkpoint").read_bytes())
    assert hint.parts == 4 and hint.size == result.rows == 15


def test_rows_are_clustered_like_spark(tmp_path):
    _write(_table(tmp_path), part_size=4)
    for part in range(1, 5):
        rows = pq.read_table(_log(tmp_path) / paths.multipart_checkpoint(1, part, 4)).to_pylist()
        for row in rows:
            action = row["add"] or row["remove"]
            if action is None:  # protocol and metaData: a null key hashes to the seed
                assert part - 1 == SEED % 4
            else:
                assert part - 1 == (hash_string(action["path"]) % 4), action["path"]


def test_one_file_without_part_size_or_when_it_fits(tmp_path):
    assert _write(_table(tmp_path)).layout == "classic"
    assert _write(_table(tmp_path / "big"), part_size=100).layout == "classic"
    assert (_log(tmp_path / "big") / paths.checkpoint(1)).is_file()


def test_part_size_must_be_positive(tmp_path):
    with pytest.raises(InvalidInputError):
        _write(_table(tmp_path), part_size=0)


def test_rewriting_a_version_gives_identical_parts(tmp_path):
    path = _table(tmp_path, n=40)
    first = _write(path, part_size=7)
    before = {k: (path / k).read_bytes() for k in first.keys}
    second = _write(path, part_size=7)  # this time the snapshot is read from the first one
    assert second.keys == first.keys
    assert {k: (path / k).read_bytes() for k in second.keys} == before


def test_dv_rows_of_one_path_stay_together(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(),
        *[add(f"f{i}") for i in range(9)],
    )
    b.commit(remove("f3"), add("f3", dv=dv("a")), remove("f5"), add("f5", dv=dv("b")))
    b.commit(remove("f5", dv=dv("b")), add("f5", dv=dv("c")))
    result = _write(tmp_path, part_size=3)
    where: dict[str, set[int]] = {}
    for i, key in enumerate(result.keys):
        for row in pq.read_table(tmp_path / key).to_pylist():
            action = row["add"] or row["remove"]
            if action:
                where.setdefault(action["path"], set()).add(i)
    assert all(len(parts) == 1 for parts in where.values()), where


def test_v2_table_gets_sidecars_never_multi_part(tmp_path):
    result = _write(_table(tmp_path, V2), part_size=4)
    assert (result.layout, result.parts, result.sidecars) == ("v2", None, 4)
    log = _log(tmp_path)
    # By the protocol's names: a glob like *.checkpoint.0*.parquet also matches a UUID
    # starting with 0 (one run in sixteen).
    kinds = {parsed.kind for p in log.iterdir() if (parsed := paths.parse(p.name)) is not None}
    assert paths.Kind.MULTIPART_CHECKPOINT not in kinds
    top = paths.parse(result.key.removeprefix("_delta_log/"))
    assert top is not None and top.kind is paths.Kind.UUID_CHECKPOINT
    rows = pq.read_table(tmp_path / result.key).to_pylist()
    meta = [r["checkpointMetadata"] for r in rows if r["checkpointMetadata"]]
    assert len(meta) == 1 and meta[0]["version"] == 1
    assert dict(meta[0]["tags"])["numOfAddFiles"] == "12"
    sidecars = [r["sidecar"] for r in rows if r["sidecar"]]
    assert sorted(s["path"] for s in sidecars) == sorted(
        p.name for p in (log / "_sidecars").iterdir()
    )
    assert all(r["add"] is None and r["remove"] is None for r in rows)
    in_sidecars = [
        r for s in sidecars for r in pq.read_table(log / "_sidecars" / s["path"]).to_pylist()
    ]
    assert len(in_sidecars) == 13 and set(
        pq.read_schema(log / "_sidecars" / sidecars[0]["path"]).names
    ) == {"add", "remove"}
    hint = json.loads((log / "_last_checkpoint").read_bytes())
    last_checkpoint.parse((log / "_last_checkpoint").read_bytes())  # checksum is valid
    assert hint["v2Checkpoint"]["path"] == result.key.rsplit("/", 1)[-1]
    assert len(hint["v2Checkpoint"]["sidecarFiles"]) == 4 and "parts" not in hint
    snap = open_table(str(tmp_path)).snapshot()
    assert snap.segment.checkpoint is not None and snap.num_files == 12


def test_classic_v2_checkpoint_for_older_readers(tmp_path):
    result = _write(_table(tmp_path, V2), classic=True, part_size=4)
    assert (result.layout, result.key, result.sidecars) == (
        "classic",
        f"_delta_log/{paths.checkpoint(1)}",
        0,
    )
    rows = pq.read_table(tmp_path / result.key).to_pylist()
    assert [r["checkpointMetadata"]["version"] for r in rows if r["checkpointMetadata"]] == [1]
    assert sum(1 for r in rows if r["add"]) == 12
    assert rows[1]["protocol"]["readerFeatures"] == ["v2Checkpoint"]


def test_classic_policy_keeps_v1_checkpoints(tmp_path):
    path = _table(tmp_path, V2, **{"delta.checkpointPolicy": "classic"})
    result = _write(path, part_size=100)
    assert result.layout == "classic"
    assert "checkpointMetadata" not in pq.read_schema(path / result.key).names


def test_dry_run_writes_nothing_for_any_layout(tmp_path):
    for sub, proto, kw in (("mp", None, {"part_size": 3}), ("v2", V2, {})):
        path = _table(tmp_path / sub, proto)
        before = sorted(p.name for p in _log(path).rglob("*"))
        result = _write(path, dry_run=True, **kw)
        assert result.keys and sorted(p.name for p in _log(path).rglob("*")) == before


# -- stats as structs ----------------------------------------------------------------------------

STATS_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "day", "type": "date", "nullable": True, "metadata": {}},
        ],
    }
)


def _stats_table(tmp_path: Path, stats: list[str | None], **conf: str) -> Path:
    b = LogBuilder(tmp_path)
    meta = metadata(("day",), **conf)
    meta["metaData"]["schemaString"] = STATS_SCHEMA
    files = []
    for i, s in enumerate(stats):
        a = add(f"day=2024-01-0{i + 1}/f{i}", day=f"2024-01-0{i + 1}")
        a["add"]["stats"] = s
        files.append(a)
    b.commit(protocol(), meta, *files)
    return tmp_path


GOOD = json.dumps(
    {"numRecords": 3, "minValues": {"id": 1}, "maxValues": {"id": 9}, "nullCount": {"id": 0}}
)


def _adds(path: Path, key: str) -> list[dict]:
    return [r["add"] for r in pq.read_table(path / key).to_pylist() if r["add"]]


def test_stats_as_struct_with_real_types(tmp_path):
    path = _stats_table(
        tmp_path, [GOOD, "{not json", None], **{"delta.checkpoint.writeStatsAsStruct": "true"}
    )
    result = _write(path)
    adds = {a["path"]: a for a in _adds(path, result.key)}
    good = adds["day=2024-01-01/f0"]
    assert good["stats"] == GOOD
    assert good["stats_parsed"]["numRecords"] == 3 and good["stats_parsed"]["maxValues"]["id"] == 9
    assert str(good["partitionValues_parsed"]["day"]) == "2024-01-01"
    bad = adds["day=2024-01-02/f1"]
    assert bad["stats"] == "{not json" and bad["stats_parsed"] is None  # carried as-is
    add_type = pq.read_schema(path / result.key).field("add").type
    assert add_type.field("partitionValues_parsed").type.field("day").type == pa.date32()


def test_without_json_stats_only_unparsable_strings_are_kept(tmp_path):
    path = _stats_table(
        tmp_path,
        [GOOD, "[1, 2]"],
        **{
            "delta.checkpoint.writeStatsAsStruct": "true",
            "delta.checkpoint.writeStatsAsJson": "false",
        },
    )
    adds = {a["path"]: a for a in _adds(path, _write(path).key)}
    assert adds["day=2024-01-01/f0"]["stats"] is None
    assert adds["day=2024-01-01/f0"]["stats_parsed"]["minValues"]["id"] == 1
    assert adds["day=2024-01-02/f1"]["stats"] == "[1, 2]"


def test_struct_columns_by_default_as_delta_spark_writes_them(tmp_path):
    # Delta Spark's writeStatsAsStruct defaults to true (issue 14, finding 8).
    path = _stats_table(tmp_path, [GOOD])
    adds = _adds(path, _write(path).key)
    assert adds[0]["stats"] == GOOD and adds[0]["stats_parsed"]["maxValues"]["id"] == 9
    assert str(adds[0]["partitionValues_parsed"]["day"]) == "2024-01-01"


def test_dictionaries_only_where_values_repeat_across_files(tmp_path):
    # A dictionary attempt on per-file values is a third of a large checkpoint's write time.
    path = _stats_table(tmp_path, [GOOD, GOOD])
    meta = pq.ParquetFile(path / _write(path).key).metadata.row_group(0)
    encodings = {
        meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)
    }
    plain = ["add.path", "add.size", "add.stats", "add.stats_parsed.minValues.id"]
    assert all("RLE_DICTIONARY" not in encodings[c] for c in plain), encodings
    assert "RLE_DICTIONARY" in encodings["add.partitionValues.key_value.value"]
    assert "RLE_DICTIONARY" in encodings["add.stats_parsed.nullCount.id"]


@pytest.mark.parametrize("flag", ["false", " FALSE "])
def test_no_struct_columns_when_the_table_turns_them_off(tmp_path, flag):
    path = _stats_table(tmp_path, [GOOD], **{"delta.checkpoint.writeStatsAsStruct": flag})
    names = pq.read_schema(path / _write(path).key).field("add").type.names
    assert (
        "stats" in names and "stats_parsed" not in names and "partitionValues_parsed" not in names
    )


def test_column_mapping_uses_physical_names(tmp_path):
    b = LogBuilder(tmp_path)
    fields = [
        {
            "name": "id",
            "type": "long",
            "nullable": True,
            "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"},
        },
        {
            "name": "day",
            "type": "string",
            "nullable": True,
            "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-2"},
        },
    ]
    meta = metadata(
        ("day",),
        **{"delta.checkpoint.writeStatsAsStruct": "true", "delta.columnMapping.mode": "name"},
    )
    meta["metaData"]["schemaString"] = json.dumps({"type": "struct", "fields": fields})
    a = add("x/f0")
    a["add"]["partitionValues"] = {"col-2": "d1"}
    a["add"]["stats"] = json.dumps({"numRecords": 1, "minValues": {"col-1": 5}})
    b.commit(protocol(2, 5), meta, a)
    (row,) = _adds(tmp_path, _write(tmp_path).key)
    assert row["partitionValues_parsed"] == {"col-2": "d1"}
    assert row["stats_parsed"]["minValues"] == {"col-1": 5}


# -- bad input -----------------------------------------------------------------------------------


def test_truncated_part_is_reported_then_repaired(tmp_path):
    path = _table(tmp_path, n=20)
    first = _write(path, part_size=5)
    good = open_table(str(path)).snapshot()
    part = path / first.keys[1]
    part.write_bytes(part.read_bytes()[:100])
    read_past = open_table(str(path)).snapshot()  # the damaged checkpoint is read past
    assert part.name in read_past.damaged_checkpoints[0].error
    assert read_past.segment.checkpoint is None and read_past.num_files == good.num_files
    table = open_table(str(path))
    snap = load_for_checkpoint(table)  # rebuilt from the commits
    assert snap.segment.checkpoint is None and snap.num_files == good.num_files
    write_checkpoint(table, snap, NOW, 30 * DAY, part_size=5)
    again = open_table(str(path)).snapshot()
    assert sorted(again.files["path"].to_pylist()) == sorted(good.files["path"].to_pylist())
    assert again.segment.checkpoint is not None


def test_last_checkpoint_naming_a_missing_checkpoint(tmp_path):
    path = _table(tmp_path)
    body = last_checkpoint.serialize({"version": 7, "size": 3})
    (_log(path) / "_last_checkpoint").write_bytes(body)
    table = open_table(str(path))
    assert table.snapshot().num_files == 12  # falls back to listing the log
    result = write_checkpoint(table, load_for_checkpoint(table), NOW, DAY)
    assert result.last_checkpoint_moved  # the hint named a checkpoint that is not there
    assert last_checkpoint.parse((_log(path) / "_last_checkpoint").read_bytes()).version == 1


def test_missing_sidecar_is_an_error_then_repaired(tmp_path):
    path = _table(tmp_path, V2)
    first = _write(path, part_size=4)
    (path / first.keys[0]).unlink()
    with pytest.raises(CorruptLogError, match="is missing"):
        open_table(str(path)).snapshot()
    # A classic-named V2 checkpoint is what readers pick first at a version.
    second = _write(path, part_size=4, classic=True)
    assert second.key == f"_delta_log/{paths.checkpoint(1)}"
    assert open_table(str(path)).snapshot().num_files == 12
    assert (path / first.keys[1]).is_file()  # nothing deleted
