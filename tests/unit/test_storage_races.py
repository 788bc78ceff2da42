"""Local listings while other processes rename and delete: a file gone since the scan is skipped.

Found beside a live delta-rs writer (tests/integration/test_concurrency.py): delta-rs writes
`_delta_log/N.json#1` and renames it to `N.json`; a listing that scanned the folder before the
rename failed with FileNotFoundError (exit 1) when it asked for the temp file's size.
"""

from __future__ import annotations

import os
from pathlib import Path

from deltakeeper.delta.storage import LocalStorage

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
