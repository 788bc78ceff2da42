"""Standalone mode's daemon driven one pass at a time, and a folder of manifests with a DeltaLake
to drive it over (the unit tests of standalone/, and tests/integration/test_lake_discovery.py)."""

from __future__ import annotations

import json
from pathlib import Path

from deltakeeper.resources.lake import table_name
from deltakeeper.standalone import tables as standalone
from tests.support.manifests import lake_doc
from tests.support.tables import small_table


async def cycle(daemon: standalone.Standalone) -> None:
    """What one pass of `run` does, with every lake due."""
    daemon.reload()
    await daemon.scan_all()
    for key, entry in daemon.tables.items():
        target = await daemon.target(key, entry)
        await daemon.fleet.poll_once(target, entry.watcher, daemon.registry.publish)
    daemon.flush()


def write_lake_folder(tmp_path: Path) -> tuple[Path, Path]:
    """(data, manifests): tables events (3 versions), sales/orders and explicit under data; in
    manifests the DeltaLake data/main over them (its template: label team=x, a checkpoint every 2
    commits), a malformed DeltaLake data/broken, and a DeltaTable data/mine for `explicit`,
    suspended."""
    data = tmp_path / "lake"
    small_table(data / "events", commits=3)
    small_table(data / "sales" / "orders", commits=1)
    small_table(data / "explicit", commits=1)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    template = {"labels": {"team": "x"}, "checkpoint": {"interval": 2}}
    lake = lake_doc("main", f"file://{data}", tableTemplate=template)
    (manifests / "lake.json").write_text(json.dumps(lake))
    bad = lake_doc("broken", f"file://{data}", maxDepth="three")
    (manifests / "broken.json").write_text(json.dumps(bad))
    table = {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaTable",
        "metadata": {"name": "mine", "namespace": "data"},
        "spec": {"uri": f"file://{data}/explicit/", "suspend": True},
    }
    (manifests / "table.json").write_text(json.dumps(table))
    return data, manifests


def found_key(path: str) -> str:
    """The status file's key of the table that write_lake_folder's DeltaLake finds at `path`."""
    return f"data/{table_name(path, 'main')}"
