"""standalone/report.py: what `deltakeeper status` shows of the status file, its lakes too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.cli import main
from tests.support.standalone import found_key


def test_status_shows_each_lake_with_its_tables_and_managed_tables(
    lake_folder: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, manifests = lake_folder
    assert main(["run", "--manifests", str(manifests), "--once"]) == 1  # a rejected manifest
    capsys.readouterr()
    assert main(["status", "--manifests", str(manifests)]) == 0
    out = capsys.readouterr().out
    assert "LAKE" in out and "data/main" in out
    line = next(row for row in out.splitlines() if row.startswith("data/main "))
    assert line.split()[1:3] == ["3", "2"]
    # --json: the tables under their NAMESPACE/NAME as before, the lakes under "lakes".
    assert main(["status", "--manifests", str(manifests), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) == {found_key("events"), found_key("sales/orders"), "data/mine", "lakes"}
    assert all("/" in key for key in shown if key != "lakes")
    lakes = shown["lakes"]
    assert set(lakes) == {"data/main"}
    assert (lakes["data/main"]["tables"], lakes["data/main"]["managedTables"]) == (3, 2)
    assert lakes["data/main"]["lastScan"]["result"] == "ok"


def test_status_json_without_lakes_has_only_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status_file = tmp_path / "status.json"
    status_file.write_text(json.dumps({"tables": {"ns/t": {"version": 3}}, "lakes": {}}))
    assert main(["status", "--status-file", str(status_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ns/t": {"version": 3}}


def test_an_expiry_shows_the_files_it_removed_from_the_table() -> None:
    from deltakeeper.standalone.report import status_rows

    entry = {"time": "2026-01-10T04:00:00Z", "result": "done", "deletedFiles": 0}
    status = {"lastMaintenance": {"expire": {**entry, "removedFiles": 9}}}
    (row,) = status_rows({"lake/events": status})
    assert row[-1] == "expire done 9 files removed 04:00:00Z"
