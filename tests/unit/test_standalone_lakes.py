"""Standalone mode with DeltaLake manifests (local disk): found tables are maintained with the
template's settings, a DeltaTable manifest for the same table wins, a table that disappears is
marked and kept, a malformed DeltaLake is rejected while the rest run."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.resources.lake import table_name
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.standalone import tables as standalone
from deltakeeper.standalone.status_file import status_file_for
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol


def make_table(root: Path, commits: int = 1) -> None:
    b = LogBuilder(root)
    b.commit(protocol(), metadata(), add("a.parquet"), commit_info())
    for i in range(1, commits):
        b.commit(add(f"f{i}.parquet"), commit_info())


def lake_doc(name: str, uri: Path, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaLake",
        "metadata": {"name": name, "namespace": "data"},
        "spec": {"uri": f"file://{uri}", **spec},
    }


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "lake"
    make_table(data / "events", commits=3)
    make_table(data / "sales" / "orders")
    make_table(data / "explicit")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    template = {"labels": {"team": "x"}, "checkpoint": {"interval": 2}}
    lake = lake_doc("main", data, tableTemplate=template)
    (manifests / "lake.json").write_text(json.dumps(lake))
    bad = lake_doc("broken", data, maxDepth="three")
    (manifests / "broken.json").write_text(json.dumps(bad))
    table = {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaTable",
        "metadata": {"name": "mine", "namespace": "data"},
        "spec": {"uri": f"file://{data}/explicit/", "suspend": True},
    }
    (manifests / "table.json").write_text(json.dumps(table))
    return data, manifests


async def cycle(daemon: standalone.Standalone) -> None:
    """What one pass of `run` does, with every lake due."""
    daemon.reload()
    await daemon.scan_all()
    for key, entry in daemon.tables.items():
        target = await daemon.target(key, entry)
        await daemon.fleet.poll_once(target, entry.watcher, daemon.registry.publish)
    daemon.flush()


def name(path: str) -> str:
    return f"data/{table_name(path, 'main')}"


def test_lake_tables_are_maintained_and_marked(setup: tuple[Path, Path]) -> None:
    data, manifests = setup
    status_file = manifests / ".deltakeeper" / "status.json"
    daemon = standalone.Standalone(manifests, status_file, Metrics())
    try:
        asyncio.run(cycle(daemon))
        body = json.loads(status_file.read_text())
        tables = body["tables"]
        assert set(tables) == {name("events"), name("sales/orders"), "data/mine"}
        events = tables[name("events")]
        assert events["discovery"] == {"lake": "data/main", "path": "events", "present": True}
        # the template's checkpoint interval (2) made a checkpoint at version 2
        assert events["lastCheckpointVersion"] == 2
        assert (data / "events" / "_delta_log" / "00000000000000000002.checkpoint.parquet").exists()
        assert daemon.tables[("data", table_name("events", "main"))].resource.labels == {
            "team": "x",
            "deltakeeper.io/lake": "main",
        }
        lake = body["lakes"]["data/main"]
        assert lake["tables"] == 3 and lake["managedTables"] == 2  # explicit: its manifest wins
        assert lake["lastScan"]["result"] == "ok" and lake["lastScan"]["requests"] > 0
        assert [r for r in body["rejected"] if "broken" in r and "maxDepth" in r]

        make_table(data / "new")
        (data / "sales" / "orders" / "_delta_log" / "00000000000000000000.json").unlink()
        asyncio.run(cycle(daemon))
        body = json.loads(status_file.read_text())
        assert body["tables"][name("new")]["discovery"]["present"] is True
        orders = body["tables"][name("sales/orders")]  # kept, marked, nothing deleted
        assert orders["discovery"] == {
            "lake": "data/main",
            "path": "sales/orders",
            "present": False,
        }
        assert (data / "sales" / "orders" / "_delta_log").is_dir()
        assert body["lakes"]["data/main"]["tables"] == 3
    finally:
        daemon.fleet.close()


def test_status_command_shows_lakes(
    setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, manifests = setup
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
    assert set(shown) == {name("events"), name("sales/orders"), "data/mine", "lakes"}
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


def test_a_lake_whose_secret_is_missing_is_not_ready(tmp_path: Path) -> None:
    make_table(tmp_path / "lake" / "a")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    lake = lake_doc("main", tmp_path / "lake", storage={"secretRef": {"name": "nope"}})
    (manifests / "lake.json").write_text(json.dumps(lake))
    status_file = manifests / "status.json"
    daemon = standalone.Standalone(manifests, status_file, Metrics())
    try:
        asyncio.run(cycle(daemon))
    finally:
        daemon.fleet.close()
    body = json.loads(status_file.read_text())
    assert body["tables"] == {}  # nothing scanned, nothing watched
    ready = {c["type"]: c for c in body["lakes"]["data/main"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "SecretNotFound")
    assert "data/nope" in ready["message"]


@contextlib.contextmanager
def running(manifests: Path) -> Iterator[standalone.Standalone]:
    daemon = standalone.Standalone(manifests, status_file_for(manifests), Metrics())
    try:
        yield daemon
    finally:
        daemon.fleet.close()


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}


def test_a_gone_table_is_not_polled_is_remembered_across_a_restart_and_resumes(
    setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data, manifests = setup
    status_file = status_file_for(manifests)
    orders, key = name("sales/orders"), ("data", table_name("sales/orders", "main"))
    commit = data / "sales" / "orders" / "_delta_log" / "00000000000000000000.json"
    saved = commit.read_bytes()
    with running(manifests) as daemon:
        asyncio.run(cycle(daemon))
        before = json.loads(status_file.read_text())["tables"][orders]
        assert conditions(before)["TableFound"] == ("True", "Found")
        commit.unlink()
        asyncio.run(cycle(daemon))
        assert key not in daemon.tables  # no longer polled
    body = json.loads(status_file.read_text())
    gone = body["tables"][orders]
    assert gone["discovery"]["present"] is False
    assert gone["version"] == before["version"]  # the last poll's status, kept
    assert conditions(gone)["Ready"] == ("True", "Watching") == conditions(before)["Ready"]
    assert conditions(gone)["TableFound"] == ("False", "NotFound")
    assert body["lakes"]["data/main"]["missingTables"] == 1
    capsys.readouterr()
    assert main(["status", "--status-file", str(status_file)]) == 0
    said = f"{orders}: gone from DeltaLake data/main (sales/orders); not polled, status kept"
    assert said in capsys.readouterr().out

    # A restart: the status file says it is gone; it stays gone, unpolled, until it is back.
    with running(manifests) as daemon:
        daemon.reload()
        assert key not in daemon.tables
        asyncio.run(cycle(daemon))
        assert key not in daemon.tables
        body = json.loads(status_file.read_text())
        assert body["tables"][orders]["discovery"]["present"] is False
        assert conditions(body["tables"][orders])["TableFound"] == ("False", "NotFound")
        assert body["lakes"]["data/main"]["missingTables"] == 1
        assert body["lakes"]["data/main"]["managedTables"] == 2

        commit.write_bytes(saved)
        asyncio.run(cycle(daemon))
        assert key in daemon.tables  # polled again
        back = json.loads(status_file.read_text())
        assert back["tables"][orders]["discovery"]["present"] is True
        assert conditions(back["tables"][orders])["TableFound"] == ("True", "Found")
        assert conditions(back["tables"][orders])["Ready"][0] == "True"
        assert back["lakes"]["data/main"]["missingTables"] == 0


def test_a_gone_tables_status_goes_with_its_lake(setup: tuple[Path, Path]) -> None:
    data, manifests = setup
    status_file = status_file_for(manifests)
    with running(manifests) as daemon:
        asyncio.run(cycle(daemon))
        (data / "sales" / "orders" / "_delta_log" / "00000000000000000000.json").unlink()
        asyncio.run(cycle(daemon))
        assert name("sales/orders") in json.loads(status_file.read_text())["tables"]
        (manifests / "lake.json").unlink()
        asyncio.run(cycle(daemon))
    assert set(json.loads(status_file.read_text())["tables"]) == {"data/mine"}
