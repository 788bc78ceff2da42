"""standalone/lakes.py: the tables a folder's DeltaLakes find, maintained with the template.

On the local disk: a DeltaTable manifest for the same table wins, a table that disappears is
marked and kept (not polled, across a restart too), a malformed DeltaLake is rejected while the
rest run."""

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
from tests.support.manifests import lake_doc
from tests.support.standalone import cycle, found_key
from tests.support.tables import small_table


def test_found_tables_are_maintained_with_the_template_and_marked_when_gone(
    lake_folder: tuple[Path, Path],
) -> None:
    data, manifests = lake_folder
    status_file = manifests / ".deltakeeper" / "status.json"
    daemon = standalone.Standalone(manifests, status_file, Metrics())
    try:
        asyncio.run(cycle(daemon))
        body = json.loads(status_file.read_text())
        tables = body["tables"]
        assert set(tables) == {found_key("events"), found_key("sales/orders"), "data/mine"}
        events = tables[found_key("events")]
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

        small_table(data / "new", commits=1)
        (data / "sales" / "orders" / "_delta_log" / "00000000000000000000.json").unlink()
        asyncio.run(cycle(daemon))
        body = json.loads(status_file.read_text())
        assert body["tables"][found_key("new")]["discovery"]["present"] is True
        orders = body["tables"][found_key("sales/orders")]  # kept, marked, nothing deleted
        assert orders["discovery"] == {
            "lake": "data/main",
            "path": "sales/orders",
            "present": False,
        }
        assert (data / "sales" / "orders" / "_delta_log").is_dir()
        assert body["lakes"]["data/main"]["tables"] == 3
    finally:
        daemon.fleet.close()


def test_a_lake_whose_secret_is_missing_is_not_ready(tmp_path: Path) -> None:
    small_table(tmp_path / "lake" / "a", commits=1)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    uri = f"file://{tmp_path / 'lake'}"
    lake = lake_doc("main", uri, storage={"secretRef": {"name": "nope"}})
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
    lake_folder: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data, manifests = lake_folder
    status_file = status_file_for(manifests)
    orders, key = found_key("sales/orders"), ("data", table_name("sales/orders", "main"))
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


def test_a_gone_tables_status_goes_with_its_lake(lake_folder: tuple[Path, Path]) -> None:
    data, manifests = lake_folder
    status_file = status_file_for(manifests)
    with running(manifests) as daemon:
        asyncio.run(cycle(daemon))
        (data / "sales" / "orders" / "_delta_log" / "00000000000000000000.json").unlink()
        asyncio.run(cycle(daemon))
        assert found_key("sales/orders") in json.loads(status_file.read_text())["tables"]
        (manifests / "lake.json").unlink()
        asyncio.run(cycle(daemon))
    assert set(json.loads(status_file.read_text())["tables"]) == {"data/mine"}


def test_a_lake_with_symlinks_makes_one_table_per_real_table_inside_it(
    lake_folder: tuple[Path, Path], tmp_path: Path
) -> None:
    """Issue 49, section 2, item 7: in `run`, a DeltaLake made a DeltaTable for each name of a
    table and one for a table outside its prefix, and a loop multiplied them."""
    data, manifests = lake_folder
    small_table(tmp_path / "outside", commits=1)
    (data / "events-again").symlink_to(data / "events")
    (data / "loop").symlink_to(data)
    (data / "away").symlink_to(tmp_path / "outside")
    status_file = manifests / ".deltakeeper" / "status.json"
    daemon = standalone.Standalone(manifests, status_file, Metrics())
    try:
        asyncio.run(cycle(daemon))
        body = json.loads(status_file.read_text())
        assert set(body["tables"]) == {found_key("events"), found_key("sales/orders"), "data/mine"}
        assert body["lakes"]["data/main"]["tables"] == 3
    finally:
        daemon.fleet.close()


class _CountedLoop:
    def __init__(self) -> None:
        self.pokes = 0

    def poke(self) -> None:
        self.pokes += 1


def test_a_lakes_scan_polls_no_watched_table_but_a_reload_polls_them_all(
    lake_folder: tuple[Path, Path],
) -> None:
    """A scan changes no watched table: poking them all would be a listing of every table
    each scanInterval, which storage events exist to save. A reload may have changed a
    policy or Secret: every table is polled at once."""
    _data, manifests = lake_folder
    daemon = standalone.Standalone(manifests, manifests / "status.json", Metrics())
    try:
        asyncio.run(cycle(daemon))
        loops = {key: _CountedLoop() for key in daemon.tables}
        for key, entry in daemon.tables.items():
            entry.loop = loops[key]  # type: ignore[assignment]
        asyncio.run(daemon.scan_all())
        assert [loop.pokes for loop in loops.values()] == [0] * len(loops)
        daemon._signature = None  # the folder "changed"
        assert daemon.reload()
        assert [loop.pokes for loop in loops.values()] == [1] * len(loops)
    finally:
        for entry in daemon.tables.values():
            entry.loop = None
        daemon.fleet.close()
