"""A folder's DeltaLakes: each scanned every scanInterval (in a thread: listing blocks) for the
tables under its prefix. Each table found is maintained as the DeltaTable
`resources.lake.table_manifest` describes (a DeltaTable manifest for the same URI wins; see
tables.py). A table that disappears is no longer polled but keeps its status, marked
`discovery.present: false`: nothing is deleted. It is polled again when a scan finds it, and
the status file remembers it as gone across a restart.

A lake whose tableTemplate has `events` also hears of new tables from its source: a commit in
the log of a table it does not watch yet (runtime/events.py) has that one log listed (the
event is a hint, not believed) and, if it is a table a scan would report, the table is watched
at once, as the next scan would have added it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.delta.discover import ROOT, is_table, reportable
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.storage import open_storage
from deltakeeper.resources import manifests
from deltakeeper.resources.conditions import EventType
from deltakeeper.resources.lake import LakeResource, table_manifest
from deltakeeper.resources.manifests import TableResource
from deltakeeper.resources.status_fields import DISCOVERY
from deltakeeper.runtime.discovery import LakeScan, LakeScanner
from deltakeeper.runtime.events import Events
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.targets import ReadSecret, resolve

log = logging.getLogger("deltakeeper.standalone")
Key = tuple[str, str]
MAX_HEARD = 1024  # new-table paths waiting for their check, per lake; more events are dropped


@dataclass
class FolderLake:
    """A DeltaLake manifest, its scanner, and the DeltaTables its scans found."""

    resource: LakeResource
    scanner: LakeScanner
    due: float = 0.0  # loop time of the next scan
    task: asyncio.Task[LakeScan] | None = None
    tables: dict[str, TableResource] = field(default_factory=dict)  # path -> table
    gone: set[str] = field(default_factory=set)  # paths the last good scan did not find
    heard: set[str] = field(default_factory=set)  # new tables an event named, being checked
    unlisten: Callable[[], None] | None = None  # stops its new-table events

    @property
    def key(self) -> Key:
        return (self.resource.namespace, self.resource.name)

    @property
    def name(self) -> str:
        return name_of(self.key)

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
        events: Events | None = None,
        appeared: Callable[[FolderLake, str], None] | None = None,
    ) -> None:
        """`statuses`: the lakes' statuses by name, as the status file had them; `events`:
        the daemon's, whose events for new tables `appeared` hears of once checked."""
        self.metrics, self.clock = metrics, clock
        self.read_secret, self.scanned = read_secret, scanned
        self.events, self.appeared = events, appeared
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
                self._listen(entry)
            elif entry.resource != lake:
                entry.resource = entry.scanner.lake = lake
                entry.due = 0.0  # scan again now, under the new spec
                entry.tables = {path: entry.table(path) for path in entry.tables}
                self._listen(entry)

    def remove(self, key: Key) -> None:
        old = self.entries.pop(key)
        if old.task is not None:
            old.task.cancel()
        if old.unlisten is not None:
            old.unlisten()
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

    # -- new tables by storage events -------------------------------------------------------------
    def _listen(self, entry: FolderLake) -> None:
        """Hear of the lake's new tables from its template's event source, if it has one."""
        if entry.unlisten is not None:
            entry.unlisten()
            entry.unlisten = None
        source = entry.resource.events_source
        if self.events is not None and source is not None:
            entry.unlisten = self.events.lake(
                source, entry.resource.uri, lambda path: self._heard(entry, path)
            )

    def _heard(self, entry: FolderLake, path: str) -> bool:
        """An event names a commit in the log of a table at `path` that is not watched: check
        it (in a thread) if a scan would report it; False when a scan would not."""
        lake = entry.resource
        if not reportable(
            path, include=lake.include, exclude=lake.exclude, max_depth=lake.max_depth
        ):
            return False
        watched = path in entry.tables and path not in entry.gone
        if not watched and path not in entry.heard and len(entry.heard) < MAX_HEARD:
            entry.heard.add(path)
            asyncio.get_running_loop().create_task(self._check(entry, path))
        return True

    async def _check(self, entry: FolderLake, path: str) -> None:
        try:
            target = resolve(entry.resource.root_table(), [], self.read_secret)
            if target.problem is not None:
                return  # the scan says why in the lake's status
            found = await asyncio.to_thread(
                _is_table, entry.resource.uri, target.storage_options, path
            )
            if not found or self.entries.get(entry.key) is not entry:
                return
            entry.gone.discard(path)
            entry.tables.setdefault(path, entry.table(path))
            known = entry.scanner.known
            if known is not None and path not in known:  # the next scan's news: none
                entry.scanner.known = tuple(sorted({*known, path}))
            lake = entry.resource
            log.info(
                "%s/%s: table %s appeared (a storage event for its first commit)",
                lake.namespace,
                lake.name,
                path,
            )
            if self.appeared is not None:
                self.appeared(entry, path)
        finally:
            entry.heard.discard(path)

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


def _is_table(uri: str, options: Mapping[str, Any], path: str) -> bool:
    """One listing of the log at `path` under `uri`: a commit or checkpoint in it?"""
    try:
        storage = open_storage(uri, dict(options))
        return is_table(storage, "" if path == ROOT else path)
    except (DeltaError, OSError) as e:
        log.warning("cannot check %s/%s for a new table: %s", uri, path, type(e).__name__)
        return False


def _gone_before(lake: str, statuses: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The lake's tables the status file says were gone when it was written."""
    return {
        str(where.get("path"))
        for s in statuses.values()
        if (where := s.get(DISCOVERY) or {}).get("lake") == lake and where.get("present") is False
    }
