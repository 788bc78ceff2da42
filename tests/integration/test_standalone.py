"""`deltakeeper run` as a process: it picks up changed, new and removed manifests while it
runs, serves metrics and /healthz, keeps going past a malformed file, and stops cleanly on
SIGINT with the status written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol
from tests.support.manifests import table_doc
from tests.support.stores import free_port

DELTAKEEPER = Path(sys.executable).parent / "deltakeeper"


def _table(root: Path) -> None:
    b = LogBuilder(root)
    b.commit(protocol(), metadata(), add("a.parquet"), commit_info())
    b.commit(add("b.parquet"), commit_info())


def _manifest(name: str, uri: Path, **spec: Any) -> str:
    return json.dumps(table_doc(name, f"file://{uri}", pollInterval="1s", **spec))


def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _statuses(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / ".deltakeeper" / "status.json").read_text())["tables"]
    except (FileNotFoundError, ValueError):
        return {}


def _ready(folder: Path, name: str) -> tuple[str, str] | None:
    for c in _statuses(folder).get(name, {}).get("conditions") or []:
        if c["type"] == "Ready":
            return c["status"], c["reason"]
    return None


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def test_run_follows_the_folder_and_stops_cleanly(tmp_path: Path) -> None:
    _table(tmp_path / "a")
    _table(tmp_path / "b")
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a.json").write_text(_manifest("a", tmp_path / "a"))
    (folder / "broken.yaml").write_text("kind: [unclosed\n")
    port = free_port()
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _until(lambda: _ready(folder, "lake/a") == ("True", "Watching"), 30, "table a Ready")
        assert "broken.yaml: cannot read it as YAML" in log.read_text()
        metrics = _scrape(port)
        assert 'deltakeeper_table_version{namespace="lake",table="a"} 1.0' in metrics
        # Nothing deleted yet (the new table has nothing expired), and its counters exist at 0
        # all the same, so that increase() counts the first cleanup and vacuum.
        done = _statuses(folder)["lake/a"]["lastMaintenance"]
        assert "cleanup" not in done and "vacuum" not in done, done
        for name in ("deltakeeper_deleted_files_total", "deltakeeper_deleted_bytes_total"):
            for kind in ("log", "data"):
                assert f'{name}{{namespace="lake",table="a",kind="{kind}"}} 0.0' in metrics
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").status == 200

        (folder / "a.json").write_text(_manifest("a", tmp_path / "a", suspend=True))
        _until(lambda: _ready(folder, "lake/a") == ("True", "Suspended"), 30, "a suspended")
        assert _statuses(folder)["lake/a"]["observedGeneration"] == 2

        (folder / "b.json").write_text(_manifest("b", tmp_path / "b"))
        _until(lambda: _ready(folder, "lake/b") == ("True", "Watching"), 30, "table b picked up")

        (folder / "a.json").unlink()
        _until(lambda: "lake/a" not in _statuses(folder), 30, "table a dropped")
        assert 'table="a"' not in _scrape(port) and 'table="b"' in _scrape(port)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    assert code == 0, log.read_text()
    assert set(_statuses(folder)) == {"lake/b"}


def test_run_records_each_operation_in_the_history_table(tmp_path: Path) -> None:
    """`--history-uri`: each checkpoint lands as a row of a Delta table that delta-rs reads,
    flushed every few seconds, and on SIGINT what is left."""
    from deltalake import DeltaTable

    _table(tmp_path / "a")
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a.json").write_text(_manifest("a", tmp_path / "a", checkpoint={"interval": 1}))
    history = tmp_path / "history"

    def rows() -> list[dict[str, Any]]:
        try:
            return list(DeltaTable(str(history)).to_pyarrow_table().to_pylist())
        except Exception:  # not created yet
            return []

    def checkpointed(version: int) -> bool:
        done = _statuses(folder).get("lake/a", {}).get("lastMaintenance", {})
        return done.get("checkpoint", {}).get("version") == version

    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", "0"]
    proc = subprocess.Popen([*argv, "--history-uri", str(history)], stderr=subprocess.PIPE)
    try:
        _until(rows, 60, "the first rows of the history")
        commit = json.dumps({"add": add("c.parquet")["add"]}) + "\n"
        (tmp_path / "a" / "_delta_log" / f"{2:020d}.json").write_text(commit)
        _until(lambda: checkpointed(2), 60, "a checkpoint at version 2")
    finally:
        proc.send_signal(signal.SIGINT)  # at once: the last row is flushed on the way out
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    found = rows()
    checkpoints = sorted(r["table_version"] for r in found if r["operation"] == "checkpoint")
    assert checkpoints == [1, 2], found
    assert {(r["namespace"], r["table"], r["status"]) for r in found} <= {
        ("lake", "a", "succeeded"),
        ("lake", "a", "skipped"),
    }
    first = next(r for r in found if r["operation"] == "checkpoint")
    assert dict(first["metrics"])["checkpointBytes"] > 0
