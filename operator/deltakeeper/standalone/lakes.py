"""A folder's DeltaLakes: each scanned every scanInterval (in a thread: listing blocks) for the
tables under its prefix. Each table found is maintained as the DeltaTable
`resources.lake.table_manifest` describes (a DeltaTable manifest for the same URI wins; see
tables.py). A table that disappears is no longer polled but keeps its status, marked
`discovery.present: false`: nothing is deleted. It is polled again when a scan finds it, and
the status file remembers it as gone across a restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.resources import manifests
from deltakeeper.resources.conditions import EventType
from deltakeeper.resources.lake import LakeResource, table_manifest
from deltakeeper.resources.manifests import TableResource
from deltakeeper.resources.status_fields import DISCOVERY
from deltakeeper.runtime.discovery import LakeScan, LakeScanner
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.targets import ReadSecret, resolve

log = logging.getLogger("deltakeeper.standalone")
Key = tuple[str, str]


@dataclass
class FolderLake:
    """A DeltaLake manifest, its scanner, and the DeltaTables its scans found."""

    resource: LakeResource
    scanner: LakeScanner
    due: float = 0.0  # loop time of the next scan
    task: asyncio.Task[LakeScan] | None = None
    tables: dict[str, TableResource] = field(default_factory=dict)  # path -> table
    gone: set[str] = field(default_factory=set)  # paths the last good scan did not find

    @property
    def name(self) -> str:
        return name_of((self.resource.namespace, self.resource.name))

    def table(self, path: str) -> TableResource:
        body = table_manifest(self.resource, path)
        source = f"DeltaLake {self.resource.namespace}/{self.resource.name}"
        parsed = manifests.parse(body, source)
        assert isinstance(parsed, TableResource)  # parse returns the kind it is given
        return parsed

    def discovery(self, path: str) -> dict[str, Any]:
        """A table's origin, and whether the lake's last good scan still found it."""
        return {"lake": self.name, "path": path, "present": path not in self.gone}


def name_of(key: Key) -> str:
    """A table's or lake's name in the status file: namespace/name."""
    return f"{key[0]}/{key[1]}"


class Lakes:
    """The folder's DeltaLakes and their scans; `scanned` hears of each scan's result."""

    def __init__(
        self,
        metrics: Metrics,
        clock: Callable[[], int],
        read_secret: ReadSecret,
        scanned: Callable[[FolderLake, LakeScan], None],
        statuses: dict[str, dict[str, Any]],
    ) -> None:
        """`statuses`: the lakes' statuses by name, as the status file had them."""
        self.metrics, self.clock = metrics, clock
        self.read_secret, self.scanned = read_secret, scanned
        self.entries: dict[Key, FolderLake] = {}
        self.statuses = statuses

    def sync(
        self, lakes: Sequence[LakeResource], statuses: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Keep the lakes `lakes` names, no other; `statuses`: the tables' statuses, which say
        which of a new lake's tables were gone when the status file was written."""
        wanted = {(lake.namespace, lake.name): lake for lake in lakes}
        for key in [k for k in self.entries if k not in wanted]:
            self.remove(key)
        for key, lake in wanted.items():
            entry = self.entries.get(key)
            if entry is None:
                scanner = LakeScanner(lake, self.metrics, self.clock)
                entry = self.entries[key] = FolderLake(lake, scanner)
                entry.gone = _gone_before(entry.name, statuses)  # until a scan finds them
                entry.tables = {path: entry.table(path) for path in entry.gone}
            elif entry.resource != lake:
                entry.resource = entry.scanner.lake = lake
                entry.due = 0.0  # scan again now, under the new spec
                entry.tables = {path: entry.table(path) for path in entry.tables}

    def remove(self, key: Key) -> None:
        old = self.entries.pop(key)
        if old.task is not None:
            old.task.cancel()
        self.metrics.forget_lake(*key)
        self.statuses.pop(name_of(key), None)
        log.info("%s/%s: DeltaLake removed; its tables are no longer watched", *key)

    def scan_due(self, now: float) -> None:
        """Start the scans that are due (each in a thread: listing blocks)."""
        for entry in self.entries.values():
            if entry.task is None and now >= entry.due:
                entry.due = now + entry.resource.scan_interval_s
                entry.task = asyncio.create_task(self._scan(entry))

    async def scan_all(self) -> None:
        """Scan every lake now and wait for the scans (`--once`)."""
        for entry in self.entries.values():
            entry.due = 0.0
        self.scan_due(0.0)
        tasks = [e.task for e in self.entries.values() if e.task is not None]
        await asyncio.gather(*tasks)

    def cancel(self) -> None:
        for entry in self.entries.values():
            if entry.task is not None:
                entry.task.cancel()

    async def _scan(self, entry: FolderLake) -> LakeScan:
        try:
            target = resolve(entry.resource.root_table(), [], self.read_secret)
            if target.problem is not None:
                scan = entry.scanner.failed(target.problem.message, target.problem.reason)
            else:
                scan = await asyncio.to_thread(entry.scanner.scan, target.storage_options)
            self._found(entry, scan)
            self.scanned(entry, scan)
            return scan
        finally:
            entry.task = None

    def _found(self, entry: FolderLake, scan: LakeScan) -> None:
        lake = entry.resource
        if scan.ok:
            for path in scan.appeared:
                entry.gone.discard(path)
                if path not in entry.tables:
                    entry.tables[path] = entry.table(path)
            entry.gone.update(scan.disappeared)
        for event in scan.events():
            level = logging.WARNING if event.type is EventType.WARNING else logging.INFO
            log.log(level, "%s/%s: %s: %s", lake.namespace, lake.name, event.reason, event.message)


def _gone_before(lake: str, statuses: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The lake's tables the status file says were gone when it was written."""
    return {
        str(where.get("path"))
        for s in statuses.values()
        if (where := s.get(DISCOVERY) or {}).get("lake") == lake and where.get("present") is False
    }
