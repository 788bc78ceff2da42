"""standalone/status_file.py: the status file is replaced whole, read back even when missing
or damaged, and keeps a digest of each spec, never the spec (it may hold secrets)."""

from __future__ import annotations

import json
from pathlib import Path

from deltakeeper.standalone import status_file


def test_it_lives_under_the_manifests_folder(tmp_path: Path) -> None:
    assert status_file.status_file_for(tmp_path) == tmp_path / ".deltakeeper" / "status.json"


def test_a_write_replaces_the_file_whole_and_reads_back(tmp_path: Path) -> None:
    path = status_file.status_file_for(tmp_path)
    status_file.write(path, {"tables": {"ns/t": {"version": 1}}})
    status_file.write(path, {"tables": {"ns/t": {"version": 2}}})
    assert status_file.read(path) == {"tables": {"ns/t": {"version": 2}}}
    assert sorted(p.name for p in path.parent.iterdir()) == ["status.json"]  # no temp left


def test_a_missing_or_damaged_file_reads_as_empty(tmp_path: Path) -> None:
    assert status_file.read(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert status_file.read(tmp_path / "bad.json") == {}
    (tmp_path / "list.json").write_text(json.dumps([1, 2]))
    assert status_file.read(tmp_path / "list.json") == {}


def test_the_spec_digest_changes_with_the_spec_and_shows_none_of_it() -> None:
    spec = {"uri": "s3://KEY:SECRET@bucket/t", "storage": {"options": {"secret": "hunter2"}}}
    digest = status_file.spec_digest(spec)
    assert "hunter2" not in digest and "SECRET" not in digest
    assert digest == status_file.spec_digest(dict(reversed(list(spec.items()))))
    assert digest != status_file.spec_digest({**spec, "pollInterval": "10s"})


def test_non_ascii_names_and_number_keys_read_back_as_json_writes_them(tmp_path: Path) -> None:
    """orjson writes UTF-8 and refuses keys that are not strings unless told: the file reads
    back as the stdlib's encoder would have written it, whatever the locale."""
    path = status_file.status_file_for(tmp_path)
    body = {"tables": {"ns/été 100%": {"version": 3, "parts": {1: "a", 2: "b"}, "ratio": 0.5}}}
    status_file.write(path, body)
    assert status_file.read(path) == json.loads(json.dumps(body))
    assert "été".encode() in path.read_bytes()  # UTF-8, not \u escapes
    keys = list(json.loads(path.read_bytes())["tables"]["ns/été 100%"])
    assert keys == sorted(keys)  # sorted, as before
