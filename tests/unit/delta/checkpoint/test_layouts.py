"""delta/checkpoint/layouts.py: classic, multi-part (clustered like Spark) and V2 with sidecars."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deltakeeper.delta import paths
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.log import last_checkpoint
from deltakeeper.delta.spark_hash import SEED, hash_string
from deltakeeper.delta.table import open_table
from tests.support.checkpoints import GOOD_STATS, V2, checkpoint, partitioned_table, stats_table
from tests.support.logbuilder import LogBuilder, add, dv, metadata, protocol, remove


def _log(path: Path) -> Path:
    return path / paths.LOG_DIR


def test_multi_part_when_actions_pass_the_part_size(tmp_path):
    result = checkpoint(partitioned_table(tmp_path), part_size=4)
    assert (result.layout, result.parts, result.adds, result.tombstones) == ("multipart", 4, 12, 1)
    names = sorted(p.name for p in _log(tmp_path).glob("*.checkpoint.*.parquet"))
    assert names == [paths.multipart_checkpoint(1, p, 4) for p in range(1, 5)]
    hint = last_checkpoint.parse((_log(tmp_path) / "_last_checkpoint").read_bytes())
    assert hint.parts == 4 and hint.size == result.rows == 15


def test_rows_are_clustered_like_spark(tmp_path):
    checkpoint(partitioned_table(tmp_path), part_size=4)
    for part in range(1, 5):
        rows = pq.read_table(_log(tmp_path) / paths.multipart_checkpoint(1, part, 4)).to_pylist()
        for row in rows:
            action = row["add"] or row["remove"]
            if action is None:  # protocol and metaData: a null key hashes to the seed
                assert part - 1 == SEED % 4
            else:
                assert part - 1 == (hash_string(action["path"]) % 4), action["path"]


def test_one_classic_file_without_a_part_size_or_when_it_fits(tmp_path):
    assert checkpoint(partitioned_table(tmp_path)).layout == "classic"
    assert checkpoint(partitioned_table(tmp_path / "big"), part_size=100).layout == "classic"
    assert (_log(tmp_path / "big") / paths.checkpoint(1)).is_file()


def test_part_size_must_be_positive(tmp_path):
    with pytest.raises(InvalidInputError):
        checkpoint(partitioned_table(tmp_path), part_size=0)


def test_rewriting_a_version_gives_identical_parts(tmp_path):
    path = partitioned_table(tmp_path, n=40)
    first = checkpoint(path, part_size=7)
    before = {k: (path / k).read_bytes() for k in first.keys}
    second = checkpoint(path, part_size=7)  # this time the snapshot is read from the first one
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
    result = checkpoint(tmp_path, part_size=3)
    where: dict[str, set[int]] = {}
    for i, key in enumerate(result.keys):
        for row in pq.read_table(tmp_path / key).to_pylist():
            action = row["add"] or row["remove"]
            if action:
                where.setdefault(action["path"], set()).add(i)
    assert all(len(parts) == 1 for parts in where.values()), where


def test_v2_table_gets_sidecars_never_multi_part(tmp_path):
    result = checkpoint(partitioned_table(tmp_path, V2), part_size=4)
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


def test_classic_on_a_v2_table_writes_one_file_older_readers_read(tmp_path):
    result = checkpoint(partitioned_table(tmp_path, V2), classic=True, part_size=4)
    assert (result.layout, result.key, result.sidecars) == (
        "classic",
        f"_delta_log/{paths.checkpoint(1)}",
        0,
    )
    rows = pq.read_table(tmp_path / result.key).to_pylist()
    assert [r["checkpointMetadata"]["version"] for r in rows if r["checkpointMetadata"]] == [1]
    assert sum(1 for r in rows if r["add"]) == 12
    assert rows[1]["protocol"]["readerFeatures"] == ["v2Checkpoint"]


def test_the_classic_checkpoint_policy_keeps_v1_checkpoints(tmp_path):
    path = partitioned_table(tmp_path, V2, **{"delta.checkpointPolicy": "classic"})
    result = checkpoint(path, part_size=100)
    assert result.layout == "classic"
    assert "checkpointMetadata" not in pq.read_schema(path / result.key).names


def test_dry_run_writes_nothing_for_any_layout(tmp_path):
    for sub, proto, kw in (("mp", None, {"part_size": 3}), ("v2", V2, {})):
        path = partitioned_table(tmp_path / sub, proto)
        before = sorted(p.name for p in _log(path).rglob("*"))
        result = checkpoint(path, dry_run=True, **kw)
        assert result.keys and sorted(p.name for p in _log(path).rglob("*")) == before


def test_dictionaries_only_where_values_repeat_across_files(tmp_path):
    # A dictionary attempt on per-file values is a third of a large checkpoint's write time.
    path = stats_table(tmp_path, [GOOD_STATS, GOOD_STATS])
    meta = pq.ParquetFile(path / checkpoint(path).key).metadata.row_group(0)
    encodings = {
        meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)
    }
    plain = ["add.path", "add.size", "add.stats", "add.stats_parsed.minValues.id"]
    assert all("RLE_DICTIONARY" not in encodings[c] for c in plain), encodings
    assert "RLE_DICTIONARY" in encodings["add.partitionValues.key_value.value"]
    assert "RLE_DICTIONARY" in encodings["add.stats_parsed.nullCount.id"]
