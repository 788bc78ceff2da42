"""A folder's tables in the runtime's registry: DeltaTable manifests, and the tables its
DeltaLakes found (lakes.py); the Sink that keeps their statuses for the status file.

A malformed manifest is reported and skipped; the others run. A file that was good before and
is bad now stays at its last good version, as the API server keeps an object whose new
manifest it rejects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.maintenance.policy import MAX_CONCURRENT, POLL_INTERVAL_MS
from deltakeeper.resources import folder as manifest_folder
from deltakeeper.resources.conditions import ConditionStatus, ConditionType
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.resources.status_fields import DISCOVERY, SPEC_DIGEST, LakeStatusField
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.runtime import credentials, metrics, queues, status
from deltakeeper.runtime.conditions import table_found
from deltakeeper.runtime.discovery import LakeScan, lake_status
from deltakeeper.runtime.events import Events
from deltakeeper.runtime.fleet import Fleet, now_ms
from deltakeeper.runtime.heap import HEAP
from deltakeeper.runtime.history import History
from deltakeeper.runtime.model import Event, Observation, Target
from deltakeeper.runtime.registry import Entry, Key, Registry, same_table
from deltakeeper.runtime.targets import resolve, unchanged
from deltakeeper.runtime.watcher import TableWatcher
from deltakeeper.standalone import status_file
from deltakeeper.standalone.lakes import FolderLake, Lakes, name_of
from deltakeeper.standalone.report import print_summary, ready
from deltakeeper.standalone.status_file import spec_digest
from deltakeeper.units import rfc3339

log = logging.getLogger("deltakeeper.standalone")
RELOAD_S = 2.0  # how often the folder is checked for changed manifests
# A changed status reaches the file this long after it changed (changes within it are one
# write), or later where writing the file takes longer: at most a tenth of the time is spent
# writing it.
FLUSH_AFTER_S = 0.1
WRITING_SHARE = 0.1


@dataclass(kw_only=True)
class FolderTable(Entry):
    """A manifest's table; its watcher lives as long as the manifest (one loop per run)."""

    generation: int
    watcher: TableWatcher


class Standalone:
    """The tables of a folder's manifests in the runtime's registry; the Sink that keeps
    their statuses for the status file."""

    def __init__(
        self,
        folder: Path,
        status_path: Path,
        registry: metrics.Metrics,
        max_concurrent: int = MAX_CONCURRENT,
        out: TextIO | None = None,
        clock: Callable[[], int] = now_ms,
        default_poll_ms: int = POLL_INTERVAL_MS,
        compactor: Compactor | None = None,
        history: History | None = None,
        memory_budget: int | None = None,
    ) -> None:
        self.folder = folder
        self.history = history  # the operation history, when --history-uri names one
        self.compactor = compactor  # how tables with compaction.enabled run their jobs
        self.status_path = status_path
        self.metrics = registry
        self.out = out or sys.stdout  # at run time: the CLI wraps it to mask secrets
        self.clock = clock
        self.default_poll_ms = default_poll_ms  # for tables whose spec and policy set none
        self.registry: Registry[FolderTable] = Registry(registry, self, self.target, log)
        self.registry.history = history
        self.fleet = Fleet(
            max_concurrent, clock=clock, memory_budget=memory_budget, events=Events(registry)
        )
        # Queue sources: a consumer per queue URI while a table names it (runtime/queues/).
        self.queues = queues.install(self.fleet.events)
        self.policies: list[PolicyResource] = []
        self.secrets: dict[tuple[str, str], Mapping[str, str]] = {}
        stored = status_file.read(status_path)
        self.statuses: dict[str, dict[str, Any]] = stored.get("tables", {})
        self._signature: object = None
        self._good: dict[str, list[Any]] = {}  # file -> its last documents that loaded
        self.rejected: list[str] = []  # what the last reload refused, file and field named
        self._dirty = False
        self._flushed_ms = 0  # when the status file was last written (the clock's ms)
        self._flush_soon: asyncio.TimerHandle | None = None  # a write on its way
        self._written_at = 0.0  # time.monotonic() at the end of the last write
        self._write_s = 0.0  # how long it took
        self.lakes = Lakes(
            registry,
            clock,
            self._secret,
            self._scanned,
            stored.get("lakes", {}),
            self.fleet.events,
            self._appeared,
        )
        self._manifest_tables: dict[Key, TableResource] = {}
        self._origin: dict[Key, tuple[FolderLake, str]] = {}  # lake tables: lake and path
        self._gone: set[Key] = set()  # lake tables the last good scan did not find: not polled

    @property
    def tables(self) -> dict[Key, FolderTable]:
        return self.registry.entries

    # -- manifests ----------------------------------------------------------------------------
    def reload(self) -> bool:
        """Re-read the folder if any manifest changed; True when it did."""
        signature = _signature(self.folder)
        if signature == self._signature:
            return False
        self._signature = signature
        loaded = manifest_folder.load(self.folder, self._good)
        self._good = loaded.good
        self.rejected = [credentials.SCRUBBER.scrub(str(e)) for e in loaded.errors]
        for message in self.rejected:
            log.error("%s", message)
        for path in loaded.kept:
            log.warning("%s: kept its last good version until the file is fixed", path)
        self._dirty = True
        self.policies = list(loaded.policies)
        self.secrets = dict(loaded.secrets)
        credentials.SCRUBBER.register(
            v for data in self.secrets.values() for v in credentials.secret_values(data)
        )
        self._manifest_tables = {(t.namespace, t.name): t for t in loaded.tables}
        self.lakes.sync(loaded.lakes, self.statuses)
        self._sync_tables()
        log.info(
            "manifests in %s: %d tables, %d policies, %d lakes, %d errors",
            self.folder,
            len(self._manifest_tables),
            len(self.policies),
            len(self.lakes.entries),
            len(loaded.errors),
        )
        return True

    def _sync_tables(self, poke: bool = True) -> None:
        """Watch the manifests' tables and the lakes' tables that are there, no other; a lake's
        table that is gone keeps its status, unpolled. `poke`: poll the tables watched already
        now (the manifests were reloaded: a policy or Secret may have changed); not after a
        lake's scan or a new table's event, which change no table watched already (with
        storage events, a poke of every table would be a listing of every table)."""
        wanted = dict(self._manifest_tables)
        was_gone = self._gone
        self._origin, self._gone = {}, set()
        uris = {same_table(str(t.spec.get("uri") or "")) for t in wanted.values()}
        for lake in self.lakes.entries.values():
            for path, table in sorted(lake.tables.items()):
                key = (table.namespace, table.name)
                if key in wanted or same_table(str(table.spec["uri"])) in uris:
                    continue  # a DeltaTable manifest for it wins
                self._origin[key] = (lake, path)
                if path in lake.gone:
                    self._gone.add(key)
                else:
                    wanted[key] = table
        for key in [k for k in self.tables if k not in wanted]:
            self._drop(key)
        for key in was_gone - self._gone - wanted.keys():  # its lake removed, say
            self.forget(key)
        for key in self._gone:
            self._mark_gone(key)
        for key, resource in wanted.items():
            self._upsert(key, resource, poke)

    def _mark_gone(self, key: Key) -> None:
        """The status a gone table keeps: the last poll's, `present: false`, TableFound=False."""
        lake, path = self._origin[key]
        old = self.statuses.setdefault(name_of(key), {})
        conditions = [c for c in old.get(F.CONDITIONS) or [] if isinstance(c, dict)]
        marked = [c for c in conditions if c.get("type") == ConditionType.TABLE_FOUND]
        if (
            old.get(DISCOVERY) == lake.discovery(path)
            and marked[-1:]
            and (marked[-1].get("status") == ConditionStatus.FALSE)
        ):
            return  # marked already
        kept = "no longer polled; its status is kept and nothing is deleted"
        found = table_found(lake.name, path, False, kept)
        generation = int(old.get(F.OBSERVED_GENERATION) or 1)
        mark = status.conditions_status([found], old, generation, self.clock())
        others = [c for c in conditions if c.get("type") != ConditionType.TABLE_FOUND]
        old[str(F.CONDITIONS)] = others + mark
        old[DISCOVERY] = lake.discovery(path)
        self._dirty = True

    def _scanned(self, entry: FolderLake, scan: LakeScan) -> None:
        """A lake's scan is in: watch what it found, and say so in the statuses."""
        self._sync_tables(poke=False)
        managed = {
            name_of(key): self.statuses.get(name_of(key))
            for key, (origin, _) in self._origin.items()
            if origin is entry
        }
        lake_statuses = self.lakes.statuses
        previous = lake_statuses.get(entry.name)
        lake_statuses[entry.name] = lake_status(scan, managed, previous, entry.resource.generation)
        if scan.ok:  # a failed scan says nothing about which tables are there
            missing = sum(1 for k in self._gone if self._origin[k][0] is entry)
            lake_statuses[entry.name][str(LakeStatusField.MISSING_TABLES)] = missing
        for key, (origin, path) in self._origin.items():
            if origin is entry and name_of(key) in self.statuses:
                self.statuses[name_of(key)][DISCOVERY] = entry.discovery(path)
        self._dirty = True

    def _appeared(self, entry: FolderLake, path: str) -> None:
        """A storage event's new table, checked: watched now, not at the next pass (a
        DeltaTable manifest for it still wins, as after a scan)."""
        self._sync_tables(poke=False)
        self._dirty = True
        for key, (origin, where) in self._origin.items():
            table = self.tables.get(key)
            if origin is entry and where == path and table is not None and table.loop is None:
                self.registry.start(key, self.fleet, table.watcher)
                if table.loop is not None:
                    table.loop.poke()  # its first poll now, not after the start's jitter

    async def scan_all(self) -> None:
        """Scan every lake now and wait for the scans (`--once`)."""
        await self.lakes.scan_all()

    def _upsert(self, key: Key, resource: TableResource, poke: bool = True) -> None:
        known = self.tables.get(key)
        if known is None:
            previous = self.statuses.get(name_of(key), {})
            watcher = TableWatcher(self.clock(), status.last_maintenance(previous), self.compactor)
            generation = max(resource.generation, int(previous.get(F.OBSERVED_GENERATION) or 0))
            if previous and previous.get(SPEC_DIGEST) != spec_digest(resource.spec):
                generation += 1
            self.registry.add(key, FolderTable(resource, generation=generation, watcher=watcher))
            self.statuses.setdefault(name_of(key), {})[SPEC_DIGEST] = spec_digest(resource.spec)
            return
        if known.resource.spec != resource.spec or known.resource.labels != resource.labels:
            # Standalone manifests rarely carry metadata.generation; a changed spec is a new one.
            known.generation += 1
            self.registry.change(key, resource)
            self.statuses.setdefault(name_of(key), {})[SPEC_DIGEST] = spec_digest(resource.spec)
            if known.loop is not None:
                known.loop.poke()  # its new spec: poll now
        elif poke and known.loop is not None:
            known.loop.poke()  # a policy or Secret may have changed too: poll now

    def _drop(self, key: Key) -> None:
        self.registry.remove(key)
        if key in self._gone:
            log.info("%s/%s: gone from its DeltaLake; no longer polled, status kept", *key)
        else:
            log.info("%s/%s: manifest removed; no longer watched (its data is untouched)", *key)

    async def target(self, key: Key, entry: FolderTable) -> Target:
        # A changed spec replaces the resource and bumps the generation together.
        duplicates = self.registry.duplicates(key)

        def make() -> Target:
            target = resolve(
                entry.resource, self.policies, self._secret, duplicates, self.default_poll_ms
            )
            return replace(target, generation=entry.generation)

        return entry.target(self._inputs(key, entry), make)

    def _inputs(self, key: Key, entry: FolderTable) -> tuple[object, ...]:
        """What a table's Target is resolved from: the same objects while nothing changed."""
        return (entry.resource, self.policies, self.secrets, self.registry.duplicates(key))

    def _secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.secrets.get((namespace, name))

    # -- the Sink -----------------------------------------------------------------------------
    async def write_status(self, entry: FolderTable, target: Target, obs: Observation) -> bool:
        name = name_of(target.key)
        old = self.statuses.get(name, {})
        origin = self._origin.get(target.key)
        found = [table_found(origin[0].name, origin[1], True)] if origin is not None else []
        now = self.clock()
        new = status.build(target, obs, old, now, found)
        if origin is not None:
            new[DISCOVERY] = origin[0].discovery(origin[1])
        new[SPEC_DIGEST] = old.get(SPEC_DIGEST)  # kept with it (no copies: this runs a poll)
        # As the operator's status writes: a poll that only moved lastPoll does not rewrite
        # the file (the whole fleet's, every RELOAD_S); a refresh an hour still shows it.
        if status.worth_writing(old, new, now, self._flushed_ms):
            self._dirty = True
            self._write_soon()
        self.statuses[name] = new
        return True

    def _write_soon(self) -> None:
        """Write the file shortly after a status changed (a commit shows in it within about
        FLUSH_AFTER_S), not at the next reload; a burst of changes is one write."""
        if self._flush_soon is not None:
            return
        since = time.monotonic() - self._written_at
        delay = max(FLUSH_AFTER_S, self._write_s / WRITING_SHARE - since)
        self._flush_soon = asyncio.get_running_loop().call_later(delay, self._flush_now)

    def _flush_now(self) -> None:
        self._flush_soon = None
        self.flush()

    def quiet(self, entry: FolderTable, target: Target, obs: Observation) -> bool:
        """Only `lastPoll` moves (in memory: the file is rewritten for it once an hour, which
        write_status does)."""
        old = self.statuses.get(name_of(target.key))
        if old is None or self.clock() - self._flushed_ms >= status.REFRESH_S * 1000:
            return False
        origin = self._origin.get(target.key)
        if origin is not None and old.get(DISCOVERY) != origin[0].discovery(origin[1]):
            return False
        old[str(F.LAST_POLL)] = rfc3339(obs.polled_ms)
        return True

    def fresh(self, key: Key, entry: FolderTable, target: Target) -> bool:
        cached = entry.cached
        return (
            cached is not None
            and cached[1] is target
            and unchanged(cached[0], self._inputs(key, entry))
        )

    def post_event(self, entry: FolderTable, event: Event) -> None:
        pass  # events are in the log only

    def forget(self, key: Key) -> None:
        if key in self._gone:
            return  # a gone lake table keeps its status
        self.statuses.pop(name_of(key), None)
        self._dirty = True

    def flush(self) -> None:
        if self._flush_soon is not None:  # this write is it
            self._flush_soon.cancel()
            self._flush_soon = None
        if not self._dirty:
            return
        started = time.monotonic()
        self._dirty = False
        self._flushed_ms = self.clock()
        body = {
            "updated": self._flushed_ms,
            "folder": str(self.folder),
            "tables": self.statuses,
            "lakes": self.lakes.statuses,
            "rejected": self.rejected,
        }
        status_file.write(self.status_path, body)
        self._written_at = time.monotonic()
        self._write_s = self._written_at - started

    # -- running ------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event, once: bool = False, summary_s: float = 0) -> int:
        heartbeat = asyncio.create_task(self.fleet.heartbeat(heap=None if once else HEAP))
        stalls = None if once else asyncio.create_task(self.registry.watch_stalls())
        writing = (
            None if once or self.history is None else asyncio.create_task(self.history.keep(stop))
        )
        try:
            if once:
                return await self._once()
            last_summary = 0.0
            while not stop.is_set():
                self.reload()
                loop_now = asyncio.get_running_loop().time()
                self.lakes.scan_due(loop_now)
                for key, entry in self.tables.items():
                    if entry.loop is None:
                        self.registry.start(key, self.fleet, entry.watcher)
                if not self.fleet.events.ready:  # the first load: events wait for its index
                    await self.fleet.resolved()
                    self.fleet.events.ready = True
                self.flush()
                if summary_s and loop_now - last_summary >= summary_s:
                    last_summary = loop_now
                    self.print_summary()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RELOAD_S)
            return 0
        finally:
            self.fleet.begin_stop()
            heartbeat.cancel()
            if stalls is not None:
                stalls.cancel()
            if writing is not None:
                writing.cancel()
            self.lakes.cancel()
            await self.registry.stop()
            for entry in self.tables.values():
                entry.watcher.compactions.stop()  # no job outlives `run`
            await asyncio.to_thread(self.fleet.close)
            if self.history is not None:  # what the last polls and maintenance did, too
                await asyncio.to_thread(self.history.flush)
            self.flush()

    async def _once(self) -> int:
        """Poll every table once (maintenance included), write the status, exit 0 when every
        table is Ready and no manifest was rejected."""
        self.reload()
        await self.scan_all()
        for key, entry in self.tables.items():
            target = await self.target(key, entry)
            await self.fleet.poll_once(target, entry.watcher, self.registry.publish)
        self.flush()
        self.print_summary()
        all_ready = all(
            ready(s) == ConditionStatus.TRUE
            for s in [*self.statuses.values(), *self.lakes.statuses.values()]
        )
        return 0 if all_ready and not self.rejected else 1

    def print_summary(self) -> None:
        print_summary(self.statuses, self.out, self.rejected, self.lakes.statuses)


def _signature(folder: Path) -> object:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return None
    return tuple(
        (e.name, e.stat().st_mtime_ns, e.stat().st_size)
        for e in entries
        if e.is_file() and e.name.endswith((".yaml", ".yml", ".json"))
    )
