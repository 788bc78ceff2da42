"""standalone/daemon.py: `deltakeeper run --once` polls each table once and writes its status.

A table that is not Ready makes the exit code 1; a changed manifest is a new observedGeneration;
`deltakeeper status` without a status file exits 2."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.runtime import status
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.standalone import tables as standalone
from tests.support.logbuilder import add
from tests.support.tables import daily_table, small_table


def test_run_once_writes_every_status_and_a_changed_spec_is_a_new_generation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_table(tmp_path / "t")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        "apiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\n"
        f"metadata: {{name: good}}\n"
        f"spec: {{uri: 'file://{tmp_path / 't'}', checkpoint: {{interval: 2}}}}\n"
        "---\napiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\n"
        f"metadata: {{name: gone}}\nspec: {{uri: 'file://{tmp_path / 'nothing'}'}}\n"
    )
    assert main(["run", "--manifests", str(folder), "--once"]) == 1  # one table is not Ready
    assert main(["status", "--manifests", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    statuses = json.loads(out[out.index("{\n") :])
    assert statuses["default/good"]["lastCheckpointVersion"] == 2
    assert statuses["default/good"]["observedGeneration"] == 1
    ready = {c["type"]: c for c in statuses["default/gone"]["conditions"]}["Ready"]
    assert ready["status"] == "False" and ready["reason"] == "NotADeltaTable"
    # A changed spec is a new generation.
    text = (folder / "t.yaml").read_text().replace("interval: 2", "interval: 3")
    (folder / "t.yaml").write_text(text)
    main(["run", "--manifests", str(folder), "--once"])
    capsys.readouterr()
    main(["status", "--manifests", str(folder), "--json"])
    out = capsys.readouterr().out
    assert json.loads(out)["default/good"]["observedGeneration"] == 2
    shutil.rmtree(folder / ".deltakeeper")
    assert main(["status", "--manifests", str(folder)]) == 2


def folder_of_t(tmp_path: Path) -> Path:
    """A manifests folder of one DeltaTable, `t`, over the table at tmp_path/t."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        "apiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\n"
        f"metadata: {{name: t}}\nspec: {{uri: 'file://{tmp_path / 't'}'}}\n"
    )
    return folder


def test_a_poll_that_only_moves_last_poll_leaves_the_status_file_alone_for_an_hour(
    tmp_path: Path,
) -> None:
    table = small_table(tmp_path / "t")
    folder = folder_of_t(tmp_path)
    now = [1_900_000_000_000]
    daemon = standalone.Standalone(folder, folder / "status.json", Metrics(), clock=lambda: now[0])
    key = ("default", "t")

    async def poll(at_ms: int) -> None:
        now[0] = at_ms
        entry = daemon.tables[key]
        target = await daemon.target(key, entry)
        await daemon.write_status(entry, target, entry.watcher.observe(target, at_ms))

    def written() -> dict[str, Any]:
        return json.loads((folder / "status.json").read_text())["tables"]["default/t"]

    try:
        assert daemon.reload()
        start = now[0]
        asyncio.run(poll(start))
        daemon.flush()
        first = written()
        asyncio.run(poll(start + 30_000))  # quiet: only lastPoll moved
        daemon.flush()
        assert written() == first
        assert daemon.statuses["default/t"]["lastPoll"] != first["lastPoll"]
        table.commit(add("new", 1))  # the log moved: written at once
        asyncio.run(poll(start + 60_000))
        daemon.flush()
        assert written()["version"] == first["version"] + 1
        moved = written()
        asyncio.run(poll(start + 60_000 + status.REFRESH_S * 1000))  # quiet, an hour on
        daemon.flush()
        assert written()["lastPoll"] != moved["lastPoll"]
    finally:
        daemon.fleet.close()


def test_run_once_vacuums_auto_as_the_daemons_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command line's vacuum and maintain default to FULL; the daemons keep AUTO, whose
    # first vacuum is FULL for want of one on record, then LITE until vacuum.fullInterval.
    daily_table(tmp_path / "t")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        "apiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\n"
        f"metadata: {{name: t}}\nspec: {{uri: 'file://{tmp_path / 't'}'}}\n"
    )
    assert main(["run", "--manifests", str(folder), "--once"]) == 0
    capsys.readouterr()
    assert main(["status", "--manifests", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    vac = json.loads(out[out.index("{\n") :])["default/t"]["lastMaintenance"]["vacuum"]
    assert vac["result"] == "done" and vac["mode"] == "full"
    assert vac["modeReason"] == "auto: no FULL vacuum on record"


def test_a_changed_status_reaches_the_file_within_a_moment_not_at_the_next_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit's status is written about FLUSH_AFTER_S after it changed (issue 47: commit to
    status within a second), once for a burst of changes, and not at all for a quiet poll."""
    small_table(tmp_path / "t")
    folder = folder_of_t(tmp_path)
    path = folder / "status.json"
    daemon = standalone.Standalone(folder, path, Metrics())
    key = ("default", "t")
    writes: list[float] = []
    original = standalone.status_file.write

    def counted(where: Path, body: dict[str, Any]) -> None:
        writes.append(time.monotonic())
        original(where, body)

    async def polls() -> float:
        entry = daemon.tables[key]
        target = await daemon.target(key, entry)
        changed = time.monotonic()
        for _ in range(5):  # a burst: one write
            await daemon.write_status(entry, target, entry.watcher.observe(target, 0))
        await asyncio.sleep(standalone.FLUSH_AFTER_S + 0.4)
        quiet = entry.watcher.observe(target, 1000)  # only lastPoll moves: no write
        await daemon.write_status(entry, target, quiet)
        await asyncio.sleep(standalone.FLUSH_AFTER_S + 0.2)
        return changed

    try:
        assert daemon.reload()
        monkeypatch.setattr(standalone.status_file, "write", counted)
        changed = asyncio.run(polls())
        assert len(writes) == 1 and writes[0] - changed < 0.45, writes
        assert json.loads(path.read_text())["tables"]["default/t"]["version"] == 2  # its last
    finally:
        daemon.fleet.close()


def test_events_are_taken_once_the_loaded_tables_are_indexed(tmp_path: Path) -> None:
    """Until then the webhook answers 503 (runtime/webhook.py), so a store sends its queued
    events again rather than their finding no table."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(  # events come from object stores; this one is fsspec's
        "apiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\nmetadata: {name: t}\n"
        "spec: {uri: 'memory://lake/events-indexed', events: {source: webhook}}\n"
    )
    daemon = standalone.Standalone(folder, folder / "status.json", Metrics())
    daemon.fleet.events.ready = False  # as `deltakeeper run --events-listen` starts it
    indexed_when_ready: list[bool] = []

    async def main() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(daemon.run(stop))
        while not daemon.fleet.events.ready:
            await asyncio.sleep(0)
        key = "events-indexed/_delta_log/00000000000000000000.json"
        indexed_when_ready.append(daemon.fleet.events.deliver("webhook", "lake", key) == "woke")
        stop.set()
        await running

    asyncio.run(main())
    assert indexed_when_ready == [True]
