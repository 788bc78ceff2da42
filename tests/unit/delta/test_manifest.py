"""manifest: Hive's escaping of partition folders, the locations written, what a run writes,
leaves and deletes on a local table."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltakeeper.delta import manifest
from deltakeeper.delta.errors import InvalidInputError, UnsupportedProtocolError
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, commit_info, dv, metadata, protocol, remove


def test_partition_folders_escape_what_hive_escapes() -> None:
    assert manifest.escape_path_name("a/b c=%?é\x01") == "a%2Fb c%3D%25%3Fé%01"
    values = {"day": "2026-01-01 10:00:00", "id": None}
    assert manifest.partition_dir(["day", "id"], values) == (
        "day=2026-01-01 10%3A00%3A00/id=__HIVE_DEFAULT_PARTITION__"
    )
    assert manifest.partition_dir(["id"], {"id": ""}) == "id=__HIVE_DEFAULT_PARTITION__"


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("day=a%20b/f.parquet", "file:/t/day=a b/f.parquet"),
        ("day=a%252Fb/f.parquet", "file:/t/day=a%2Fb/f.parquet"),
        ("s3://bucket/other/f%20g.parquet", "s3://bucket/other/f g.parquet"),
        ("file:///elsewhere/f.parquet", "file:/elsewhere/f.parquet"),
    ],
)
def test_locations_are_absolute_and_decoded(path: str, location: str) -> None:
    assert manifest.data_file_location("file:/t", path) == location


def test_a_run_writes_changed_manifests_and_deletes_emptied_ones(tmp_path: Path) -> None:
    log = LogBuilder(tmp_path)
    log.commit(
        commit_info(),
        protocol(),
        metadata(("day",)),
        add("day=a/1.parquet", day="a"),
        add("day=b/2.parquet", day="b"),
    )
    first = manifest.generate(open_table(str(tmp_path)))
    assert first.written == [
        "_symlink_format_manifest/day=a/manifest",
        "_symlink_format_manifest/day=b/manifest",
    ]
    body = (tmp_path / "_symlink_format_manifest/day=a/manifest").read_text()
    assert body == f"file:{tmp_path}/day=a/1.parquet\n"
    log.commit(commit_info(), remove("day=b/2.parquet"), add("day=a/3.parquet", day="a"))
    second = manifest.generate(open_table(str(tmp_path)))
    assert (second.written, second.unchanged, second.deleted) == (
        ["_symlink_format_manifest/day=a/manifest"],
        0,
        ["_symlink_format_manifest/day=b/manifest"],
    )
    assert not (tmp_path / "_symlink_format_manifest/day=b").exists()
    lines = (tmp_path / "_symlink_format_manifest/day=a/manifest").read_text().splitlines()
    assert lines == [f"file:{tmp_path}/day=a/1.parquet", f"file:{tmp_path}/day=a/3.parquet"]


def test_an_empty_unpartitioned_table_gets_an_empty_manifest(tmp_path: Path) -> None:
    LogBuilder(tmp_path).commit(commit_info(), protocol(), metadata())
    run = manifest.generate(open_table(str(tmp_path)))
    assert run.written == ["_symlink_format_manifest/manifest"]
    assert (tmp_path / "_symlink_format_manifest/manifest").read_bytes() == b""


def test_column_mapping_and_deletion_vectors_are_refused(tmp_path: Path) -> None:
    mapped = LogBuilder(tmp_path / "mapped")
    mapped.commit(commit_info(), protocol(2, 5), metadata(**{"delta.columnMapping.mode": "name"}))
    with pytest.raises(InvalidInputError, match="column mapping"):
        manifest.generate(open_table(str(tmp_path / "mapped")))
    dvs = LogBuilder(tmp_path / "dvs")
    dvs.commit(
        commit_info(),
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(),
        add("1.parquet", dv=dv("x")),
    )
    with pytest.raises(UnsupportedProtocolError, match="deletion vectors"):
        manifest.generate(open_table(str(tmp_path / "dvs")))
    assert not (tmp_path / "dvs" / "_symlink_format_manifest").exists()
