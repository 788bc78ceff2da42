"""delta/storage/local.py: listings that race other writers, overwrites, counted ranged reads."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.storage import LocalStorage
from deltakeeper.delta.storage.base import IsAFolder

# -- listings while other processes rename and delete ------------------------------------------
# Found beside a live delta-rs writer (tests/integration/test_concurrency.py): delta-rs writes
# `_delta_log/N.json#1` and renames it to `N.json`; a listing that scanned the folder before the
# rename failed with FileNotFoundError (exit 1) when it asked for the temp file's size. A file
# gone since the scan is skipped.

TEMP = "00000000000000000001.json#1"


def make_log(root: Path) -> Path:
    log = root / "_delta_log"
    log.mkdir()
    (log / "00000000000000000000.json").write_text("{}\n")
    (log / TEMP).write_text("{}\n")
    return log


def test_list_from_skips_a_file_renamed_after_the_scan(tmp_path, monkeypatch):
    log = make_log(tmp_path)
    scandir = os.scandir

    def scan_then_rename(path):
        entries = list(scandir(path))
        os.rename(log / TEMP, log / "00000000000000000001.json")  # the writer commits now
        return iter(entries)

    monkeypatch.setattr(os, "scandir", scan_then_rename)
    listed = LocalStorage(str(tmp_path), str(tmp_path)).list_from("_delta_log")
    assert [f.key for f in listed] == ["_delta_log/00000000000000000000.json"]


def test_walk_skips_a_file_deleted_after_the_scan(tmp_path, monkeypatch):
    log = make_log(tmp_path)
    walk = os.walk

    def walk_then_delete(top):
        for dirpath, dirs, files in walk(top):
            if TEMP in files:
                (log / TEMP).unlink()
            yield dirpath, dirs, files

    monkeypatch.setattr(os, "walk", walk_then_delete)
    found = sorted(f.key for f in LocalStorage(str(tmp_path), str(tmp_path)).walk("_delta_log"))
    assert found == ["_delta_log/00000000000000000000.json"]


# -- Hadoop's checksum files ---------------------------------------------------------------------
# Spark on a local disk (Hadoop's checksummed local file system) writes `.<name>.crc` beside
# every file and refuses to read a file that no longer matches it ("ChecksumException"); without
# a `.crc` it reads the file as it is. So a file deltakeeper replaces must lose its stale `.crc`,
# or Delta Spark cannot read the table any more (seen with `checkpoint --version N` over Spark's
# own checkpoint N; tests/integration/test_crash.py covers the Spark side).

KEY = "_delta_log/00000000000000000030.checkpoint.parquet"


def test_overwrite_drops_the_stale_hadoop_checksum(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / "00000000000000000030.checkpoint.parquet").write_bytes(b"spark's")
    crc = log / ".00000000000000000030.checkpoint.parquet.crc"
    crc.write_bytes(b"checksum of spark's")
    other = log / ".00000000000000000030.json.crc"
    other.write_bytes(b"checksum of the commit")
    LocalStorage(str(tmp_path), str(tmp_path)).overwrite(KEY, b"ours")
    assert (log / "00000000000000000030.checkpoint.parquet").read_bytes() == b"ours"
    assert not crc.exists()
    assert other.exists()  # only the replaced file's checksum goes


def test_overwrite_without_a_checksum_is_unchanged(tmp_path):
    storage = LocalStorage(str(tmp_path), str(tmp_path))
    storage.overwrite("_delta_log/_last_checkpoint", b"{}")
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == ["_last_checkpoint"]


# -- open_input ------------------------------------------------------------------------------------


def _parquet(rows: int) -> bytes:
    table = pa.table({"a": list(range(rows)), "b": [str(i) * 8 for i in range(rows)]})
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=rows // 4)
    return buf.getvalue()


def test_local_open_input_is_counted_and_missing_is_file_not_found(tmp_path):
    (tmp_path / "x.parquet").write_bytes(_parquet(1000))
    s = LocalStorage(str(tmp_path), str(tmp_path))
    assert pq.ParquetFile(s.open_input("x.parquet")).metadata.num_rows == 1000
    assert dict(s.requests) == {"read": 1}
    with pytest.raises(FileNotFoundError):
        s.open_input("missing.parquet")


def test_list_from_sorts_and_keeps_the_last_of_a_key_a_store_gave_twice(tmp_path, monkeypatch):
    from deltakeeper.delta.storage import FileInfo

    s = LocalStorage(str(tmp_path), str(tmp_path))
    given = [
        FileInfo("_delta_log/2.json", 1, 0),
        FileInfo("_delta_log/1.json", 1, 0),
        FileInfo("_delta_log/0.json", 1, 0),  # before start_after: left out
        FileInfo("_delta_log/2.json", 2, 0),  # a page asked again: the later answer wins
    ]
    monkeypatch.setattr(s, "_list_from", lambda folder, start_after: given)
    got = s.list_from("_delta_log", "_delta_log/0.json")
    assert [(f.key, f.size) for f in got] == [("_delta_log/1.json", 1), ("_delta_log/2.json", 2)]
    monkeypatch.setattr(s, "_list_from", lambda folder, start_after: given[1:3][::-1])
    assert [f.key for f in s.list_from("_delta_log", "")] == [
        "_delta_log/0.json",
        "_delta_log/1.json",
    ]


# -- a folder where a file goes, a file where a folder goes, a NUL in a name (issue 49) ---------


def test_a_folder_where_a_file_is_written_is_bad_input_and_no_temp_file_stays(tmp_path):
    store = LocalStorage(str(tmp_path), str(tmp_path))
    (tmp_path / "d" / "x").mkdir(parents=True)
    for write in (
        lambda: store.overwrite("d/x", b"1"),
        lambda: store.put_if_absent("d/x", b"1"),
        lambda: _upload(store, "d/x"),
    ):
        with pytest.raises(InvalidInputError, match=r"d/x is a folder, where a file goes"):
            write()
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["x"]
    with pytest.raises(FileNotFoundError):
        store.read("d/x")
    with pytest.raises(IsAFolder):
        store.read("d/x")


def test_a_file_where_a_folder_goes_is_bad_input_and_no_temp_file_stays(tmp_path):
    store = LocalStorage(str(tmp_path), str(tmp_path))
    (tmp_path / "d").write_text("a file")
    for write in (
        lambda: store.overwrite("d/x", b"1"),
        lambda: store.put_if_absent("d/x", b"1"),
        lambda: _upload(store, "d/x"),
    ):
        with pytest.raises(InvalidInputError, match=r"d is a file, where a folder goes"):
            write()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    assert (tmp_path / "d").read_text() == "a file"


def test_a_nul_in_a_key_is_no_file_to_read_or_delete_and_bad_input_to_write(tmp_path):
    store = LocalStorage(str(tmp_path), str(tmp_path))
    with pytest.raises(FileNotFoundError):
        store.read("a\0b")
    with pytest.raises(FileNotFoundError):
        store.open_input("a\0b")
    assert store.head("a\0b") is None
    assert store.delete_many(["a\0b"]) == 0
    with pytest.raises(InvalidInputError, match="a NUL character"):
        store.overwrite("p=\0/manifest", b"1")
    assert list(tmp_path.iterdir()) == []


def _upload(store: LocalStorage, key: str) -> None:
    upload = store.open_upload(key)
    try:
        upload.write(b"1")
        upload.commit()
    finally:
        upload.abort()
